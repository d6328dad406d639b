#!/usr/bin/env bash
# The final batched-decode table, part 1: llama.cpp built first (nothing else running), then ours (launch / collect, the
# matvecs up to 8 tokens) and llama-batched-bench side by side on Youtu-LLM-2B and DeepSeek-V2-Lite.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
timeout 330 python3 -m tools.llama_bench build --time-limit 320 2>&1 | tail -2
timeout 260 python3 -m tools.gpu_bench --batch 1,4,8,16,32 --decode 64 --llama --llama-build-limit 30 \
  --presets youtu-llm-2b,deepseek-v2-lite --json "$OUT/batch.json" 2>&1 | tee "$OUT/batch.log" | grep -v '^{' | tail -14
