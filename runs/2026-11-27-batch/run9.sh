#!/usr/bin/env bash
# The server (Youtu-LLM-2B, 32 slots) under 1,000 requests with faults mixed in (tools.load --faults 1000): idle after,
# the device memory as before the storm, a plain request answered.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
python3 apps/llm.py --model youtu-llm-2b --serve 8080 --parallel 32 --max-context 2048 > "$OUT/serve.log" 2>&1 &
srv=$!
timeout 420 python3 -m tools.load --port 8080 --faults 1000 --json "$OUT/faults.json" 2>&1 | tail -3 | tee "$OUT/faults.log"
kill -INT $srv; wait $srv; grep -c " 200: " "$OUT/serve.log"; grep -c "Traceback" "$OUT/serve.log"; tail -2 "$OUT/serve.log"
