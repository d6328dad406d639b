#!/usr/bin/env bash
# The file's blocks to the device whole and split there (the checkout, B) against HEAD's loader (A: packed into fresh host
# arrays, then copied into the staging buffers): the full-size weights checked byte for byte on the device, the tiny
# presets' goldens, then start times A B A B in fresh processes, one lease.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA PYTHONPATH=.
OUT=${OUT:-out}; mkdir -p "$OUT"
R=runs/2026-11-27-pinned-load
F="packed.py readback.py quantized.py model.py"
timeout 300 python3 -m tools.gpu_check --weights glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b 2>&1 | tee "$OUT/weights.log" | grep -v "^ *$" | grep -v "%" | tail -4
timeout 200 python3 -m tools.gpu_check release 2>&1 | tail -5 | tee "$OUT/gpu_check.log"
mkdir -p /tmp/B && (cd apps && cp $F /tmp/B/)
for run in A B A2 B2; do
  v=${run:0:1}; src=$R/A; [ $v = B ] && src=/tmp/B
  P=glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b; [ ${#run} = 2 ] && P=glm-4.7-flash   # the repeat: GLM-4.7-Flash only
  for f in $F; do cp $src/$f apps/; done
  timeout 300 python3 -m tools.start_time --presets $P --json "$OUT/start_$run.json" 2>&1 | tee "$OUT/start_$run.log" | grep CUDA | sed "s/^/$run /"
done
for f in $F; do cp /tmp/B/$f apps/; done
