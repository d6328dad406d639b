#!/usr/bin/env bash
# Batched decode on the H100: llama.cpp's build (llama-bench, llama-batched-bench) in the background while the hand path's
# batched steps are checked against each prompt decoded alone (Youtu-LLM-2B; timings of this call are disturbed by the build).
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
(python3 -m tools.llama_bench build --time-limit 560 > "$OUT/build.log" 2>&1; echo "build exit $?" >> "$OUT/build.log") &
timeout 400 python3 -m tools.gpu_bench --batch 1,2,4,8,16,32 --decode 32 --presets youtu-llm-2b --json "$OUT/batch_youtu.json" 2>&1 | tee "$OUT/batch_youtu.log" | tail -12
wait
tail -3 "$OUT/build.log"
