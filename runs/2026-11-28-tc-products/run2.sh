#!/usr/bin/env bash
# One H100 call: the generated path's dense prefill products as tensor ops on the tensor cores (W dequantized to fp32, tf32
# as three products). A = the series' first 28 patches and the apps of A/ (make_a.sh); P = the whole series (0029:
# tensor-core kernels unroll K) and A's apps; B = the whole series and the checkout.
#   PRESETS=youtu-llm-2b,deepseek-v2-lite [PROBE=1] [AB=1: A, P, B] [HAND=1] [CHECK=1] [PATHS=seconds] bash runs/2026-11-28-tc-products/run2.sh
cd "$(dirname "$0")/../.."
D=runs/2026-11-28-tc-products
export PYTHONUNBUFFERED=1 DEV=CUDA OUT=${OUT:-out} CACHELEVEL=0 PYTHONPATH=.
mkdir -p $OUT $D/B
python3 -c "from apps import synth; [synth.generate(p, 'release', progress=False) for p in '${PRESETS}'.split(',')]" && sync
cp apps/quantized.py apps/dispatch.py $D/B/
bench() {  # name upto apps-dir kernels
  python3 apply_patches.py ${2:+--upto $2} > /dev/null; cp $3/*.py apps/; rm -rf .cache/captures
  echo "-- $1"
  TINYGRAD_UPTO=$2 timeout ${LIMIT:-280} python3 -m tools.gpu_bench --kernels $4 --presets "$PRESETS" --decode 32 --prefill 512 --json "$OUT/$1.json" 2>&1 \
    | tee "$OUT/$1.log" | grep -A4 '^model'
}
if [ -n "$PROBE" ]; then
  for T in 512 128; do echo "-- probe T=$T"; timeout 150 python3 $D/probe.py $T packed,f32 2>&1 | tee $OUT/probe_$T.txt | grep -E "^youtu|^glm"; done
fi
[ -n "$AB" ] && { bench A 28 $D/A generated; bench P "" $D/A generated; bench B "" $D/B generated; }
[ -n "$HAND" ] && { bench handA 28 $D/A hand; bench handB "" $D/B hand; }
python3 apply_patches.py > /dev/null; cp $D/B/*.py apps/
[ -n "$CHECK" ] && timeout 150 python3 -m tools.gpu_check release --kernels generated 2>&1 | tee $OUT/check_generated.log | tail -5
[ -n "$PATHS" ] && timeout ${PATHS} python3 -m tools.path_check --presets "$PRESETS" --depth 0 2>&1 | tee $OUT/paths.txt | tail -12
true
