# GPU: the A/B of run_ab.sh (Youtu-LLM-2B, DeepSeek-V2-Lite), then where a generated 512-token chunk of Youtu-LLM-2B goes with the
# checkout's block products, kernel by kernel ($OUT/fill_B_youtu-llm-2b.txt).
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
bash runs/2026-11-28-blk2/run_ab.sh
timeout 200 python3 -m tools.profile --model youtu-llm-2b --kernels generated --target prompt --chunk 512 --pos 0 --repeat 2 --count 3 \
  --top 14 > "$OUT/fill_B_youtu-llm-2b.txt" 2>&1; grep -a "(all)\|step as run" "$OUT/fill_B_youtu-llm-2b.txt"
