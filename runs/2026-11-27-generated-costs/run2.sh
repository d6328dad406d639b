#!/usr/bin/env bash
# One H100 call: the matvec rule's rows a thread (patch 22 experiment, MVT = the fewest threads the rows a thread may leave)
# on the full models, generated path. PRESETS picks the models; VARS the MVT values (0: the series as it was). No lowering
# cache and no kept captures, so every variant lowers and captures its own kernels.
#   PRESETS=youtu-llm-2b,deepseek-v2-lite VARS="0 32768 65536" bash runs/2026-11-27-generated-costs/run2.sh
export PYTHONUNBUFFERED=1 DEV=CUDA OUT=${OUT:-out} CACHELEVEL=0
mkdir -p $OUT
python3 -c "from apps import synth; [synth.generate(p, 'release', progress=False) for p in '${PRESETS}'.split(',')]" && sync
for t in ${VARS}; do
  rm -rf .cache/captures
  echo "-- MVT=$t"
  MVT=$t timeout ${LIMIT:-200} python3 -m tools.gpu_bench --kernels generated --presets "$PRESETS" --decode 32 --prefill 512 \
    --json "$OUT/mvt$t.json" 2>&1 | tee "$OUT/mvt$t.log" | grep -v '^{' | tail -4
done
