#!/usr/bin/env bash
# One H100 call: fp32 products on the tensor cores as three tf32 products (ALLOW_TF32=2) with the TC opt over a symbolic
# dim: precision and speed on one product, then the generated path's decode / 512-token prefill at ALLOW_TF32=0 and 2
# (PRESETS), the greedy check of the tiny presets and the full-size paths compared at ALLOW_TF32=2.
#   PRESETS=youtu-llm-2b,deepseek-v2-lite [KERNELS=hand] [VARS="0 2"] [PRECISION=1] [CHECK=1] [PATHS=seconds] bash runs/2026-11-27-tf32x3/run1.sh
export PYTHONUNBUFFERED=1 DEV=CUDA OUT=${OUT:-out} CACHELEVEL=0
mkdir -p $OUT
python3 -c "from apps import synth; [synth.generate(p, 'release', progress=False) for p in '${PRESETS}'.split(',')]" && sync
[ -n "$PRECISION" ] && PYTHONPATH=upstream timeout 120 python3 runs/2026-11-27-tf32x3/tc_precision.py 2>&1 | tee $OUT/tc_precision.txt
for t in ${VARS:-0 2}; do
  rm -rf .cache/captures
  echo "-- ALLOW_TF32=$t"
  ALLOW_TF32=$t timeout ${LIMIT:-200} python3 -m tools.gpu_bench --kernels ${KERNELS:-generated} --presets "$PRESETS" --decode 32 --prefill 512 \
    --json "$OUT/${KERNELS:-generated}_tf32_$t.json" 2>&1 | tee "$OUT/${KERNELS:-generated}_tf32_$t.log" | grep -A3 '^model'
done
[ -n "$CHECK" ] && ALLOW_TF32=2 timeout 150 python3 -m tools.gpu_check release --kernels generated 2>&1 | tee $OUT/check_generated.log | tail -5
[ -n "$PATHS" ] && ALLOW_TF32=2 timeout ${PATHS} python3 -m tools.path_check --presets "$PRESETS" --depth 0 2>&1 | tee $OUT/paths.txt | tail -12
true
