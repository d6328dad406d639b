#!/usr/bin/env bash
# One model at depth, ours (the lazy rescale) and llama-bench's pp<D> / tg128 at -d D side by side, one lease:
#   PRESET=youtu-llm-2b bash runs/2026-11-27-mma-decode/run9.sh
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
timeout 580 python3 -m tools.gpu_bench --depths 4096,16384,32768 --presets "$PRESET" --decode 64 --llama --json "$OUT/depths_$PRESET.json" 2>&1 \
  | tee "$OUT/depths_$PRESET.log" | grep -v '^{' | tail -8
