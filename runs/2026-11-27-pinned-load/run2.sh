#!/usr/bin/env bash
# The host passes alone (split_bench.py); then start times of A (before) and C (the checkout: staging lent to the
# packer, no realize of loaded norms), fresh processes, one lease.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA PYTHONPATH=.
OUT=${OUT:-out}; mkdir -p "$OUT"
R=runs/2026-11-27-pinned-load
P=${PRESETS:-glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b}
timeout 200 python3 $R/split_bench.py glm-4.7-flash 2>&1 | tee "$OUT/split_bench.log" | tail -8
mkdir -p /tmp/C && cp apps/packed.py apps/readback.py apps/quantized.py /tmp/C/
for run in A C A2 C2; do
  v=${run:0:1}; src=$R/A; [ $v = C ] && src=/tmp/C; [ ${#run} = 2 ] && P=glm-4.7-flash   # the repeat: GLM-4.7-Flash only
  cp $src/packed.py $src/readback.py $src/quantized.py apps/
  timeout 300 python3 -m tools.start_time --presets $P --json "$OUT/start_$run.json" 2>&1 | tee "$OUT/start_$run.log" | grep CUDA | sed "s/^/$run /"
done
cp /tmp/C/*.py apps/
