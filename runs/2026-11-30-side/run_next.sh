# The next lease's steps (from the repository root; carry upstream/tinygrad upstream/.stamp upstream/.cache .cache/vocab and
# .cache/llama/llama-cpp-src.tar.xz):
#   1: llama.cpp built in the lease (~240 s; exit 3 means stopped early: run it again) and the three release files synthesized
#   2: the generated path (the series of 58; 58 changes no GPU kernel) beside llama.cpp in one run: the 0.5x prefill target (0.484x / 0.495x / 0.540x
#      against the 2026-11-30 run's llama.cpp, measured a lease apart)
#   3: patch 57's A/B on GLM-4.7-Flash (Youtu-LLM-2B and DeepSeek-V2-Lite: runs/2026-11-30-side/h200/call7)
#   4: BEAM=2 on GLM-4.7-Flash's 6 slowest kernels of a generated 512-token chunk, picks checked
#   5: what each kernel family of a generated decode token costs in its graph (Youtu-LLM-2B: 744 kernels, 2.39 ms as run; the
#      all-hollow floor and the products' in-graph bandwidth say whether the step is its nodes or its matvecs)
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1 PYTHONPATH=.
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { for m in "$@"; do python3 -c "from apps import synth; synth.generate('$m', 'release', progress=False)"; done; }
case $1 in
  1) python3 -m tools.llama_bench build --time-limit 400 2>&1 | tail -3
     synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash ;;
  2) synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash
     timeout 580 python3 -m tools.gpu_bench --kernels generated --llama --decode 32 --prefill 512 --json "$OUT/side_gen.json" 2>&1 \
       | tee "$OUT/side_gen.log" | grep -v '^{' | tail -12 ;;
  3) synth glm-4.7-flash
     OUT=$OUT PATCH=57 PRESETS=glm-4.7-flash LIMIT=280 bash tools/gpu_session.sh abpatch ;;
  4) synth glm-4.7-flash
     timeout 580 python3 -m tools.beam_kernels --model glm-4.7-flash --kernels generated --target prompt --chunk 512 --pos 0 \
       --top 6 --beam 2 2>&1 | tee "$OUT/beam_pp_glm.txt" ;;
  5) synth youtu-llm-2b
     timeout 580 python3 -m tools.kernel_costs --model youtu-llm-2b --kernels generated --count 20 --rounds 2 2>&1 | tee "$OUT/costs_gen_youtu.txt" | tail -30 ;;
esac
