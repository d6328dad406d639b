#!/usr/bin/env bash
# Decode attention with the next stage's loads in flight during a stage's math (B, HG 1) against HEAD's (A); then the models at depth.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
V=runs/2026-11-27-depth/variants
timeout 200 python3 -m tools.bench_mla_attention --pos 32,4095,16383,32767 --layers 8 --iters 30 \
  --variants $V/A.py,$V/Bhg2.py,$V/Bs256.py,$V/Bs64.py 2>&1 | tee "$OUT/decode_variants.log"
timeout 360 python3 -m tools.gpu_bench --depths 4096,16384,32768 --presets youtu-llm-2b,deepseek-v2-lite --decode 64 --json "$OUT/depths.json" 2>&1 | tee "$OUT/depths.log" | tail -8
