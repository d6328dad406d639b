#!/usr/bin/env bash
# The tensor-core decode kernel with the new row prepared up front (the checkout, C; two workgroups an SM where a split
# has two tiles of heads) against A (HEAD's CUDA-core kernel), B (run1's) and C2 (two an SM always); then the three
# models at depth and at a short context, A against C, one lease. (variants/make.sh writes the variants first.)
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
V=runs/2026-11-27-mma-decode/variants
timeout 120 python3 -m tools.bench_mla_attention --pos 64,1024,4095,16383,32767 --iters 30 --layers 8 \
  --variants $V/A.py,$V/B.py,$V/C2.py 2>&1 | tee "$OUT/attn.log" | grep -v "^ *$" | tail -34
cp apps/kernels/mla_attention.py /tmp/C.py
for v in A C; do
  src=$V/A.py; [ $v = C ] && src=/tmp/C.py
  cp $src apps/kernels/mla_attention.py
  echo "-- $v"
  timeout 200 python3 -m tools.gpu_bench --depths 4096,16384,32768 --presets youtu-llm-2b,deepseek-v2-lite --decode 64 --json "$OUT/depths_$v.json" 2>&1 \
    | tee "$OUT/depths_$v.log" | grep -v '^{' | tail -7
done
cp /tmp/C.py apps/kernels/mla_attention.py
