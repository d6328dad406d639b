#!/usr/bin/env bash
# One H100 call: where a second process's start goes, with Python's bytecode cache as the machine has it and with it on
#   PRESETS=youtu-llm-2b,deepseek-v2-lite bash runs/2026-11-28-start/run1.sh
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 DEV=CUDA OUT=${OUT:-out} PYTHONPATH=.
mkdir -p $OUT
env | grep -i "^PYTHON" | tee $OUT/env.txt
python3 -c "from apps import synth; [synth.generate(p, 'release', progress=False) for p in '${PRESETS}'.split(',')]" && sync
timeout 200 python3 -m tools.start_time --presets "$PRESETS" --json $OUT/start_env.json 2>&1 | tee $OUT/start_env.txt | tail -3
env -u PYTHONDONTWRITEBYTECODE timeout 200 python3 -m tools.start_time --presets "$PRESETS" --json $OUT/start_pyc.json 2>&1 | tee $OUT/start_pyc.txt | tail -3
P=${PRESETS%%,*}; rm -rf /tmp/ps; mkdir -p /tmp/ps
for i in 1 2; do env -u PYTHONDONTWRITEBYTECODE CACHEDB=/tmp/ps/cache.db timeout 120 python3 runs/2026-11-28-start/prof_start.py $P /tmp/ps/cap 45 > $OUT/prof_$i.txt 2>&1; done
head -60 $OUT/prof_2.txt | cut -c1-160
