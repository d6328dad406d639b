# H100: the dense products of a 512-token chunk as fp16 products, tinygrad's heuristics and variants of their TC pick
# (PARALLEL=0 CACHELEVEL=0: the override of the heuristics must run in this process, on every kernel)
cd "$(dirname "$0")/../.."
export PYTHONPATH=. DEV=CUDA PARALLEL=0 CACHELEVEL=0
echo "== packed, f16 (heuristics)"; timeout 150 python3 runs/2026-11-28-tc-products/probe.py 512 packed,f16 2>&1 | grep -E "^youtu|^glm|failed|Error"
for v in "R0:4" "S0:1" "R0:4,S0:1" "R0:2,S0:1"; do
  echo "== TC_EXTRA=$v"; TC_EXTRA=$v timeout 100 python3 runs/2026-11-28-tc-products/probe.py 512 f16 2>&1 | grep -E "^youtu|^glm|failed|Error" | sort | uniq
done
