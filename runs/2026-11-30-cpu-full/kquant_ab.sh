# The CPU's Q5_K / Q6_K products of more than 8 tokens in the buffer form (the MoE models' shared experts in a prompt's
# chunk), A = the apps without it (a git worktree of the commit before, at $A, sharing this tree's upstream/, .venv and
# .cache), B = this tree; interleaved rounds on this machine's 2 cores (keep it otherwise idle):
#   full-size DeepSeek-V2-Lite: a 64-token prompt's prefill and 8 tokens of decode (tools.gpu_bench, the CPU's default path);
#   the tiny presets: a batched step of 1-8 sequences and a 199-token prompt's prefill (runs/2026-11-30-cpu-rows/steps.py).
# From the repository root:   A=/tmp/wtA bash runs/2026-11-30-cpu-full/kquant_ab.sh > runs/2026-11-30-cpu-full/kquant_ab.txt
cd "$(dirname "$0")/../.."
B=$PWD; OUT=$B/runs/2026-11-30-cpu-full
for r in ${ROUNDS:-1 2}; do
  for v in A B; do
    dir=${!v}
    echo "-- round $r $v ($dir)"
    for m in ${FULL:-deepseek-v2-lite}; do
      (cd "$dir" && DEV=CPU PYTHONPATH=. timeout 1500 ./.venv/bin/python -m tools.gpu_bench --kernels hand --presets $m --decode 8 \
        --prefill ${PROMPT:-64} --json "$OUT/kq_${m}_$r$v.json" 2>&1 | grep "^$m  ")
    done
    for m in deepseek-v2-lite-tiny glm-4.7-flash-tiny; do
      (cd "$dir" && DEV=CPU PYTHONPATH=. timeout 900 ./.venv/bin/python "$B/runs/2026-11-30-cpu-rows/steps.py" $m 2>&1 | grep "^$m")
    done
  done
done
