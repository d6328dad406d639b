# GPU: the paths against each other at full size over one 512-token chunk (the generated path's block products), then the A/B
# of run_ab.sh on GLM-4.7-Flash.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
timeout 110 python3 -m tools.path_check --presets youtu-llm-2b --tokens 544 --skip 0 > "$OUT/path_check.txt" 2>&1; tail -6 "$OUT/path_check.txt"
PRESETS=glm-4.7-flash LIMIT=${LIMIT:-220} bash runs/2026-11-28-blk2/run_ab.sh
