# CPU (this machine): the decode step of the tiny presets (bench_block --only decode) on the series without patch 0035 (A)
# and with it (B), interleaved A B A B. The series is restored after. UPTO=<n>: A is the series of n instead of 34 (B the
# whole series); ONLY=<targets>, N=<steps>, ROUNDS=<n>: bench_block's.
cd "$(dirname "$0")/../.."
for r in 1 2; do
  for v in A B; do
    if [ $v = A ]; then ./.venv/bin/python apply_patches.py --upto ${UPTO:-34} > /dev/null; U=${UPTO:-34}; else ./.venv/bin/python apply_patches.py > /dev/null; U=; fi
    for m in youtu-llm-2b-tiny deepseek-v2-lite-tiny glm-4.7-flash-tiny; do
      echo "-- round $r $v $m"
      TINYGRAD_UPTO=$U DEV=CPU PYTHONPATH=. ./.venv/bin/python bench_block.py ${N:-20} --rounds ${ROUNDS:-3} --model $m --only ${ONLY:-decode} --kernels ${KERNELS:-hand} 2>&1 | grep -a "prompt\|decode" | tail -4
    done
  done
done
./.venv/bin/python apply_patches.py > /dev/null
