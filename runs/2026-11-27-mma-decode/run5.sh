#!/usr/bin/env bash
# GLM-4.7-Flash and DeepSeek-V2-Lite at depth: HEAD's decode kernel (A) against the lazy rescale (L, the checkout), one lease.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
V=runs/2026-11-27-mma-decode/variants
cp apps/kernels/mla_attention.py /tmp/L.py
for v in A L; do
  src=$V/A.py; [ $v = L ] && src=/tmp/L.py
  cp $src apps/kernels/mla_attention.py
  echo "-- $v"
  timeout 270 python3 -m tools.gpu_bench --depths 4096,16384,32768 --presets glm-4.7-flash,deepseek-v2-lite --decode 64 --json "$OUT/depths_$v.json" 2>&1 \
    | tee "$OUT/depths_$v.log" | grep -v '^{' | tail -7
done
cp /tmp/L.py apps/kernels/mla_attention.py
