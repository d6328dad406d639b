#!/usr/bin/env bash
# One GPU call: a second process's start, A (da592b5: the checkout with change.diff, the apps part of a1ef0b4, reversed,
# and the series without patch 34) against B (the checkout: the model's state without a schedule, patch 34), interleaved A B A B, fresh processes
# (tools.start_time), the bytecode written at set-up as ./run does. First: device_full on CUDA against numpy.
#   PRESETS=youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash bash runs/2026-11-28-start2/run1.sh
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 DEV=CUDA OUT=${OUT:-out} PYTHONPATH=.
PRESETS=${PRESETS:-youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash}
mkdir -p $OUT
python3 - <<'PY' 2>&1 | tee $OUT/device_full.txt
import numpy as np
import apps  # noqa: F401  (puts the patched tinygrad on the path)
from tinygrad import dtypes
from apps.readback import device_full
for shape, v, dt in (((3, 5), 0, dtypes.float32), ((7,), 1.0, dtypes.float32), ((4, 9), -1, dtypes.int32), ((5,), 0, dtypes.uint32),
                     ((6, 3), 0, dtypes.float16), ((1 << 20,), 0.5, dtypes.float16), ((11,), 3, dtypes.uint8)):
  got = device_full(shape, v, dt).numpy()
  assert got.shape == shape and (got == v).all(), (shape, v, dt, got)
print("device_full ok")
PY
( time python3 apply_patches.py; time python3 -m compileall -q apps tools ) > $OUT/apply_B.txt 2>&1
rm -rf /tmp/A && mkdir /tmp/A && tar --exclude=./.cache -cf - . | (cd /tmp/A && tar xf -) && ln -s "$PWD/.cache" /tmp/A/.cache
(cd /tmp/A && patch -R -s -p1 < runs/2026-11-28-start2/change.diff)
sed -i '/^0034-/d' /tmp/A/patches/series && rm /tmp/A/patches/0034-*
(cd /tmp/A && rm -rf $(find apps tools -name __pycache__) && ( time python3 apply_patches.py; time python3 -m compileall -q apps tools ) > $OUT/apply_A.txt 2>&1)
python3 -c "from apps import synth; [synth.generate(p, 'release', progress=False) for p in '${PRESETS}'.split(',')]" && sync
for round in 1 2; do
  for v in A B; do
    dir=.; [ $v = A ] && dir=/tmp/A
    echo "-- $v round $round"
    (cd $dir && timeout ${LIMIT:-150} python3 -m tools.start_time --presets "$PRESETS" --json /tmp/start_${v}_$round.json 2>&1) | grep -v "^{" | tee -a $OUT/start.txt
    python3 -c "import json; print('tokens', [(r['preset'] if 'preset' in r else '?', r['first']['token'], r['second']['token']) for r in json.load(open('/tmp/start_${v}_$round.json'))])" 2>&1 | tee -a $OUT/start.txt
  done
done
# where a second process of Youtu-LLM-2B goes (B): imports (-X importtime), then cProfile of its load and first step
python3 -X importtime -c "import apps; from apps import engine; from tinygrad import Device" 2> $OUT/importtime.txt
rm -rf /tmp/p && mkdir /tmp/p
for i in 1 2; do CACHEDB=/tmp/p/cache.db python3 runs/2026-11-28-start/prof_start.py youtu-llm-2b /tmp/p/cap 70 > $OUT/prof_youtu_$i.txt 2>&1; done
head -60 $OUT/prof_youtu_2.txt; rm $OUT/prof_youtu_1.txt
