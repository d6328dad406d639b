#!/usr/bin/env bash
# llama.cpp's llama-bench built from the pinned sdist (tools.llama_bench) and the three full-size files generated, for run9.sh.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
(python3 -c "import apps; from apps import synth; [synth.generate(p, 'release', progress=False) for p in ('glm-4.7-flash', 'deepseek-v2-lite', 'youtu-llm-2b')]" \
  > "$OUT/synth.log" 2>&1; echo "synth exit $?" >> "$OUT/synth.log") &
timeout 560 python3 -m tools.llama_bench build --time-limit 540 > "$OUT/build.log" 2>&1; echo "build exit $?" >> "$OUT/build.log"
wait
tail -2 "$OUT/build.log" "$OUT/synth.log"
