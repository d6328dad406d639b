#!/usr/bin/env bash
# GLM-4.7-Flash's batched decode against llama-batched-bench, then the server under load (tools.load, 32 slots) and a
# fault storm on Youtu-LLM-2B.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
timeout 330 python3 -m tools.gpu_bench --batch 1,4,8,16,32 --decode 48 --llama --llama-build-limit 60 \
  --presets glm-4.7-flash --json "$OUT/batch_glm.json" 2>&1 | tee "$OUT/batch_glm.log" | grep -v '^{' | tail -8
MODELS=youtu-llm-2b CLIENTS=1,4,8,16,32 FAULTS=200 bash tools/gpu_session.sh load
