# GPU: the int8 quants kernel with 8-bit data in vectors of up to 16 (a hand-edited coalesce.py in the carried tree: lengths
# [16,8,4,2] for 1-byte dtypes), the heuristics' opts and whole-block upcasts at 32 / 64 / 128 threads a workgroup.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1 PYTHONPATH=.
OUT=${OUT:-out}; mkdir -p "$OUT"
timeout 300 python3 runs/2026-11-29-lanes/probe.py heur "U3:0,U2:0,U1:0,L0:32" "U3:0,U2:0,U1:0,L0:64" "U3:0,U2:0,U1:0,L0:128" "U3:0,U2:0,U1:0,L0:256" 2>&1 | tee "$OUT/probe_c16.txt"
