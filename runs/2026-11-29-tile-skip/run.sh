# GPU (H200, one call): A = apps/quantized.py at 7044572 (ab/A, `git show 7044572:apps/quantized.py`), B = with rejected-tile-skip.diff applied.
export DEV=CUDA PYTHONUNBUFFERED=1
python3 -c "from apps import synth; synth.generate('deepseek-v2-lite', 'release', progress=False)"
LIMIT=150 A=ab/A PRESETS=deepseek-v2-lite KERNELS=generated bash tools/gpu_session.sh abapps
