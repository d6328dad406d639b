#!/usr/bin/env bash
# Aggregate decode of 1-32 sequences at once, ours (Transformer.step) and llama-batched-bench (-npp 32 -ntg 128, fa off/on),
# side by side on the same files: Youtu-LLM-2B and DeepSeek-V2-Lite (llama.cpp built by run1.sh on this machine).
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
timeout 580 python3 -m tools.gpu_bench --batch 1,4,8,16,32 --decode 64 --llama --llama-build-limit 120 \
  --presets ${PRESETS:-youtu-llm-2b,deepseek-v2-lite} --json "$OUT/batch.json" 2>&1 | tee "$OUT/batch.log" | grep -v '^{' | tail -16
