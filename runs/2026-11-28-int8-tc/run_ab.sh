# H100: the i8 forms of a chunk's products; an int8 matmul on the series of 28 (A), 29 (int8 tensor cores) and 30 (8-bit
# vector loads); the generated path's full-model numbers on 28 and 30 (tools/gpu_session.sh variants)
cd "$(dirname "$0")/../.."
DEV=CUDA TC_OPT=1 PYTHONPATH=. python3 runs/2026-11-28-int8-tc/probe.py 512 i8,i8b 2>&1 | grep -v '^compil' | tail -7
for upto in 28 29 30; do
  python3 apply_patches.py --upto $upto > /dev/null
  echo "-- series 1-$upto"; TINYGRAD_UPTO=$upto DEV=CUDA PYTHONPATH=. python3 runs/2026-11-28-int8-tc/int8_mm.py 2>&1 | tail -1
done
python3 apply_patches.py > /dev/null
VARIANTS="s28:28 s30:" PRESETS=${PRESETS:-youtu-llm-2b} LIMIT=240 bash tools/gpu_session.sh variants
