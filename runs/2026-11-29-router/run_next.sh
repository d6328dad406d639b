# GPU, for the next lease: GLM-4.7-Flash's A / B of what landed on 2026-11-29 untimed on it (patch 43: its chunk's router and
# tiles kernel; tiles of 32 for the routed experts: apps/quantized.py's _tiled). Each patch series has its own compile cache,
# so each variant's first process on a fresh machine lowers GLM-4.7-Flash's whole chunk (more than 250 s): one call a series.
# Here, first (ab/U: quantized.py with tiles of 16 only, the A of tiles of 32):
#   mkdir -p ab/U && cp apps/quantized.py /tmp/q.py && git apply -R runs/2026-11-29-tc/tile32.diff && cp apps/quantized.py ab/U/ && cp /tmp/q.py apps/quantized.py
# Step 1: the series of 41, tiles of 16 (~400 s). Step 2: the whole series, tiles of 16, then tiles of 32 (the checkout).
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { python3 -c "from apps import synth; synth.generate('$1', 'release', progress=False)"; }
untile() { cp apps/quantized.py /tmp/quantized.py; cp ab/U/quantized.py apps/quantized.py; }   # tiles of 16 over the checkout's
retile() { cp /tmp/quantized.py apps/quantized.py; }
case ${1:-1} in
  1) synth glm-4.7-flash && untile && OUT=$OUT PRESETS=glm-4.7-flash LIMIT=560 VARIANTS="A:41" bash tools/gpu_session.sh variants; retile ;;
  2) synth glm-4.7-flash && untile && OUT=$OUT PRESETS=glm-4.7-flash LIMIT=420 VARIANTS="C:" bash tools/gpu_session.sh variants; retile
     OUT=$OUT PRESETS=glm-4.7-flash LIMIT=150 VARIANTS="T:" bash tools/gpu_session.sh variants ;;
esac
