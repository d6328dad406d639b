# patches/0065 (a CPU matvec of plain loads: 16 rows a thread, a thread a 256 KB) on this 2-core machine, A = the series
# without it (apply_patches --upto 64), B = the whole series, interleaved ROUNDS (default 2), from the repository root:
#   full size (FULL, default the MoE models, whose fp32 routers are such matvecs): the CPU's default path's decode of
#   DECODE tokens after a 16-token prompt (tools.gpu_bench); then the tiny presets on the generated path (tools/cpu_abpatch.sh)
#   bash runs/2026-12-01-cpu-mv/ab.sh > runs/2026-12-01-cpu-mv/ab.txt 2>&1
cd "$(dirname "$0")/../.."
OUT=runs/2026-12-01-cpu-mv
for r in ${ROUNDS:-1 2}; do
  for v in A B; do
    if [ $v = A ]; then ./.venv/bin/python apply_patches.py --upto 64 > /dev/null; U=64; else ./.venv/bin/python apply_patches.py > /dev/null; U=; fi
    echo "-- round $r $v"
    TINYGRAD_UPTO=$U DEV=CPU PYTHONPATH=. timeout 2400 ./.venv/bin/python -m tools.gpu_bench --presets ${FULL:-deepseek-v2-lite,glm-4.7-flash} \
      --decode ${DECODE:-32} --prefill 16 --json $OUT/full_$r$v.json 2>&1 | grep -E "^(deepseek|glm|youtu)"
  done
done
./.venv/bin/python apply_patches.py > /dev/null
[ -n "$TINY" ] && PATCH=65 ROUNDS=2 bash tools/cpu_abpatch.sh
