#!/usr/bin/env bash
# The models at depth: HEAD's decode attention (A) against the pipelined one, two heads a warp (B, the checkout), one lease.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
cp apps/kernels/mla_attention.py /tmp/B.py
for v in A B; do
  src=runs/2026-11-27-depth/variants/A.py; [ $v = B ] && src=/tmp/B.py
  cp $src apps/kernels/mla_attention.py
  echo "-- $v"
  timeout 270 python3 -m tools.gpu_bench --depths 4096,16384,32768 --presets youtu-llm-2b,glm-4.7-flash --decode 64 --json "$OUT/depths_$v.json" 2>&1 \
    | tee "$OUT/depths_$v.log" | grep -v '^{' | tail -7
done
cp /tmp/B.py apps/kernels/mla_attention.py
