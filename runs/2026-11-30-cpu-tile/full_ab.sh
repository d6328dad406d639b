# patches/0064's A/B on full-size Youtu-LLM-2B on this machine's CPU (2 cores; keep it otherwise idle): A = the series of 63
# (a matmul's 4 x 4 outputs a thread), B = the series of 64 (8 x 8); the CPU's default path (its hand-written decode products
# and attention, the prompt's chunks generated), a 64-token prompt's prefill and 16 tokens of decode, A B interleaved twice.
# From the repository root:   bash runs/2026-11-30-cpu-tile/full_ab.sh > runs/2026-11-30-cpu-tile/full_ab.txt
# then the whole series beside llama.cpp's llama-bench (its CPU build: `python3 -m tools.llama_bench build --cpu`), in one run:
#   bash runs/2026-11-30-cpu-tile/full_ab.sh llama > runs/2026-11-30-cpu-tile/full_llama.txt
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/2026-11-30-cpu-tile}
if [ "$1" = llama ]; then
  DEV=CPU PYTHONPATH=. timeout 1500 ./.venv/bin/python -m tools.gpu_bench --kernels hand --presets youtu-llm-2b --decode 16 --prefill ${PROMPT:-64} \
    --llama --json "$OUT/full_llama.json" 2>&1 | grep -v '^{' | tail -8
  exit
fi
for r in ${ROUNDS:-1 2}; do
  for v in A B; do
    if [ $v = A ]; then ./.venv/bin/python apply_patches.py --upto 63 > /dev/null; U=63; else ./.venv/bin/python apply_patches.py > /dev/null; U=; fi
    echo "-- round $r $v"
    TINYGRAD_UPTO=$U DEV=CPU PYTHONPATH=. timeout 1500 ./.venv/bin/python -m tools.gpu_bench --kernels hand --presets youtu-llm-2b --decode 16 \
      --prefill ${PROMPT:-64} --json "$OUT/full_$r$v.json" 2>&1 | grep -v '^{' | tail -3
  done
done
./.venv/bin/python apply_patches.py > /dev/null
