#!/usr/bin/env bash
# One call: the full models on the series of 19 and 20 patches and 20 + the lanes-split rule as 21 then (rejected-lanes-split-words.patch).
export PYTHONUNBUFFERED=1 DEV=CUDA OUT=${OUT:-out}
python3 -c "from apps import synth; [synth.generate(p,'release',progress=False) for p in ('youtu-llm-2b','deepseek-v2-lite')]" && sync
VARIANTS="A19:19 B20:20 C21:" LIMIT=190 bash tools/gpu_session.sh variants
