#!/usr/bin/env bash
# Decode attention at depth: heads a warp (HG) and splits of the keys; prefill's tensor-core attention with truncated tf32 splits.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
V=runs/2026-11-27-depth/variants
timeout 300 python3 -m tools.bench_mla_attention --pos 32,4095,16383,32767 --layers 8 --iters 30 \
  --variants $V/hg1.py,$V/hg2.py,$V/s256.py,$V/hg1s256.py,$V/hg2s256.py,$V/s512.py 2>&1 | tee "$OUT/decode_variants.log"
timeout 200 python3 -m tools.bench_mla_attention --prefill 512 --pos 0,15872 --layers 4 --iters 5 --variants $V/trunc.py 2>&1 | tee "$OUT/prefill_variants.log"
