# GPU, for the next lease (not yet run): the paths at full size over one 512-token chunk on the MoE models (the generated path's
# block products, experts' tiles included), GLM-4.7-Flash's A/B of the experts' tiles (A: `git show c1485c2:apps/quantized.py >
# ab/A/quantized.py`), then the tensor-core tilings of the block products (probe.py's overrides, fixed since call 1).
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
timeout 200 python3 -m tools.path_check --presets deepseek-v2-lite,glm-4.7-flash --tokens 544 --skip 0 > "$OUT/path_check.txt" 2>&1; tail -6 "$OUT/path_check.txt"
PRESETS=glm-4.7-flash LIMIT=220 bash runs/2026-11-28-blk2/run_ab.sh
OUT=$OUT bash runs/2026-11-28-blk2/run_probe.sh; cat "$OUT/probe.txt"
