# GPU steps of 2026-11-30 (afternoon), from the repository root; carry upstream/tinygrad upstream/.stamp upstream/.cache .cache/vocab
# (+ .cache/llama/llama-cpp-src.tar.xz for step 1).
#   1: llama.cpp built (~265 s) and the three release files synthesized
#   3: the generated path beside llama.cpp in one run
#   2: what each kernel family of a generated decode token costs in its graph (Youtu-LLM-2B), and a generated 512-token chunk
#      kernel by kernel (Youtu-LLM-2B, the series of 59)
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1 PYTHONPATH=.
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { for m in "$@"; do python3 -c "from apps import synth; synth.generate('$m', 'release', progress=False)"; done; }
case $1 in
  1) python3 -m tools.llama_bench build --time-limit 400 2>&1 | tail -3
     synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash ;;
  3) synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash
     timeout 570 python3 -m tools.gpu_bench --kernels generated --llama --decode 32 --prefill 512 --json "$OUT/side_gen.json" 2>&1 \
       | tee "$OUT/side_gen.log" | grep -v '^{' | tail -12 ;;
  2) synth youtu-llm-2b
     timeout 330 python3 -m tools.kernel_costs --model youtu-llm-2b --kernels generated --pos 32 --count 20 --rounds 2 2>&1 | tee "$OUT/costs_gen_youtu.txt" | tail -40
     timeout 150 python3 -m tools.profile --model youtu-llm-2b --kernels generated --target prompt --chunk 512 --pos 0 --top 40 2>&1 | tee "$OUT/prof_pp_youtu.txt" | sed -n 4p ;;
esac
# 4: Youtu-LLM-2B's five decode products (generated, Q4_0) under variants of their opts, timed in a graph of 64 chained calls
case $1 in
  4) H="R1:0,R2:0,R1:0"
     timeout 560 python3 runs/2026-11-30-fuse/mv_probe.py 2048:6144:r 2048:2048:r 3072:1536 2112:2048 12288:2048 -- heur \
       "$H,G0:32,U0:4,L0:4" "$H,G0:32,L0:4" "$H,G0:32,U0:2,L0:4,R0:2" "$H,G0:32,U0:2,L0:2" "$H,G0:16,U0:2,L0:4" \
       "$H,G0:32,U0:2,L0:8" "$H,G0:32,U0:4,L0:2" 2>&1 | tee "$OUT/mv_probe.txt" ;;
esac
# 5: the hand-written path beside llama.cpp in one run (after step 1 on the same machine)
#   6: patch 57's A/B on GLM-4.7-Flash (the series of 56 against 57)
case $1 in
  5) timeout 580 python3 -m tools.gpu_bench --llama --decode 64 --prefill 512 --json "$OUT/side_hand.json" 2>&1 \
       | tee "$OUT/side_hand.log" | grep -v '^{' | tail -12 ;;
  6) synth glm-4.7-flash
     OUT=$OUT PATCH=57 PRESETS=glm-4.7-flash LIMIT=280 bash tools/gpu_session.sh abpatch ;;
esac
# 7: start-up in fresh processes beside llama.cpp (after step 1 on the same machine)
case $1 in
  7) timeout 400 python3 -m tools.start_time --presets youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash --kernels hand --llama \
       --json "$OUT/start.json" 2>&1 | tee "$OUT/start.txt" | tail -12 ;;
esac
# 8: a second process's import, by module (python -X importtime), and its start under cProfile (Youtu-LLM-2B, the hand path)
case $1 in
  8) synth youtu-llm-2b
     for i in 1 2; do python3 -X importtime -c "import apps; from apps import engine; from tinygrad import Device" 2> "$OUT/importtime_$i.txt"; done
     sort -t'|' -k2 -n "$OUT/importtime_2.txt" | tail -25
     D=$(mktemp -d); export CACHEDB=$D/cache.db
     python3 -m tools.start_time --child youtu-llm-2b hand 16 $D/captures | tail -c 300; echo
     python3 -m cProfile -o "$OUT/start_second.prof" -m tools.start_time --child youtu-llm-2b hand 16 $D/captures | tail -c 300; echo
     python3 -c "import pstats; pstats.Stats('$OUT/start_second.prof').sort_stats('cumulative').print_stats(45)" > "$OUT/start_second.txt"
     python3 -c "import pstats; pstats.Stats('$OUT/start_second.prof').sort_stats('tottime').print_stats(30)" >> "$OUT/start_second.txt"
     head -80 "$OUT/start_second.txt" | tail -60 ;;
esac
# 9: start-up as the README's set-up leaves a machine (the bytecode of tinygrad and the apps written first; the calls above ran
#    without it: the carry leaves __pycache__ out and the machine does not write it), without llama.cpp
case $1 in
  9) python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash
     timeout 300 python3 -m tools.start_time --presets youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash --kernels hand \
       --json "$OUT/start_pyc.json" 2>&1 | tee "$OUT/start_pyc.txt" | tail -12 ;;
esac
# 10, 11 (the next lease, one machine): EXPERIMENT experiments/pdl-prefetch.diff: before its grid wait a generated kernel asks
#    L2 for the lines of its first loop step (B: PDL_PREFETCH=1), and also triggers its dependents right after the wait (C:
#    PDL_PREFETCH=2); A as the series is. Generated decode and prefill 512 of each, fresh caches per variant: 10 is round one
#    (A B C), 11 round two (C B A) and greedy tokens of B against the references (tools.gpu_check). The diff is applied on the
#    device's copy of the tree only.
pf_round() {
  for v in "$@"; do
    echo "-- PDL_PREFETCH=$v"
    CACHEDB=$(mktemp -d)/cache.db PDL_PREFETCH=$v timeout 180 python3 -m tools.gpu_bench --kernels generated --presets youtu-llm-2b,deepseek-v2-lite \
      --decode 32 --prefill 512 --json "$OUT/pf_$v.json" 2>&1 | grep -v '^{' | sed -n 1,3p
  done
}
case $1 in
  10|11) synth youtu-llm-2b deepseek-v2-lite
      grep -q _prefetch_before_wait upstream/tinygrad/renderer/cstyle.py || (cd upstream && patch -p1 < ../runs/2026-11-30-fuse/experiments/pdl-prefetch.diff) || exit 1 ;;
esac
case $1 in
  10) pf_round 0 1 2 ;;
  11) pf_round 2 1 0
      CACHEDB=$(mktemp -d)/cache.db PDL_PREFETCH=1 timeout 150 python3 -m tools.gpu_check release --kernels generated 2>&1 | tail -4 ;;
esac
