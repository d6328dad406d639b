# The CPU's hand-written Q4_0 product of several tokens and MLA's decode attention of a batched step's rows (apps/kernels/cpu.py),
# A = the apps without them (a git worktree of the commit before, at $A, sharing this tree's upstream/, .venv and .cache),
# B = this tree. On this machine's CPU (2 cores; keep it otherwise idle), interleaved rounds:
#   full-size Youtu-LLM-2B: a 64-token prompt's prefill and 16 tokens of decode (tools.gpu_bench, the CPU's default path);
#   the tiny presets: a batched step of 1-8 sequences and a 199-token prompt's prefill (steps.py).
# From the repository root:   A=/tmp/wtA bash runs/2026-11-30-cpu-rows/ab.sh > runs/2026-11-30-cpu-rows/ab.txt
# (git worktree add /tmp/wtA <commit>; ln -s the main tree's .venv, upstream and .cache into it)
cd "$(dirname "$0")/../.."
B=$PWD; OUT=$B/runs/2026-11-30-cpu-rows
for r in ${ROUNDS:-1 2}; do
  for v in A B; do
    dir=${!v}
    echo "-- round $r $v ($dir)"
    (cd "$dir" && DEV=CPU PYTHONPATH=. timeout 1500 ./.venv/bin/python -m tools.gpu_bench --kernels hand --presets youtu-llm-2b --decode 16 \
      --prefill ${PROMPT:-64} --json "$OUT/full_$r$v.json" 2>&1 | grep "^youtu-llm-2b  ")
    for m in youtu-llm-2b-tiny deepseek-v2-lite-tiny glm-4.7-flash-tiny; do
      (cd "$dir" && DEV=CPU PYTHONPATH=. timeout 900 ./.venv/bin/python "$OUT/steps.py" $m 2>&1 | grep "^$m")
    done
  done
done
