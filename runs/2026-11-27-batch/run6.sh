#!/usr/bin/env bash
# Part 2: GLM-4.7-Flash's batched decode against llama-batched-bench (llama.cpp built by run5.sh on this machine), then
# the server with 32 slots under tools.load and a fault storm (Youtu-LLM-2B).
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
timeout 240 python3 -m tools.gpu_bench --batch 1,4,8,16,32 --decode 48 --llama --llama-build-limit 30 \
  --presets glm-4.7-flash --json "$OUT/batch_glm.json" 2>&1 | tee "$OUT/batch_glm.log" | grep -v '^{' | tail -8
MODELS=youtu-llm-2b CLIENTS=1,4,8,16,32 FAULTS=300 bash tools/gpu_session.sh load
# B = 1, 4, 8 of Youtu-LLM-2B again with 4x the steps (run5's 64 steps at B = 1 took 0.1-0.15 s)
timeout 120 python3 -m tools.gpu_bench --batch 1,4,8 --decode 256 --presets youtu-llm-2b --json "$OUT/batch_youtu_long.json" 2>&1 \
  | tee "$OUT/batch_youtu_long.log" | grep -v '^{' | tail -4
