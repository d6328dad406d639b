# GPU, after `KEEP=A make_variants.sh`: where a generated 512-token prompt chunk's time goes, kernel by kernel, with the packed fp32 products (the checkout,
# A) and with the block products (B/quantized.py), on the whole series. MODELS (default youtu-llm-2b).
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"; cp apps/quantized.py "$OUT/A_quantized.py"
for v in A B; do
  [ $v = B ] && cp runs/2026-11-28-int8-tc/B/quantized.py apps/quantized.py
  for m in ${MODELS:-youtu-llm-2b}; do
    echo "-- $v $m"
    timeout ${LIMIT:-200} python3 -m tools.profile --model $m --kernels generated --target prompt --chunk 512 --pos 0 --repeat 2 --count 3 \
      --top ${TOP:-12} > "$OUT/fill_${v}_$m.txt" 2>&1; tail -${TAIL:-45} "$OUT/fill_${v}_$m.txt"
  done
done
cp "$OUT/A_quantized.py" apps/quantized.py
