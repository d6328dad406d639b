#!/usr/bin/env bash
# Decode attention: tokens a warp step (TT) and heads a warp on the pipelined kernel (D); then the short-context numbers of
# HEAD's kernel (A), D and D with TT 4 in turn (apps/kernels/mla_attention.py swapped, the rest the checkout).
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
V=runs/2026-11-27-depth/variants
timeout 150 python3 -m tools.bench_mla_attention --pos 32,4095,16383,32767 --layers 8 --iters 30 \
  --variants $V/Dtt4.py,$V/Dtt8.py,$V/Dtt4hg1.py 2>&1 | tee "$OUT/decode_variants.log"
cp apps/kernels/mla_attention.py /tmp/D.py
for v in A D Dtt4; do
  src=$V/$v.py; [ $v = D ] && src=/tmp/D.py
  cp $src apps/kernels/mla_attention.py
  echo "-- $v"
  timeout 150 python3 -m tools.gpu_bench --presets youtu-llm-2b,deepseek-v2-lite --decode 48 --prefill 512 --json "$OUT/short_$v.json" 2>&1 \
    | tee "$OUT/short_$v.log" | grep -v '^{' | tail -4
done
cp /tmp/D.py apps/kernels/mla_attention.py
