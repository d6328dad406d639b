# The next lease's steps (from the repository root; carry upstream/tinygrad upstream/.stamp upstream/.cache .cache/vocab and
# .cache/llama/llama-cpp-src.tar.xz):
#   1: llama.cpp built in the lease (~265 s; exit 3 means stopped early: run it again)
#   2: the generated path beside llama.cpp in one run (the 0.5x prefill target, the series of 56)
#   3: the hand-written path beside llama.cpp (patches 53-56 touch the tinygrad kernels it runs around its own)
#   4 / 5: BEAM on the 8 slowest kernels of DeepSeek-V2-Lite's / GLM-4.7-Flash's generated 512-token chunk, picks checked
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1 PYTHONPATH=.
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { for m in "$@"; do python3 -c "from apps import synth; synth.generate('$m', 'release', progress=False)"; done; }
case $1 in
  1) python3 -m tools.llama_bench build --time-limit 540 2>&1 | tail -3 ;;
  2) synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash
     timeout 580 python3 -m tools.gpu_bench --kernels generated --llama --decode 32 --prefill 512 --json "$OUT/side_gen.json" 2>&1 \
       | tee "$OUT/side_gen.log" | grep -v '^{' | tail -12 ;;
  3) timeout 580 python3 -m tools.gpu_bench --llama --decode 64 --prefill 512 --json "$OUT/side_hand.json" 2>&1 \
       | tee "$OUT/side_hand.log" | grep -v '^{' | tail -12 ;;
  4) synth deepseek-v2-lite
     timeout 580 python3 -m tools.beam_kernels --model deepseek-v2-lite --kernels generated --target prompt --chunk 512 --pos 0 \
       --top 8 --beam 2 2>&1 | tee "$OUT/beam_dsv2.txt" ;;
  5) synth glm-4.7-flash
     timeout 580 python3 -m tools.beam_kernels --model glm-4.7-flash --kernels generated --target prompt --chunk 512 --pos 0 \
       --top 8 --beam 2 2>&1 | tee "$OUT/beam_glm.txt" ;;
esac
