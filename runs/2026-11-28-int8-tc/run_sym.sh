# GPU, after make_variants.sh: the generated path's prefill with the block products (B: the checkout's apps/quantized.py) and
# without (A/quantized.py: the packed fp32 products), on the series without patch 0032 (tensor-core kernels upcast a symbolic
# M or N) and with it. PRESETS (default youtu-llm-2b,deepseek-v2-lite), LIMIT s a variant.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT" ab/B; cp apps/quantized.py ab/B/quantized.py
bench() {  # name, patches (empty: all), apps/quantized.py variant
  python3 apply_patches.py ${2:+--upto $2} > /dev/null; cp "$3" apps/quantized.py; echo "-- $1"
  env TINYGRAD_UPTO=$2 timeout ${LIMIT:-200} python3 -m tools.gpu_bench --kernels generated --presets "${PRESETS:-youtu-llm-2b,deepseek-v2-lite}" \
    --decode 32 --prefill 512 --json "$OUT/$1.json" 2>&1 | tee "$OUT/$1.log" | grep -v '^{' | tail -${TAIL:-4}
}
for v in ${VARIANTS:-s32-blk s31-packed s32-packed s31-blk}; do
  case $v in
    s32-blk) bench $v "" ab/B/quantized.py ;;
    s31-blk) bench $v 31 ab/B/quantized.py ;;
    s31-packed) bench $v 31 runs/2026-11-28-int8-tc/A/quantized.py ;;
    s32-packed) bench $v "" runs/2026-11-28-int8-tc/A/quantized.py ;;
  esac
done
python3 apply_patches.py > /dev/null; cp ab/B/quantized.py apps/quantized.py
