# The server under load on this machine's CPU (2 cores; the clients on the same cores), A = the apps before (a git worktree
# at $A, as for ab.sh), B = this tree: M (default Youtu-LLM-2B-tiny), 8 slots, 1 and 8 streaming clients of 6 requests each (prompts of
# 8-256 words, replies of 32-128 tokens: tools.load's mix).
# From the repository root:   A=/tmp/wtA bash runs/2026-11-30-cpu-rows/serve_ab.sh > runs/2026-11-30-cpu-rows/serve_ab.txt
#   (serve_ab_glm.txt: M=glm-4.7-flash-tiny, A = 0439c8d, B = 3d84362: the Q5_K / Q6_K products too)
cd "$(dirname "$0")/../.."
B=$PWD; OUT=${OUT:-$B/runs/2026-11-30-cpu-rows}; M=${M:-youtu-llm-2b-tiny}
for v in ${ORDER:-A B}; do
  dir=${!v}; echo "-- $v ($dir)"
  (cd "$dir" && DEV=CPU PYTHONPATH=. exec ./.venv/bin/python apps/llm.py --model $M --serve 8091 --parallel 8 --max-context 1024 --queue 16 \
     > "$OUT/server_${M}_$v.log" 2>&1) &
  pid=$!
  PYTHONPATH=. ./.venv/bin/python -m tools.load --port 8091 --clients 1,8 --requests 6 --seconds 120 --wait 300 --json "$OUT/load_${M}_$v.json" 2>&1 | tail -4
  kill $pid; wait $pid
done
