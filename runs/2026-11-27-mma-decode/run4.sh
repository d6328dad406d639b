#!/usr/bin/env bash
# The CUDA-core decode kernel rescaling its sums only at a new max (the checkout, L) against HEAD's (A): the kernel alone,
# Youtu-LLM-2B at depth and at a short context, one lease.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
V=runs/2026-11-27-mma-decode/variants
timeout 100 python3 -m tools.bench_mla_attention --pos 64,1024,4095,16383,32767 --iters 30 --layers 8 --variants $V/A.py 2>&1 \
  | tee "$OUT/attn.log" | grep -v "^ *$" | tail -26
cp apps/kernels/mla_attention.py /tmp/L.py
for v in A L; do
  src=$V/A.py; [ $v = L ] && src=/tmp/L.py
  cp $src apps/kernels/mla_attention.py
  echo "-- $v"
  timeout 130 python3 -m tools.gpu_bench --depths 4096,16384,32768 --presets youtu-llm-2b --decode 64 --json "$OUT/depths_$v.json" 2>&1 \
    | tee "$OUT/depths_$v.log" | grep -v '^{' | tail -4
  timeout 100 python3 -m tools.gpu_bench --presets youtu-llm-2b,deepseek-v2-lite --decode 128 --prefill 512 --json "$OUT/short_$v.json" 2>&1 \
    | tee "$OUT/short_$v.log" | grep -v '^{' | tail -4
done
cp /tmp/L.py apps/kernels/mla_attention.py
