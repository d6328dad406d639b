# GPU, for the next lease: the K-quant block products (kquant-block-products.diff: the shared experts' Q5_K / Q6_K products of
# a chunk on the int8 tensor cores) against the checkout without them. Here, before the first call:
#   git apply runs/2026-11-29-tc/kquant-block-products.diff && mkdir -p ab/K && git show HEAD:apps/quantized.py > ab/K/quantized.py
# Step 1: DeepSeek-V2-Lite, B (the diff) then A (ab/K), generated path, decode 32 / prefill 512 (~250 s with its synthesis).
# Step 2: the same for GLM-4.7-Flash (~330 s). Step 3: the paths against each other with B at full size (tools.path_check
# --pinned: DeepSeek-V2-Lite over 544 tokens, GLM-4.7-Flash over 128). Step 4: DeepSeek-V2-Lite's chunk kernel by kernel with B.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { python3 -c "from apps import synth; synth.generate('$1', 'release', progress=False)"; }
case ${1:-1} in
  1) synth deepseek-v2-lite && OUT=$OUT PRESETS=deepseek-v2-lite LIMIT=170 A=ab/K bash tools/gpu_session.sh abapps ;;
  2) synth glm-4.7-flash && OUT=$OUT PRESETS=glm-4.7-flash LIMIT=250 A=ab/K bash tools/gpu_session.sh abapps ;;
  3) for spec in deepseek-v2-lite:544:250 glm-4.7-flash:128:250; do
       IFS=: read -r m n t <<< "$spec"
       synth $m && timeout $t python3 -m tools.path_check --presets $m --tokens $n --skip 0 --pinned > "$OUT/path_check_${m}_$n.txt" 2>&1
       tail -1 "$OUT/path_check_${m}_$n.txt"
     done ;;
  4) timeout 400 python3 -m tools.profile --model deepseek-v2-lite --kernels generated --target prompt --chunk 512 --pos 0 --top 40 \
       > "$OUT/profile_dsv2_prompt.txt" 2>&1; head -60 "$OUT/profile_dsv2_prompt.txt" ;;
esac
