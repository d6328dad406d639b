#!/usr/bin/env bash
# The fp16 latent cache on the H100: the paths against each other at full size, then Youtu-LLM-2B at depth, f16 and f32.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
timeout 100 python3 -m tools.path_check --presets youtu-llm-2b --depth 0,600 --cache-type f16 2>&1 | tee "$OUT/paths_f16.log" | tail -4
for ct in f16 f32; do
  timeout 70 python3 -m tools.gpu_bench --depths 4096,16384 --presets youtu-llm-2b --decode 64 --cache-type $ct --json "$OUT/depths_$ct.json" 2>&1 \
    | tee "$OUT/depths_$ct.log" | tail -3
done
