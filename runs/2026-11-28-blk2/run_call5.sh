# GPU: the routed experts' tiles as block products (B: the checkout) against c1485c2's tiles (A: ab/A/quantized.py, `git show
# c1485c2:apps/quantized.py`), DeepSeek-V2-Lite.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
PRESETS=${PRESETS:-deepseek-v2-lite} LIMIT=${LIMIT:-120} bash runs/2026-11-28-blk2/run_ab.sh
