# CPU (this machine): the decode step of the tiny presets (bench_block --only decode) on the series without patch 0035 (A)
# and with it (B), interleaved A B A B; then the per-product probe on each. The series is restored after.
cd "$(dirname "$0")/../.."
for r in 1 2; do
  for v in A B; do
    if [ $v = A ]; then ./.venv/bin/python apply_patches.py --upto 34 > /dev/null; U=34; else ./.venv/bin/python apply_patches.py > /dev/null; U=; fi
    for m in youtu-llm-2b-tiny deepseek-v2-lite-tiny glm-4.7-flash-tiny; do
      echo "-- round $r $v $m"
      TINYGRAD_UPTO=$U DEV=CPU PYTHONPATH=. ./.venv/bin/python bench_block.py 20 --rounds 3 --model $m --only decode --kernels ${KERNELS:-hand} 2>&1 | grep -a "decode" | tail -2
    done
  done
done
./.venv/bin/python apply_patches.py > /dev/null
