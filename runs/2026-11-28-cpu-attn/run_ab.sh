# CPU (this machine): a 32-token prefill chunk at position 128 and the decode step of the tiny presets (bench_block --only
# prompt,decode) on the series without patch 0036 (A) and with it (B), interleaved A B A B. The series is restored after.
cd "$(dirname "$0")/../.."
for r in 1 2; do
  for v in A B; do
    if [ $v = A ]; then ./.venv/bin/python apply_patches.py --upto 35 > /dev/null; U=35; else ./.venv/bin/python apply_patches.py > /dev/null; U=; fi
    for m in youtu-llm-2b-tiny deepseek-v2-lite-tiny glm-4.7-flash-tiny; do
      echo "-- round $r $v $m"
      TINYGRAD_UPTO=$U DEV=CPU PYTHONPATH=. ./.venv/bin/python bench_block.py ${N:-5} --rounds 2 --model $m --only ${ONLY:-prompt,decode} 2>&1 | grep -a "prompt\|decode" | tail -4
    done
  done
done
./.venv/bin/python apply_patches.py > /dev/null
