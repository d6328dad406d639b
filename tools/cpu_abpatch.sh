#!/usr/bin/env bash
# A patch's A/B on this machine's CPU (keep it otherwise idle): the tiny presets on the generated path, A = the series without
# patch PATCH (its first PATCH-1), B = the whole series, A B interleaved ROUNDS times (default 3: the CPU drifts between
# rounds by more than most effects, so the pairs are the evidence): bench_block's decode step and 32-token prompt chunk, and
# the CLI's decode (llm.py --benchmark; its tok/s as a user sees them). The series is restored after. Run from anywhere:
#   PATCH=41 bash tools/cpu_abpatch.sh > cpu_ab.txt
cd "$(dirname "$0")/.."
n=${PATCH:?cpu_abpatch needs PATCH=<n>: A runs the first n-1 patches, B the whole series}
for r in $(seq ${ROUNDS:-3}); do
  for v in A B; do
    if [ $v = A ]; then ./.venv/bin/python apply_patches.py --upto $((n - 1)) > /dev/null; U=$((n - 1)); else ./.venv/bin/python apply_patches.py > /dev/null; U=; fi
    for m in ${PRESETS:-youtu-llm-2b-tiny deepseek-v2-lite-tiny glm-4.7-flash-tiny}; do
      echo "-- round $r $v $m"
      TINYGRAD_UPTO=$U DEV=CPU PYTHONPATH=. ./.venv/bin/python bench_block.py 10 --rounds 2 --model $m --only prompt,decode --kernels generated 2>&1 | grep -a "^prompt:\|^decode:" | cut -c1-110
      TINYGRAD_UPTO=$U DEV=CPU ./.venv/bin/python apps/llm.py --model $m --benchmark 40 2>&1 | grep -a "^decode \|^prefill " | cut -c1-100
    done
  done
done
./.venv/bin/python apply_patches.py > /dev/null
