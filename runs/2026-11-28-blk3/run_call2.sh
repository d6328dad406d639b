# GPU: the paths against each other at full size over one 512-token chunk on the MoE models with the checkout (the routed
# experts' tiles as block products, as fff910b; a normed product's 1 / rms in x's scales; attn_k_b / attn_v_b as block
# products), then Youtu-LLM-2B and DeepSeek-V2-Lite: B the checkout against A = fff910b's apps/quantized.py (ab/H).
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
timeout 300 python3 -m tools.path_check --presets deepseek-v2-lite,glm-4.7-flash --tokens 544 --skip 0 > "$OUT/path_check.txt" 2>&1; tail -5 "$OUT/path_check.txt"
OUT=$OUT PRESETS=youtu-llm-2b,deepseek-v2-lite LIMIT=${LIMIT:-140} A=ab/H bash tools/gpu_session.sh abapps
