# Full-size Youtu-LLM-2B on this machine's CPU (2 cores; keep it otherwise idle): the generated path and the hand-written
# path (its Q4_0 decode products in apps/kernels/cpu.py), two rounds interleaved, llama.cpp's llama-bench beside the second
# (the CPU build of the pinned sdist: `python3 -m tools.llama_bench build --cpu` first). From the repository root:
#   bash runs/2026-11-30-cpu-simd/full.sh > runs/2026-11-30-cpu-simd/full.txt
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/2026-11-30-cpu-simd}
for r in 1 2; do
  for k in generated hand; do
    echo "-- round $r, --kernels $k"
    DEV=CPU PYTHONPATH=. timeout 1200 ./.venv/bin/python -m tools.gpu_bench --kernels $k --presets youtu-llm-2b --decode 16 --prefill 64 \
      $([ $r = 2 ] && [ $k = hand ] && echo --llama) --json "$OUT/full_${k}_$r.json" 2>&1 | grep -v '^{' | tail -6
  done
done
