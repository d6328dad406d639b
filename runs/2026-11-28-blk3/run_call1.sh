# GPU: GLM-4.7-Flash's generated path, three variants of apps/quantized.py in one lease: B the checkout (a chunk's block
# products with a normed product's 1 / rms in x's scales, attn_k_b / attn_v_b as block products), A c1485c2's (the routed
# experts' tiles as packed fp32 products; block_product_bytes appended), C the tree before B (`git show fff910b:apps/quantized.py`).
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out} PRESETS=glm-4.7-flash LIMIT=${LIMIT:-185} A=ab/A C=ab/H bash tools/gpu_session.sh abapps
