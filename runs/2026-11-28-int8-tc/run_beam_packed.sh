# GPU: what BEAM finds for the generated prefill's largest kernels, the packed fp32 products of a 512-token chunk (Youtu-LLM-2B's
# gate_up 12288 x 2048 and down 2048 x 6144; probe.py's "packed" form, as the model runs them), against the heuristics' pick,
# with the opts of each (DEBUG=3). Run from the repository root with DEV=CUDA.
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 PARALLEL=0 CACHELEVEL=0
for shape in ${SHAPES:-gate_up down}; do
  echo "-- heuristics $shape"; DEBUG=3 timeout 45 python3 runs/2026-11-28-int8-tc/probe.py 512 packed $shape 2>&1 | grep -a "q4_0_linear.*opts\|^youtu"
  echo "-- BEAM=${BEAM_N:-2} $shape"; BEAM=${BEAM_N:-2} DEBUG=3 timeout ${LIMIT:-200} python3 runs/2026-11-28-int8-tc/probe.py 512 packed $shape 2>&1 | grep -a "q4_0_linear.*opts\|^youtu"
done
