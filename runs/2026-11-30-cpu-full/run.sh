# The CPU's paths at full size on the MoE models (2-core AMD EPYC, DEV=CPU), from the repository root:
#   check: the prefill path (the CPU's hand-written products of a chunk: Q4_0 buffer form, routed experts in tiles), the
#          decode path (one token: Q4_0 / Q5_K / Q6_K products, routed entries, MLA's decode attention) and tinygrad's own
#          fp32 kernels on the same 160 random tokens (a chunk of 128, one of 32; tools.path_check)
#   bench: decode and a 128-token prompt's prefill beside llama.cpp's CPU build in one run
#   batch: batched decode of 1 / 2 / 4 / 8 sequences beside llama-batched-bench (each row's first tokens its prompt's alone)
cd "$(dirname "$0")/../.."
export DEV=CPU PYTHONUNBUFFERED=1
R=runs/2026-11-30-cpu-full
case $1 in
  check) for m in ${PRESETS:-deepseek-v2-lite glm-4.7-flash youtu-llm-2b}; do
           ./run python -m tools.path_check --presets $m --depth 0 --tokens ${TOKENS:-160} --skip 8 2>&1 | tee $R/check_$m${TAG:+_$TAG}.txt; done ;;
  bench) ./run python -m tools.gpu_bench --presets ${PRESETS:-deepseek-v2-lite,glm-4.7-flash} --decode 16 --prefill ${PROMPT:-128} --llama \
           --json $R/${TAG:-bench}.json 2>&1 | tee $R/${TAG:-bench}.txt ;;
  batch) ./run python -m tools.gpu_bench --presets ${PRESETS:-deepseek-v2-lite,glm-4.7-flash} --batch 1,2,4,8 --decode 32 --llama \
           --json $R/batch.json 2>&1 | tee $R/batch.txt ;;
esac
