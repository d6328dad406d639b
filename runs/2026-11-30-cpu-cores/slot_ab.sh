# The CPU's hand-written product for MLA's per-head k_b / v_b (apps/kernels/cpu.py, J slots) on full-size Youtu-LLM-2B on
# this machine's CPU (2 cores; keep it otherwise idle): A = the tree with dispatch's per-slot branch off (those products
# generated, as before), B = the tree, interleaved twice, the hand-written path. From the repository root:
#   bash runs/2026-11-30-cpu-cores/slot_ab.sh > runs/2026-11-30-cpu-cores/slot_ab.txt
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/2026-11-30-cpu-cores}
A='  if spec.op == "batched" and spec.J == spec.E and spec.x_per_slot and not spec.residual:'
for r in 1 2; do
  for v in A B; do
    [ $v = A ] && sed -i "s/^$A\$/  if False and spec.op == \"batched\":/" apps/dispatch.py
    grep -q '^  if False and spec.op == "batched":$' apps/dispatch.py && [ $v = B ] && { echo "B is not the tree"; exit 1; }
    echo "-- round $r $v"
    DEV=CPU PYTHONPATH=. timeout 1200 ./.venv/bin/python -m tools.gpu_bench --kernels hand --presets youtu-llm-2b --decode 16 --prefill 64 \
      --json "$OUT/slot_$r$v.json" 2>&1 | grep -v '^{' | grep youtu-llm-2b | tail -1
    [ $v = A ] && sed -i "s/^  if False and spec.op == \"batched\":\$/$A/" apps/dispatch.py
  done
done
