# GPU, for the next lease (not yet run), in the order of value; each step fits one 600 s call (the machine is warm between
# calls when they follow within 30 s). Step 1: the candidate of norm-and-heads.diff against the checkout on Youtu-LLM-2B and
# DeepSeek-V2-Lite (its variant needs more than the 140 s it had), then GLM-4.7-Flash; the diff must be applied to the
# checkout first and ab/H made (NOTES.md). Step 2: GLM-4.7-Flash's paths over 544 tokens (a 512-token chunk). Step 3: the
# tensor-core tilings of the block products (runs/2026-11-28-blk2/run_probe.sh).
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
case ${1:-1} in
  1) OUT=$OUT PRESETS=youtu-llm-2b,deepseek-v2-lite LIMIT=270 A=ab/H bash tools/gpu_session.sh abapps ;;
  1g) OUT=$OUT PRESETS=glm-4.7-flash LIMIT=290 A=ab/H bash tools/gpu_session.sh abapps ;;
  2) timeout 590 python3 -m tools.path_check --presets glm-4.7-flash --tokens 544 --skip 0 --pinned > "$OUT/path_check_glm.txt" 2>&1
     tail -4 "$OUT/path_check_glm.txt" ;;
  3) OUT=$OUT bash runs/2026-11-28-blk2/run_probe.sh; cat "$OUT/probe.txt" ;;
esac
