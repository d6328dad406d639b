# CPU (this machine): Youtu-LLM-2B-tiny and GLM-4.7-Flash-tiny, the generated path, a 32-token chunk at position 128 and the
# decode step, A = the series of 37, B = 37 + the values rule as patch 38, A B three times (cpu_ab_values2.txt).
cd "$(dirname "$0")/../.."
for r in 1 2 3; do
  for v in A B; do
    if [ $v = A ]; then ./.venv/bin/python apply_patches.py --upto 37 > /dev/null; U=37; else ./.venv/bin/python apply_patches.py > /dev/null; U=; fi
    for m in youtu-llm-2b-tiny glm-4.7-flash-tiny; do
      echo "-- round $r $v $m"
      TINYGRAD_UPTO=$U DEV=CPU PYTHONPATH=. ./.venv/bin/python bench_block.py 10 --rounds 3 --model $m --only prompt,decode --kernels generated 2>&1 | grep -a "^prompt:\|^decode:" | cut -c1-120
    done
  done
done
./.venv/bin/python apply_patches.py > /dev/null
