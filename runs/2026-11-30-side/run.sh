# GPU steps of 2026-11-30, from the repository root; carry upstream/tinygrad upstream/.stamp upstream/.cache .cache/vocab
# .cache/llama/llama-cpp-src.tar.xz.
#   1: llama.cpp built (~265 s; exit 3 means stopped early: run it again) and the three release files synthesized
#   2: the generated path beside llama.cpp in one run (the series of 56)
#   3: the hand-written path beside llama.cpp
#   5: a generated 512-token chunk kernel by kernel and BEAM=2 on its 5 slowest kernels (Youtu-LLM-2B, DeepSeek-V2-Lite)
#   4: a generated decode step kernel by kernel (Youtu-LLM-2B, DeepSeek-V2-Lite), then BEAM=2 on Youtu-LLM-2B's 8 slowest
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
  3) timeout 580 python3 -m tools.gpu_bench --llama --decode 64 --prefill 512 --json "$OUT/side_hand.json" 2>&1 \
       | tee "$OUT/side_hand.log" | grep -v '^{' | tail -12 ;;
  4) synth youtu-llm-2b deepseek-v2-lite
     for m in youtu-llm-2b deepseek-v2-lite; do
       timeout 150 python3 -m tools.profile --model $m --kernels generated --target decode --pos 32 --top 40 2>&1 | tee "$OUT/prof_dec_$m.txt" | tail -5; done
     timeout 280 python3 -m tools.beam_kernels --model youtu-llm-2b --kernels generated --target decode --pos 32 --top 8 --beam 2 2>&1 \
       | tee "$OUT/beam_dec_youtu.txt" ;;
  5) synth youtu-llm-2b deepseek-v2-lite
     for m in youtu-llm-2b deepseek-v2-lite; do
       timeout 100 python3 -m tools.profile --model $m --kernels generated --target prompt --chunk 512 --pos 0 --top 30 2>&1 | tee "$OUT/prof_pp_$m.txt" | sed -n 4p
       timeout 200 python3 -m tools.beam_kernels --model $m --kernels generated --target prompt --chunk 512 --pos 0 --top 5 --beam 2 2>&1 \
         | tee "$OUT/beam_pp_$m.txt" | tail -6; done ;;
esac
# 6: the int8 unpacking (routed experts' quants, GLM-4.7-Flash's shapes) under BEAM's pick for DeepSeek-V2-Lite's (step 5:
#    the heuristics' opts + LOCAL 0:4 UPCAST 0:2, 1.31x) and its parts
case $1 in
  6) timeout 200 python3 runs/2026-11-29-lanes/probe.py heur "U3:0,U1:0,L0:32,L1:4,L0:4,U0:2" "U3:0,U1:0,L0:32,L1:4,U0:2" \
       "U3:0,U1:0,L0:32,L1:4,U0:4" "U3:0,U1:0,L0:32,L1:4,L0:4" "U3:0,U1:0,L0:32,L1:4,L0:2,U0:2" "U3:0,U1:0,L0:32,L1:4,U0:2,L0:4" 2>&1 | tee "$OUT/probe6.txt" ;;
esac
# 7: patch 57 (an elementwise kernel of narrow stores upcasts its outer axis), the series of 56 (A) against 57 (B)
case $1 in
  7) synth youtu-llm-2b deepseek-v2-lite
     OUT=$OUT PATCH=57 PRESETS=youtu-llm-2b,deepseek-v2-lite LIMIT=170 bash tools/gpu_session.sh abpatch ;;
esac
# The next lease: steps 1 and 2 (the series of 58 beside llama.cpp: 58 changes no GPU kernel; it settles the 0.5x prefill
# target, 0.484x / 0.495x / 0.540x against this day's llama.cpp a lease apart), then
#   8: patch 57's A/B on GLM-4.7-Flash (Youtu-LLM-2B and DeepSeek-V2-Lite: h200/call7)
#   9: BEAM=2 on GLM-4.7-Flash's 6 slowest kernels of a generated 512-token chunk, picks checked
#  10: what each kernel family of a generated decode token costs in its graph (Youtu-LLM-2B: 744 kernels, 2.39 ms as run; the
#      all-hollow floor and the products' in-graph bandwidth say whether the step is its nodes or its matvecs)
case $1 in
  8) synth glm-4.7-flash
     OUT=$OUT PATCH=57 PRESETS=glm-4.7-flash LIMIT=280 bash tools/gpu_session.sh abpatch ;;
  9) synth glm-4.7-flash
     timeout 580 python3 -m tools.beam_kernels --model glm-4.7-flash --kernels generated --target prompt --chunk 512 --pos 0 \
       --top 6 --beam 2 2>&1 | tee "$OUT/beam_pp_glm.txt" ;;
  10) synth youtu-llm-2b
      timeout 580 python3 -m tools.kernel_costs --model youtu-llm-2b --kernels generated --count 20 --rounds 2 2>&1 | tee "$OUT/costs_gen_youtu.txt" | tail -30 ;;
esac
