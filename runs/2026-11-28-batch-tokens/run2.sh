#!/usr/bin/env bash
# Where a batched decode step's time goes (the kernels as landed, a workgroup a token), then the full-size weights check.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA PYTHONPATH=.
OUT=${OUT:-out}; mkdir -p "$OUT"
for spec in ${PROFILES:-youtu-llm-2b:8 youtu-llm-2b:1 deepseek-v2-lite:8}; do
  m=${spec%:*}; b=${spec#*:}
  timeout 200 python3 -m tools.profile --model $m --batch $b --pos 32 --top 6 --repeat 3 --count 20 > "$OUT/profile_${m}_$b.txt" 2>&1
  head -5 "$OUT/profile_${m}_$b.txt" | tail -1; grep "(all)" "$OUT/profile_${m}_$b.txt"
done
[ -n "${TESTS-1}" ] && timeout 200 python3 -m pytest -q -x -p no:cacheprovider test/test_kernels_matvec.py -k "not emulated and not compile" > "$OUT/tests.log" 2>&1; tail -15 "$OUT/tests.log"
[ -n "${WEIGHTS:-}" ] && timeout ${WLIMIT:-240} python3 -m tools.gpu_check --weights $WEIGHTS 2>&1 | tee "$OUT/weights.log" | grep -v "^ *$" | grep -v "%" | tail -6
