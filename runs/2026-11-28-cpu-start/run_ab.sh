# CPU: seconds to the first token of fresh processes (tools.start_time, tiny presets), trees side by side, interleaved:
#   bash runs/2026-11-28-cpu-start/run_ab.sh NAME=DIR ...   (DIR: a checkout with its .venv; `git worktree add DIR REV`)
# Before this folder's change: A = 79651ef; A33 = 79651ef with patches/ of 76aceac (patch 0033 alone); B = 76aceac.
cd "$(dirname "$0")/../.."
for round in ${ROUNDS:-1 2}; do
  for spec in "$@"; do
    name=${spec%%=*}; dir=${spec#*=}
    echo "-- $name (round $round)"
    (cd "$dir" && env -u DEV ./run python -m tools.start_time --presets ${PRESETS:-deepseek-v2-lite-tiny,youtu-llm-2b-tiny,glm-4.7-flash-tiny} 2>&1 | grep -v "^upstream\|^materialized")
  done
done
