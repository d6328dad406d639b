# GPU steps of 2026-11-30 (night), from the repository root; carry upstream/tinygrad upstream/.stamp upstream/.cache .cache/vocab.
#   1: the CLI on CUDA (the staging's context fix, b06308b): a greedy prompt; then the server under load (Youtu-LLM-2B, 32
#      slots): 1 / 8 / 16 / 32 streaming clients, then 300 requests with faults mixed in and the idle check
#   2: EXPERIMENT experiments/stage-x.diff (applied to the device's copy): a grouped reduction's lanes read an operand of the
#      reduce axes alone from local memory, copied there coalesced once a workgroup (STAGE=0 turns it off). Youtu-LLM-2B's
#      products alone (weights past the L2), STAGE 0 then 1; the generated decode and prefill 512 of Youtu-LLM-2B and
#      DeepSeek-V2-Lite, STAGE 0 1 0 1 (fresh kernel caches; captures are keyed by STAGE); STAGE=1's greedy tokens
#   3: the same diff on GLM-4.7-Flash: the generated decode and prefill 512, STAGE 0 1 1 0 (the second pair loads the
#      first pair's captures)
#   4: the series of 63 (the diff above as patches/0063): the generated decode and prefill 512 of the three models (a fresh
#      kernel cache), the greedy tokens of the tiny presets; then EXPERIMENT experiments/mv-local.diff: the matvec rule's
#      workgroup of up to 8 row groups (MV_LOCAL=8) where it took 4, Youtu-LLM-2B and DeepSeek-V2-Lite, then 4 again
#   5: EXPERIMENT experiments/stage-global.diff on the series of 63: an operand that global ranges index too (a routed
#      expert's x, a head's slice) is staged at the workgroup's base (STAGE_GLOBAL=0 turns it off). The generated decode and
#      prefill 512 of DeepSeek-V2-Lite and GLM-4.7-Flash, STAGE_GLOBAL 0 1 1 0 (a kernel cache a variant); STAGE_GLOBAL=1's
#      greedy tokens
#   6: the same diff (STAGE_GLOBAL=1): the tiny presets' greedy tokens, then the generated path beside llama.cpp in one run
#      (carry .cache/llama/llama-cpp-src.tar.xz too; llama.cpp builds in the background while the files are synthesized)
# (Steps 2-6 ran on the series before their diffs landed in patch 63: on the series as it is now they no longer apply.)
# The next lease (the series of 64 as landed):
#   7: BEAM=2 on the 8 slowest kernels of a generated decode step of DeepSeek-V2-Lite and GLM-4.7-Flash (each pick run on its
#      kernel's buffers against the heuristics'): what BEAM finds that the heuristics miss, for the 1.3x-llama.cpp decode target
#   8: a generated decode step at BEAM=2 against BEAM=0 (bench_block, DeepSeek-V2-Lite then GLM-4.7-Flash)
#   9: start times beside llama.cpp (Youtu-LLM-2B's second process was 2.2 s against 1.1)
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1 PYTHONPATH=.
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { for m in "$@"; do python3 -c "from apps import synth; synth.generate('$m', 'release', progress=False)"; done; }
serve() {  # serve M PORT ARGS...: a server in the background, its log in $OUT
  local m=$1 port=$2; shift 2
  python3 apps/llm.py --model $m --serve $port "$@" > "$OUT/server_$m.log" 2>&1 &
  echo $! > "$OUT/server.pid"
}
case $1 in
  1) M=${M:-youtu-llm-2b}
     synth $M
     /usr/bin/time -f "cli wall %e s, max rss %M KB" timeout 120 python3 apps/llm.py --model $M -p "The quick brown fox" -n 32 --temperature 0 -v 2>&1 | tail -8
     serve $M 8080 --parallel 32 --max-context 2048 --queue 64
     timeout 200 python3 -m tools.load --port 8080 --clients 1,8,16,32 --requests 3 --seconds 40 --wait 150 --json "$OUT/load_$M.json" 2>&1 | tail -12
     timeout 120 python3 -m tools.load --port 8080 --faults 300 --wait 30 2>&1 | tail -6
     kill $(cat "$OUT/server.pid"); sleep 2; tail -5 "$OUT/server_$M.log" ;;
  2) patch -s -d upstream -p1 < runs/2026-11-30-serve/experiments/stage-x.diff || exit 1
     python3 -m compileall -q upstream/tinygrad > /dev/null
     synth youtu-llm-2b deepseek-v2-lite
     for st in 0 1; do
       echo "-- STAGE=$st products"
       STAGE=$st timeout 150 python3 -m tools.bench_quantized --kernels generated --types Q4_0 --dtype float --rounds 3 \
         --shapes 2048:6144:r,12288:2048,3072:1536,2048:2048:r,2112:2048 --opts heur 2>&1 | tail -7
     done
     for st in 0 1 0 1; do
       echo "-- STAGE=$st"
       STAGE=$st CACHEDB=$(mktemp -d)/cache.db timeout 200 python3 -m tools.gpu_bench --kernels generated --presets youtu-llm-2b,deepseek-v2-lite \
         --decode 32 --prefill 512 --json "$OUT/stage_$st.$RANDOM.json" 2>&1 | grep -v '^{' | tail -3
     done
     STAGE=1 timeout 150 python3 -m tools.gpu_check release --kernels generated 2>&1 | tail -4 ;;
  3) patch -s -d upstream -p1 < runs/2026-11-30-serve/experiments/stage-x.diff || exit 1
     python3 -m compileall -q upstream/tinygrad > /dev/null
     synth glm-4.7-flash
     for st in 0 1 1 0; do
       echo "-- STAGE=$st"
       STAGE=$st CACHEDB=$(mktemp -d)/cache.db timeout 200 python3 -m tools.gpu_bench --kernels generated --presets glm-4.7-flash \
         --decode 32 --prefill 512 --json "$OUT/stage3_$st.$RANDOM.json" 2>&1 | grep -v '^{' | tail -3
     done ;;
  4) synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash
     CACHEDB=$(mktemp -d)/cache.db timeout 260 python3 -m tools.gpu_bench --kernels generated --presets youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash \
       --decode 32 --prefill 512 --json "$OUT/s63.json" 2>&1 | grep -v '^{' | tail -3
     timeout 100 python3 -m tools.gpu_check release --kernels generated 2>&1 | tail -4
     patch -s -d upstream -p1 < runs/2026-11-30-serve/experiments/mv-local.diff || exit 1
     python3 -m compileall -q upstream/tinygrad > /dev/null
     for l in 8 4; do
       MV_LOCAL=$l CACHEDB=$(mktemp -d)/cache.db timeout 150 python3 -m tools.gpu_bench --kernels generated --presets youtu-llm-2b,deepseek-v2-lite \
         --decode 32 --prefill 512 --json "$OUT/mvlocal_$l.json" 2>&1 | grep -v '^{' | tail -3
     done ;;
  5) patch -s -d upstream -p1 < runs/2026-11-30-serve/experiments/stage-global.diff || exit 1
     python3 -m compileall -q upstream/tinygrad > /dev/null
     synth deepseek-v2-lite glm-4.7-flash
     for sg in 0 1 1 0; do  # a kernel cache a variant (the cache is keyed by the AST, not the switch); the second pair reuses the first's
       echo "-- STAGE_GLOBAL=$sg $(date +%T)"; mkdir -p /tmp/sg$sg
       STAGE_GLOBAL=$sg CACHEDB=/tmp/sg$sg/cache.db timeout 220 python3 -m tools.gpu_bench --kernels generated --presets deepseek-v2-lite,glm-4.7-flash \
         --decode 32 --prefill 512 --json "$OUT/sg_$sg.$RANDOM.json" 2>&1 | grep -v '^{' | tail -3
     done
     STAGE_GLOBAL=1 timeout 120 python3 -m tools.gpu_check release --kernels generated 2>&1 | tail -4 ;;
  6) patch -s -d upstream -p1 < runs/2026-11-30-serve/experiments/stage-global.diff || exit 1
     python3 -m compileall -q upstream/tinygrad > /dev/null
     (python3 -m tools.llama_bench build --time-limit 330 > "$OUT/llama_build.log" 2>&1) &
     synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash; echo "synthesized $(date +%T)"
     timeout 100 python3 -m tools.gpu_check release --kernels generated 2>&1 | tail -4
     wait; tail -2 "$OUT/llama_build.log"; echo "built $(date +%T)"
     timeout $((${DEADLINE:-590} - SECONDS)) python3 -m tools.gpu_bench --kernels generated --llama --decode 32 --prefill 512 --json "$OUT/side_gen.json" 2>&1 \
       | tee "$OUT/side_gen.log" | grep -v '^{' | tail -8 ;;
  7) synth deepseek-v2-lite glm-4.7-flash
     for m in deepseek-v2-lite glm-4.7-flash; do
       timeout 280 python3 -m tools.beam_kernels --model $m --kernels generated --target decode --pos 32 --top 8 --beam 2 2>&1 | tee "$OUT/beam_dec_$m.txt"
     done ;;
  8) synth deepseek-v2-lite glm-4.7-flash
     for m in deepseek-v2-lite glm-4.7-flash; do for b in 0 2; do
       BEAM=$b timeout 280 python3 bench_block.py 30 --rounds 3 --model $m --kernels generated --only decode --pos 32 2>&1 | tail -3
     done; done ;;
  9) python3 -m tools.llama_bench build --time-limit 330 > "$OUT/llama_build.log" 2>&1
     timeout 400 python3 -m tools.start_time --presets youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash --llama --json "$OUT/start.json" 2>&1 | tail -8 ;;
esac
