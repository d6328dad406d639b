#!/usr/bin/env bash
# Long prompts and decode deep in the context on the hand-written path, and where a 512-token chunk at depth 15872 goes.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
timeout 420 python3 -m tools.gpu_bench --depths 4096,16384,32768 --decode 64 --json "$OUT/depths.json" 2>&1 | tee "$OUT/depths.log" | tail -12
for pos in 0 15872; do
  timeout 200 python3 -m tools.profile --model youtu-llm-2b --target fill --chunk 512 --pos $pos --max-context 16384 --repeat 2 --count 3 --top 6 \
    > "$OUT/fill_youtu_$pos.txt" 2>&1; head -30 "$OUT/fill_youtu_$pos.txt"
done
