# GPU: the paths against each other at full size over one 512-token chunk on the MoE models (fff910b: the routed experts'
# tiles as block products), with the routing pinned (the generated path routed as the prefill path routed) as well.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
for m in glm-4.7-flash deepseek-v2-lite; do
  timeout ${LIMIT:-280} python3 -m tools.path_check --presets $m --tokens 544 --skip 0 --pinned > "$OUT/path_check_$m.txt" 2>&1; tail -4 "$OUT/path_check_$m.txt"
done
