# An apps change on the CPU at full size, A = the apps without it (a git worktree of the commit before, at $A, sharing this
# tree's upstream/, .venv and .cache), B = this tree; interleaved rounds on this machine's 2 cores (keep it otherwise idle):
#   $FULL (full-size presets): a $PROMPT-token prompt's prefill and $DECODE tokens of decode (tools.gpu_bench, the CPU's path),
#   $TINY (tiny presets): a batched step of 1-8 sequences and a 199-token prompt's prefill (runs/2026-11-30-cpu-rows/steps.py).
# From the repository root, as run:
#   the Q4_0 product of several tokens (run as runs/2026-11-30-cpu-rows/ab.sh before it was folded in here: cpu-rows/ab.txt):
#                                     A=/tmp/wtA FULL=youtu-llm-2b DECODE=16 TINY="youtu-llm-2b-tiny deepseek-v2-lite-tiny glm-4.7-flash-tiny" \
#                                       bash runs/2026-11-30-cpu-full/ab.sh > runs/2026-11-30-cpu-full/rows_ab.txt
#   the K-quant products of a chunk:  A=/tmp/wtA TAG=kq PROMPT=128 bash runs/2026-11-30-cpu-full/ab.sh > runs/2026-11-30-cpu-full/kquant_ab.txt
#   Q4_0 of a short last group:       A=/tmp/wtA TAG=tail FULL=glm-4.7-flash PROMPT=32 DECODE=16 TINY= bash runs/2026-11-30-cpu-full/ab.sh \
#                                       > runs/2026-11-30-cpu-full/tail_ab.txt
#   Q5_K's high bits shifted once:    A=/tmp/wtA TAG=q5k FULL=glm-4.7-flash PROMPT=128 DECODE=32 TINY= bash runs/2026-11-30-cpu-full/ab.sh \
#                                       > runs/2026-11-30-cpu-full/q5k_ab.txt
cd "$(dirname "$0")/../.."
B=$PWD; OUT=$B/runs/2026-11-30-cpu-full
for r in ${ROUNDS:-1 2}; do
  for v in A B; do
    dir=${!v}
    echo "-- round $r $v ($dir)"
    for m in ${FULL-deepseek-v2-lite}; do
      (cd "$dir" && DEV=CPU PYTHONPATH=. timeout 1500 ./.venv/bin/python -m tools.gpu_bench --kernels hand --presets $m --decode ${DECODE:-8} \
        --prefill ${PROMPT:-64} --json "$OUT/${TAG:-ab}_${m}_$r$v.json" 2>&1 | grep "^$m  ")
    done
    for m in ${TINY-deepseek-v2-lite-tiny glm-4.7-flash-tiny}; do
      (cd "$dir" && DEV=CPU PYTHONPATH=. timeout 900 ./.venv/bin/python "$B/runs/2026-11-30-cpu-rows/steps.py" $m 2>&1 | grep "^$m")
    done
  done
done
