# GPU: the generated path with a chunk's Q4_0 / Q8_0 products as block products on the int8 tensor cores (B: the checkout's
# apps/quantized.py) against the packed fp32 products (A: ab/A/quantized.py, the tree before, `git show <before>:apps/quantized.py`).
# PRESETS, LIMIT s a variant. Logs: $OUT/abapps_{A,B}.{log,json}.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA}
OUT=${OUT:-out} PRESETS=${PRESETS:-youtu-llm-2b,deepseek-v2-lite} LIMIT=${LIMIT:-270} bash tools/gpu_session.sh abapps
