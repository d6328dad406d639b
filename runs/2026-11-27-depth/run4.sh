#!/usr/bin/env bash
# Decode attention: the combine's loads unrolled (C) against pipelined stages alone (Bhg2) and HEAD's (A); a decode token at
# depth 16383 kernel by kernel; the models at depth.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
V=runs/2026-11-27-depth/variants
timeout 200 python3 -m tools.bench_mla_attention --pos 32,4095,16383,32767 --layers 8 --iters 30 \
  --variants $V/A.py,$V/Bhg2.py,$V/Cu8.py,$V/Cs256.py 2>&1 | tee "$OUT/decode_variants.log"
timeout 150 python3 -m tools.profile --model youtu-llm-2b --target decode --pos 16383 --max-context 16384 --repeat 3 --count 5 --top 6 \
  > "$OUT/decode_youtu_16383.txt" 2>&1; head -24 "$OUT/decode_youtu_16383.txt"
timeout 300 python3 -m tools.gpu_bench --depths 4096,16384,32768 --presets youtu-llm-2b,glm-4.7-flash --decode 64 --json "$OUT/depths.json" 2>&1 | tee "$OUT/depths.log" | tail -8
