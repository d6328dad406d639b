# CPU (this machine, otherwise idle): the tiny presets on the generated path, A = the series of 40, B = 40 + patch 41
# (without local memory a small kernel's outputs upcast too), A B interleaved three times: bench_block's decode step and 32-token prompt chunk, and the CLI's decode
# (llm.py --benchmark; its tok/s as a user sees them). Output: cpu_ab.txt.
cd "$(dirname "$0")/../.."
for r in 1 2 3; do
  for v in A B; do
    if [ $v = A ]; then ./.venv/bin/python apply_patches.py --upto 40 > /dev/null; U=40; else ./.venv/bin/python apply_patches.py > /dev/null; U=; fi
    for m in youtu-llm-2b-tiny deepseek-v2-lite-tiny glm-4.7-flash-tiny; do
      echo "-- round $r $v $m"
      TINYGRAD_UPTO=$U DEV=CPU PYTHONPATH=. ./.venv/bin/python bench_block.py 10 --rounds 2 --model $m --only prompt,decode --kernels generated 2>&1 | grep -a "^prompt:\|^decode:" | cut -c1-110
      TINYGRAD_UPTO=$U DEV=CPU ./.venv/bin/python apps/llm.py --model $m --benchmark 40 2>&1 | grep -a "^decode \|^prefill " | cut -c1-100
    done
  done
done
./.venv/bin/python apply_patches.py > /dev/null
