# GPU: patches 53-54 (a warp's lanes along the last local dim). From the repository root, carry upstream/tinygrad upstream/.stamp
# upstream/.cache .cache/vocab.  bash runs/2026-11-29-lanes/run.sh 1   (synthesis, the probe A / B, abpatch Youtu + DSV2)
#                                 bash runs/2026-11-29-lanes/run.sh 2   (abpatch GLM-4.7-Flash)
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1 PYTHONPATH=.
OUT=${OUT:-out}; mkdir -p "$OUT"
case $1 in
  1) for m in youtu-llm-2b deepseek-v2-lite glm-4.7-flash; do python3 -c "from apps import synth; synth.generate('$m', 'release', progress=False)"; done
     python3 apply_patches.py --upto 52 > /dev/null
     TINYGRAD_UPTO=52 timeout 60 python3 runs/2026-11-29-lanes/probe.py heur 2>&1 | sed 's/^heur /A    /' | tee "$OUT/probe.txt"
     python3 apply_patches.py > /dev/null
     timeout 150 python3 runs/2026-11-29-lanes/probe.py heur "U3:0,U2:0,U1:0,L0:32" "U3:0,U2:0,U1:0,L0:64" "U3:0,U1:0,L0:32,L1:4" 2>&1 | tee -a "$OUT/probe.txt"
     OUT=$OUT PATCH=53 PRESETS=youtu-llm-2b,deepseek-v2-lite LIMIT=200 bash tools/gpu_session.sh abpatch ;;
  2) OUT=$OUT PATCH=53 PRESETS=glm-4.7-flash LIMIT=280 bash tools/gpu_session.sh abpatch ;;
esac
# 3: patch 54 (a grouped reduction's outputs side by side) on DeepSeek-V2-Lite and GLM-4.7-Flash; 4: BEAM=2 on the routed
# experts' tile kernel alone (DeepSeek-V2-Lite's gate_up), against the heuristics' opts
case $1 in
  3) for m in deepseek-v2-lite glm-4.7-flash; do python3 -c "from apps import synth; synth.generate('$m', 'release', progress=False)"; done
     OUT=$OUT PATCH=54 PRESETS=deepseek-v2-lite,glm-4.7-flash LIMIT=280 bash tools/gpu_session.sh abpatch ;;
  4) PERM=0 timeout 100 python3 runs/2026-11-29-lanes/tile_probe.py "dsv2 gate_up" 2>&1 | tee "$OUT/tile_heur.txt"
     PERM=0 BEAM=2 CACHELEVEL=0 timeout 400 python3 runs/2026-11-29-lanes/tile_probe.py "dsv2 gate_up" 2>&1 | tee "$OUT/tile_beam2.txt" ;;
esac
# 5: the tile kernels on the series of 54 (A) and of 56 (B, patches 55-56: BEAM's pick as a heuristic, the merged warp fixed),
# B's outputs against A's; then DeepSeek-V2-Lite's full model, the series of 54 against 56
case $1 in
  5) python3 -c "from apps import synth; synth.generate('deepseek-v2-lite', 'release', progress=False)"
     python3 apply_patches.py --upto 54 > /dev/null
     TINYGRAD_UPTO=54 PERM=0 SAVE=/tmp/A CACHELEVEL=0 timeout 120 python3 runs/2026-11-29-lanes/tile_probe.py 2>&1 | tee "$OUT/tiles_A.txt"
     python3 apply_patches.py > /dev/null
     PERM=0 AGAINST=/tmp/A CACHELEVEL=0 timeout 120 python3 runs/2026-11-29-lanes/tile_probe.py 2>&1 | tee "$OUT/tiles_B.txt"
     OUT=$OUT VARIANTS="A54:54 B56:" PRESETS=deepseek-v2-lite LIMIT=150 bash tools/gpu_session.sh variants ;;
esac
