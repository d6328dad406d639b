# Patch 60 on full-size Youtu-LLM-2B on this machine's CPU (2 cores; keep it otherwise idle): the generated path on the series
# of 59 (A) and 60 (B), interleaved twice, then the whole series beside llama.cpp's llama-bench (its CPU build:
# `python3 -m tools.llama_bench build --cpu`). From the repository root:
#   bash runs/2026-11-30-fuse/cpu_full_ab60.sh > runs/2026-11-30-fuse/cpu_full_ab60.txt
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/2026-11-30-fuse}
for r in 1 2; do
  for u in 59 60; do
    ./.venv/bin/python apply_patches.py --upto $u > /dev/null
    echo "-- round $r, the series of $u"
    TINYGRAD_UPTO=$u DEV=CPU PYTHONPATH=. timeout 1200 ./.venv/bin/python -m tools.gpu_bench --kernels generated --presets youtu-llm-2b \
      --decode 16 --prefill 64 --json "$OUT/cpu_full_${u}_$r.json" 2>&1 | grep -v '^{' | tail -5 | head -2
  done
done
./.venv/bin/python apply_patches.py > /dev/null
echo "-- the whole series beside llama.cpp"
DEV=CPU PYTHONPATH=. timeout 1200 ./.venv/bin/python -m tools.gpu_bench --kernels generated --presets youtu-llm-2b --decode 16 --prefill 64 \
  --llama --json "$OUT/cpu_full_llama.json" 2>&1 | grep -v '^{' | tail -8
