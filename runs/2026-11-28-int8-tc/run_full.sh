# H100: the generated path's full-model numbers on the series of 28 and of 30 (patches 0029 and 0030 change no kernel of it)
cd "$(dirname "$0")/../.."
VARIANTS="s28:28 s30:" PRESETS=${PRESETS:-youtu-llm-2b} LIMIT=200 bash tools/gpu_session.sh variants
