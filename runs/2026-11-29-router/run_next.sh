# GPU, for the next lease: patches 42 (a tensor-core kernel's upcasts keep 256 tiles in the grid: the fp32 router of a chunk)
# and 43 (a grouped reduction for a few thousand outputs of a long reduction: a chunk's routed entries' ranks and tiles), then
# tiles of 32 for a chunk's routed experts (runs/2026-11-29-tc/tile32.diff). Only DeepSeek-V2-Lite's and GLM-4.7-Flash's
# kernels change (rendered for sm_90 without a GPU: the router and the two ranking kernels of a 512-token chunk, the router of
# a batched step of 32; no decode kernel; no Youtu-LLM-2B kernel). Here, first:
#   git apply runs/2026-11-29-router/land.diff && python3 apply_patches.py    # the two patches in the series, their tests
#   mkdir -p ab/T && cp apps/quantized.py /tmp/q.py && git apply runs/2026-11-29-tc/tile32.diff && cp apps/quantized.py ab/T/ && cp /tmp/q.py apps/quantized.py
# Step 1: DeepSeek-V2-Lite on the series of 41 / 42 / 43 (~330 s with its synthesis). Step 2: GLM-4.7-Flash on 41 / 43
# (~500 s on a fresh machine: its first process compiles). Step 3: GLM-4.7-Flash, the checkout (B) against tile32 (abapps, A = ab/T).
# Step 4: the paths against each other with tile32 at full size (DeepSeek-V2-Lite over 544 tokens, GLM-4.7-Flash over 128).
# Step 5: DeepSeek-V2-Lite's chunk kernel by kernel with the checkout.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { python3 -c "from apps import synth; synth.generate('$1', 'release', progress=False)"; }
case ${1:-1} in
  1) synth deepseek-v2-lite && OUT=$OUT PRESETS=deepseek-v2-lite LIMIT=200 VARIANTS="A:41 B:42 C:" bash tools/gpu_session.sh variants ;;
  2) synth glm-4.7-flash && OUT=$OUT PRESETS=glm-4.7-flash LIMIT=280 VARIANTS="A:41 C:" bash tools/gpu_session.sh variants ;;
  3) synth glm-4.7-flash && OUT=$OUT PRESETS=glm-4.7-flash LIMIT=280 A=ab/T bash tools/gpu_session.sh abapps ;;
  4) cp ab/T/quantized.py apps/quantized.py && synth deepseek-v2-lite && synth glm-4.7-flash && OUT=$OUT bash tools/gpu_session.sh chunkpaths ;;
  5) timeout 400 python3 -m tools.profile --model deepseek-v2-lite --kernels generated --target prompt --chunk 512 --pos 0 --top 40 \
       > "$OUT/profile_dsv2_prompt.txt" 2>&1; head -60 "$OUT/profile_dsv2_prompt.txt" ;;
esac
