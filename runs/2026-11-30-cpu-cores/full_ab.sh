# patches/0062's A/B on full-size Youtu-LLM-2B on this machine's CPU (2 cores; keep it otherwise idle): A = the series of 61
# (a kernel's parts on Python threads), B = the series of 62 (native workers), the hand-written path (the CPU's Q4_0 decode
# products, threaded) and the generated path, A B interleaved twice. From the repository root:
#   bash runs/2026-11-30-cpu-cores/full_ab.sh > runs/2026-11-30-cpu-cores/full_ab.txt
# then the whole series' hand-written path beside llama.cpp's llama-bench (the CPU build of the pinned sdist in .cache/llama:
# `python3 -m tools.llama_bench build --cpu` first), in one run:
#   bash runs/2026-11-30-cpu-cores/full_ab.sh llama > runs/2026-11-30-cpu-cores/full_llama.txt   (LLAMA_OUT=NAME: NAME.json)
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/2026-11-30-cpu-cores}
if [ "$1" = llama ]; then
  DEV=CPU PYTHONPATH=. timeout 1200 ./.venv/bin/python -m tools.gpu_bench --kernels hand --presets youtu-llm-2b --decode 16 --prefill 64 \
    --llama --json "$OUT/${LLAMA_OUT:-full_llama}.json" 2>&1 | grep -v '^{' | tail -8
  exit
fi
for r in 1 2; do
  for v in A B; do
    if [ $v = A ]; then ./.venv/bin/python apply_patches.py --upto 61 > /dev/null; U=61; else ./.venv/bin/python apply_patches.py > /dev/null; U=; fi
    for k in ${KERNELS:-hand generated}; do
      echo "-- round $r $v --kernels $k"
      TINYGRAD_UPTO=$U DEV=CPU PYTHONPATH=. timeout 1200 ./.venv/bin/python -m tools.gpu_bench --kernels $k --presets youtu-llm-2b --decode 16 \
        --prefill 64 --json "$OUT/full_${k}_$r$v.json" 2>&1 | grep -v '^{' | tail -3
    done
  done
done
./.venv/bin/python apply_patches.py > /dev/null
