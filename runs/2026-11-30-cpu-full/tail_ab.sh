# The CPU's Q4_0 products of a K with a short last group of blocks (GLM-4.7-Flash's per-head k_b: K 192, 6 blocks), A = the
# apps without it (a git worktree of the commit before, at $A, sharing this tree's upstream/, .venv and .cache), B = this
# tree; full-size GLM-4.7-Flash's decode (and a 32-token prompt's prefill), interleaved rounds on this 2-core machine.
# From the repository root:   A=/tmp/wtA bash runs/2026-11-30-cpu-full/tail_ab.sh > runs/2026-11-30-cpu-full/tail_ab.txt
cd "$(dirname "$0")/../.."
B=$PWD; OUT=$B/runs/2026-11-30-cpu-full
for r in ${ROUNDS:-1 2}; do
  for v in A B; do
    dir=${!v}
    echo "-- round $r $v ($dir)"
    (cd "$dir" && DEV=CPU PYTHONPATH=. timeout 900 ./.venv/bin/python -m tools.gpu_bench --kernels hand --presets glm-4.7-flash --decode 16 \
      --prefill 32 --json "$OUT/tail_$r$v.json" 2>&1 | grep "^glm-4.7-flash  ")
  done
done
