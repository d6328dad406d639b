# Full-size Youtu-LLM-2B on this machine's CPU (2 cores; keep it otherwise idle), the generated path on the series of 57
# (before the CPU patches), 58 (a kernel's THREAD parts side by side) and 59 (an unrolled reduction's lanes apart), then the
# whole series beside llama.cpp's llama-bench (the CPU build of the pinned sdist: `python3 -m tools.llama_bench build --cpu`,
# ~4 min), all in one run. From the repository root: bash runs/2026-11-30-cpu-threads/run_full.sh > runs/2026-11-30-cpu-threads/full.txt
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/2026-11-30-cpu-threads}
for u in 57 58 59; do
  ./.venv/bin/python apply_patches.py --upto $u > /dev/null
  echo "-- the series of $u"
  TINYGRAD_UPTO=$u DEV=CPU PYTHONPATH=. timeout 1200 ./.venv/bin/python -m tools.gpu_bench --kernels generated --presets youtu-llm-2b \
    --decode 16 --prefill 64 --json "$OUT/full_$u.json" 2>&1 | grep -v '^{' | tail -5
done
./.venv/bin/python apply_patches.py > /dev/null
echo "-- the whole series beside llama.cpp"
DEV=CPU PYTHONPATH=. timeout 1200 ./.venv/bin/python -m tools.gpu_bench --kernels generated --presets youtu-llm-2b --decode 16 --prefill 64 \
  --llama --json "$OUT/full_llama.json" 2>&1 | grep -v '^{' | tail -8
