#!/usr/bin/env bash
# run7.sh again after the one-row argmax fix (the sampler's (1, vocab) argmax had become four kernels instead of three),
# then Youtu-LLM-2B's batched steps at B = 1, 4, 8 with 256 steps.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
bash runs/2026-11-27-batch/run7.sh
timeout 100 python3 -m tools.gpu_bench --batch 1,4,8 --decode 256 --presets youtu-llm-2b --json "$OUT/batch_youtu_long.json" 2>&1 \
  | tee "$OUT/batch_youtu_long.log" | grep -v '^{' | tail -4
