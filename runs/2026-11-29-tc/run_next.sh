# GPU, for the next lease: A = the checkout's apps/quantized.py as committed, B = kquant-block-products.diff (a chunk's
# K-quant products, the shared experts' Q5_K / Q6_K, on the int8 tensor cores), C = B + tile32.diff (a chunk's routed experts
# in tiles of 32 where they average 32 entries an expert or more: each expert's weights read half as often). Here, first:
#   mkdir -p ab/K ab/C && cp apps/quantized.py ab/K/ && git apply runs/2026-11-29-tc/kquant-block-products.diff &&
#   cp apps/quantized.py /tmp/b.py && patch -s -p1 < runs/2026-11-29-tc/tile32.diff && cp apps/quantized.py ab/C/ && cp /tmp/b.py apps/quantized.py
# (the checkout is then B). Step 1: DeepSeek-V2-Lite B, A, C (generated path, decode 32 / prefill 512; ~300 s with its
# synthesis). Step 2: the same for GLM-4.7-Flash (~450 s). Step 3: the paths against each other with B at full size
# (tools.path_check --pinned: DeepSeek-V2-Lite over 544 tokens, GLM-4.7-Flash over 128). Step 4: DeepSeek-V2-Lite's chunk
# kernel by kernel with the checkout.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { python3 -c "from apps import synth; synth.generate('$1', 'release', progress=False)"; }
case ${1:-1} in
  1) synth deepseek-v2-lite && OUT=$OUT PRESETS=deepseek-v2-lite LIMIT=180 A=ab/K C=ab/C bash tools/gpu_session.sh abapps ;;
  2) synth glm-4.7-flash && OUT=$OUT PRESETS=glm-4.7-flash LIMIT=190 A=ab/K C=ab/C bash tools/gpu_session.sh abapps ;;
  3) for spec in deepseek-v2-lite:544:250 glm-4.7-flash:128:250; do
       IFS=: read -r m n t <<< "$spec"
       synth $m && timeout $t python3 -m tools.path_check --presets $m --tokens $n --skip 0 --pinned > "$OUT/path_check_${m}_$n.txt" 2>&1
       tail -1 "$OUT/path_check_${m}_$n.txt"
     done ;;
  4) timeout 400 python3 -m tools.profile --model deepseek-v2-lite --kernels generated --target prompt --chunk 512 --pos 0 --top 40 \
       > "$OUT/profile_dsv2_prompt.txt" 2>&1; head -60 "$OUT/profile_dsv2_prompt.txt" ;;
esac
