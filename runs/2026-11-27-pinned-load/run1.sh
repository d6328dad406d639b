#!/usr/bin/env bash
# Loading straight into the pinned staging buffers (the checkout, B) against packing into fresh host arrays and copying
# them into the staging buffers (A = apps/{packed,readback,quantized}.py before), fresh processes, one lease; then the
# greedy check of the tiny presets and a profile of B's GLM-4.7-Flash load.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
R=runs/2026-11-27-pinned-load
P=${PRESETS:-glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b}
mkdir -p /tmp/B && cp apps/packed.py apps/readback.py apps/quantized.py /tmp/B/
for v in A B; do
  src=$R/A; [ $v = B ] && src=/tmp/B
  cp $src/packed.py $src/readback.py $src/quantized.py apps/
  echo "-- $v"
  timeout 400 python3 -m tools.start_time --presets $P --json "$OUT/start_$v.json" 2>&1 | tee "$OUT/start_$v.log" | grep -v "^ *$" | tail -4
done
cp /tmp/B/*.py apps/
timeout 200 python3 -m tools.gpu_check release 2>&1 | tail -6 | tee "$OUT/gpu_check.log"
python3 - <<'PY' 2>&1 | tee "$OUT/profile_B.log" | head -45
import cProfile, pstats, time, apps
from pathlib import Path
from apps import engine
src = engine.resolve_model("glm-4.7-flash", None, None)
t = time.time()
cProfile.run("eng = engine.Engine.load(src, max_context=1024, quiet=True, capture_dir=Path('/tmp/caps'))", "/tmp/load.prof")
from tinygrad import Device; Device[eng.model.device].synchronize()
print(f"load {time.time() - t:.2f} s (under cProfile)")
pstats.Stats("/tmp/load.prof").sort_stats("cumulative").print_stats(30)
PY
