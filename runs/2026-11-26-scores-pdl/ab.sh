# Variants of the series side by side on the GPU machine: `bash runs/2026-11-26-scores-pdl/ab.sh NAME:UPTO[:ENV=V][:hand] ...`
# (Run on 2026-11-26 when the series held the scores rule as patch 16 and the PDL patch as 17; the PDL patch is 16 now.)
# gpu_bench (decode 32, prefill 512) of PRESETS on the first UPTO patches, generated kernels unless :hand; logs under $OUT.
export DEV=CUDA PYTHONUNBUFFERED=1; mkdir -p "$OUT"
for spec in "$@"; do
  IFS=: read -r name upto extra kind <<< "$spec"
  python3 apply_patches.py --upto "$upto" > /dev/null
  echo "-- $name (patches 1-$upto ${extra} ${kind:-generated})"
  env TINYGRAD_UPTO=$upto $extra timeout ${LIMIT:-200} python3 -m tools.gpu_bench --kernels ${kind:-generated} \
    --presets "${PRESETS:-youtu-llm-2b,deepseek-v2-lite}" --decode 32 --prefill 512 --json "$OUT/$name.json" 2>&1 \
    | tee "$OUT/$name.log" | grep -v '^{' | tail -4
done
python3 apply_patches.py > /dev/null
