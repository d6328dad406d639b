# GPU, for the next lease: where a second process's load goes (tools.start_time: Youtu-LLM-2B's 1.1 GB load in 1.5 s, 0.76
# GB/s; GLM-4.7-Flash's 17 GB in 2.8 s: about 1 s of every load does not grow with the file). Step 1 (~200 s): the three
# models' start with the second process's load by phase (tools.start_time), then Youtu-LLM-2B's first and second process
# under cProfile (runs/2026-11-28-start/prof_start.py), the second's profile kept.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
for m in youtu-llm-2b deepseek-v2-lite glm-4.7-flash; do python3 -c "from apps import synth; synth.generate('$m', 'release', progress=False)"; done
timeout 200 python3 -m tools.start_time --presets youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash --kernels hand --json "$OUT/start.json" \
  2>&1 | tee "$OUT/start.txt" | tail -6
S=$(mktemp -d)
for run in first second; do
  CACHEDB=$S/cache.db PYTHONPATH=. timeout 120 python3 runs/2026-11-28-start/prof_start.py youtu-llm-2b $S/captures 60 > "$OUT/load_$run.txt" 2>&1
  head -1 "$OUT/load_$run.txt"
done
