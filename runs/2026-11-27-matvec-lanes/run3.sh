#!/usr/bin/env bash
# One H100 call: the full models on the series of 19, 20 and 21 patches (generated kernels; 21 there the rejected
# rejected-shared-row-upcast.patch). PRESETS picks them.
export PYTHONUNBUFFERED=1 DEV=CUDA OUT=${OUT:-out}
python3 -c "from apps import synth; [synth.generate(p,'release',progress=False) for p in '${PRESETS:-youtu-llm-2b,deepseek-v2-lite}'.split(',')]" && sync
VARIANTS="A19:19 B20:20 C21:" LIMIT=${LIMIT:-190} bash tools/gpu_session.sh variants
