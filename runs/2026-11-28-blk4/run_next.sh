# GPU, for the next lease (not yet run), in the order of value; each step fits one 600 s call (the machine stays warm between
# calls that follow within 30 s). Step 1: where DeepSeek-V2-Lite's generated 512-token chunk goes, kernel by kernel (its
# prefill is the furthest from the issue's 0.5x of llama.cpp: 0.32x). Step 2: the candidate tc-local-grid.patch (the TC
# rule's local of N halved where the grid is small) as patch 39 against the series of 38, all three models (A and B ~130-200 s
# each with GLM; two calls). Step 3: GLM-4.7-Flash's chunk, as step 1. Step 4: BEAM=4 on Youtu-LLM-2B's generated decode
# step (seeded with the heuristics' pick, patch 24; BEAM=2 was within 2% of BEAM=0), BEAM=0 beside it. Step 5: the block
# products under larger tensor-core tiles than the heuristics try (upcasts of 8; locals of 1), probe.py as run_probe.sh runs it.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
cand() {   # the candidate as the series' last patch
  grep -q tc-local-grid patches/series || { cp runs/2026-11-28-blk4/tc-local-grid.patch patches/0039-tc-local-grid.patch; echo 0039-tc-local-grid.patch >> patches/series; }
  python3 apply_patches.py | tail -1
}
case ${1:-1} in
  1) timeout 590 python3 -m tools.profile --model deepseek-v2-lite --kernels generated --target prompt --chunk 512 --pos 0 --top 40 > "$OUT/profile_dsv2_prompt.txt" 2>&1
     head -60 "$OUT/profile_dsv2_prompt.txt" ;;
  2) cand; OUT=$OUT PRESETS=youtu-llm-2b,deepseek-v2-lite LIMIT=280 VARIANTS="A:38 B:" bash tools/gpu_session.sh variants ;;
  2g) cand; OUT=$OUT PRESETS=glm-4.7-flash LIMIT=280 VARIANTS="Ag:38 Bg:" bash tools/gpu_session.sh variants ;;
  3) timeout 590 python3 -m tools.profile --model glm-4.7-flash --kernels generated --target prompt --chunk 512 --pos 0 --top 40 > "$OUT/profile_glm_prompt.txt" 2>&1
     head -60 "$OUT/profile_glm_prompt.txt" ;;
  4) python3 -c "from apps import synth; synth.generate('youtu-llm-2b', 'release', progress=False)"
     bb() { timeout $1 python3 bench_block.py 30 --rounds 3 --model youtu-llm-2b --kernels generated --only decode --pos 32 2>&1 \
              | grep -v "^upstream" | tee "$OUT/$2.txt" | tail -1; }
     BEAM=0 bb 90 bb_beam0; SECONDS=0; BEAM=4 bb 480 bb_beam4; echo "($SECONDS s)" ;;
  5) L=$OUT/probe_tiles.txt
     for t in 4,4,4 4,4,2 8,4,2 4,8,2 8,4,4 4,8,4 8,8,2 4,4,1 8,4,1; do
       echo "== TC_UP=$t" >> $L
       TC_UP=$t DEV=CUDA PYTHONPATH=. PARALLEL=0 CACHELEVEL=0 timeout 100 python3 runs/2026-11-28-blk2/probe.py 512 blkc 2>&1 \
         | grep -v '^compil' | grep -v '^\s*$' | cut -c1-300 >> $L
     done; cat $L ;;
esac
