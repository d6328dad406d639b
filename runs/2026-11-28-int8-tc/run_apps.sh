# H100, after make_variants.sh: the generated path with a chunk's Q4_0 / Q8_0 products as int8 block products (B, the
# checkout) against the packed fp32 products (A), then the paths' logits at full size over a 544-token window (its 512-token
# chunk takes the block products on the generated path). PRESETS=youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash for all three.
cd "$(dirname "$0")/../.."
A=runs/2026-11-28-int8-tc/A PRESETS=${PRESETS:-youtu-llm-2b} LIMIT=${LIMIT:-150} bash tools/gpu_session.sh abapps
timeout 170 python3 -m tools.path_check --presets ${PRESETS:-youtu-llm-2b} --tokens 544 --skip 0 2>&1 | tail -8
