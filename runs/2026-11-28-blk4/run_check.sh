# GPU: the paths against each other at full size with the checkout (norm-and-heads.diff applied): Youtu-LLM-2B and
# DeepSeek-V2-Lite over 544 tokens (one 512-token chunk), GLM-4.7-Flash over one 128-token chunk (its 544 needs a call alone).
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
for spec in youtu-llm-2b:544:150 deepseek-v2-lite:544:200 glm-4.7-flash:128:200; do
  IFS=: read -r m n t <<< "$spec"
  timeout $t python3 -m tools.path_check --presets $m --tokens $n --skip 0 --pinned > "$OUT/path_check_${m}_$n.txt" 2>&1
  tail -1 "$OUT/path_check_${m}_$n.txt"
done
