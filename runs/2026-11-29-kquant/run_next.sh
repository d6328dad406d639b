# GPU, for the next lease: tiles of 32 for a chunk's routed experts (runs/2026-11-29-tc/tile32.diff, on top of the K-quant
# block products now in apps/quantized.py). Here, first:
#   mkdir -p ab/T && cp apps/quantized.py /tmp/q.py && git apply runs/2026-11-29-tc/tile32.diff && cp apps/quantized.py ab/T/ && cp /tmp/q.py apps/quantized.py
# Step 1: GLM-4.7-Flash, the checkout (A, paying the compiles) against tile32 (C) (~600 s on a fresh machine: run it first,
# alone). Step 2: the paths against each other with tile32 at full size (DeepSeek-V2-Lite over 544 tokens, GLM-4.7-Flash over
# 128). Step 3: DeepSeek-V2-Lite's chunk kernel by kernel with the checkout.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { python3 -c "from apps import synth; synth.generate('$1', 'release', progress=False)"; }
case ${1:-1} in
  1) synth glm-4.7-flash && OUT=$OUT PRESETS=glm-4.7-flash LIMIT=280 A=ab/T bash tools/gpu_session.sh abapps ;;
  2) cp ab/T/quantized.py apps/quantized.py
     for spec in deepseek-v2-lite:544:280 glm-4.7-flash:128:280; do
       IFS=: read -r m n t <<< "$spec"
       synth $m && timeout $t python3 -m tools.path_check --presets $m --tokens $n --skip 0 --pinned > "$OUT/path_check_${m}_$n.txt" 2>&1
       tail -1 "$OUT/path_check_${m}_$n.txt"
     done ;;
  3) timeout 400 python3 -m tools.profile --model deepseek-v2-lite --kernels generated --target prompt --chunk 512 --pos 0 --top 40 \
       > "$OUT/profile_dsv2_prompt.txt" 2>&1; head -60 "$OUT/profile_dsv2_prompt.txt" ;;
esac
