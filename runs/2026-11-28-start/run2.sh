#!/usr/bin/env bash
# One H100 call: start times with the bytecode written at set-up (apply_patches.py, compileall of apps/ and tools/ as ./run
# does), the machine's environment as
# it is (PYTHONDONTWRITEBYTECODE=1 there)
#   PRESETS=youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash bash runs/2026-11-28-start/run2.sh
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 DEV=CUDA OUT=${OUT:-out} PYTHONPATH=.
mkdir -p $OUT
env | grep -i "^PYTHON" | tee $OUT/env.txt
( time python3 apply_patches.py; time python3 -m compileall -q apps tools ) 2>&1 | tee $OUT/apply.txt   # as ./run does
python3 -c "from apps import synth; [synth.generate(p, 'release', progress=False) for p in '${PRESETS}'.split(',')]" && sync
timeout ${LIMIT:-240} python3 -m tools.start_time --presets "$PRESETS" --json $OUT/start.json 2>&1 | tee $OUT/start.txt | tail -4
