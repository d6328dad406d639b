#!/usr/bin/env bash
# The decode matvecs of the checkout (B) against variant A (make_a.sh: the kernels at 278ecad):
# aggregate decode of B sequences, A B in one lease; then the matvec tests on the device and the full-size weights check.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA PYTHONPATH=.
OUT=${OUT:-out}; mkdir -p "$OUT"
R=runs/2026-11-28-batch-tokens
P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}
cp apps/kernels/matvec.py /tmp/B_matvec.py
for v in ${VARIANTS:-A B}; do
  cp $([ -f $R/${v:0:1}/matvec.py ] && echo $R/${v:0:1}/matvec.py || echo /tmp/B_matvec.py) apps/kernels/matvec.py
  timeout ${LIMIT:-280} python3 -m tools.gpu_bench --batch ${SIZES:-1,4,8} --decode 64 --presets $P --json "$OUT/batch_$v.json" 2>&1 \
    | tee "$OUT/batch_$v.log" | grep -v '^{' | tail -${TAIL:-8} | sed "s/^/$v /"
done
cp /tmp/B_matvec.py apps/kernels/matvec.py
[ -n "${TESTS-1}" ] && timeout 200 python3 -m pytest -q -x -p no:cacheprovider test/test_kernels_matvec.py -k "not emulated and not compile" 2>&1 | tail -15 | tee "$OUT/tests.log"
[ -n "${WEIGHTS:-}" ] && timeout ${WLIMIT:-240} python3 -m tools.gpu_check --weights $WEIGHTS 2>&1 | tee "$OUT/weights.log" | grep -v "^ *$" | grep -v "%" | tail -6
