#!/bin/bash
# CPU A/B of experiments/batching-queued-chunks.diff (B: a copy of the tree with it applied, in /tmp/Q): Youtu-LLM-2B-tiny server, 16 slots, 4 and 16 clients
for v in A B A B; do
  d=/work/main; [ $v = B ] && d=/tmp/Q
  (cd $d && PYTHONPATH=. exec /work/main/.venv/bin/python apps/llm.py --model youtu-llm-2b-tiny --serve 8093 --parallel 16 --max-context 512 --queue 64 > /tmp/qab/server_$v.log 2>&1) &
  pid=$!
  echo "-- $v $(date +%T)"
  (cd /work/main && PYTHONPATH=. timeout 600 .venv/bin/python -m tools.load --port 8093 --clients 4,16 --requests 16 --seconds 15 --wait 400 --json /tmp/qab/load_$v.$RANDOM.json 2>&1 | tail -4)
  kill $pid; wait $pid 2>/dev/null
done
