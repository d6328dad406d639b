# GPU, one lease (~400 s; the A of its first run lacked TINYGRAD_UPTO, so call7 ran A B A again by hand): patches 49-50 (a library search stats only matching files; CUDA's compiler libraries at the first
# compile) against the series of 48 on a process's start, hand-written path: tools.start_time for the three models, A B A B,
# then who stats files in a second process of Youtu-LLM-2B under each. From the repository root; carry upstream/tinygrad
# upstream/.stamp upstream/.cache .cache/vocab.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
for m in youtu-llm-2b deepseek-v2-lite glm-4.7-flash; do python3 -c "from apps import synth; synth.generate('$m', 'release', progress=False)"; done
for v in A1 B1 A2 B2; do
  case $v in A*) python3 apply_patches.py --upto 48 > /dev/null; export TINYGRAD_UPTO=48 ;; B*) python3 apply_patches.py > /dev/null; unset TINYGRAD_UPTO ;; esac
  echo "-- $v"
  timeout 150 python3 -m tools.start_time --presets ${PRESETS:-youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash} --kernels hand \
    --json "$OUT/start_$v.json" 2>&1 | tee "$OUT/start_$v.txt" | tail -6
done
for v in A B; do
  case $v in A) python3 apply_patches.py --upto 48 > /dev/null; export TINYGRAD_UPTO=48 ;; B) python3 apply_patches.py > /dev/null; unset TINYGRAD_UPTO ;; esac
  S=$(mktemp -d)
  for run in first second; do
    CACHEDB=$S/cache.db PYTHONPATH=. timeout 60 python3 runs/2026-11-29-start-libs/isfile_callers.py youtu-llm-2b $S/captures \
      > "$OUT/isfile_${v}_$run.txt" 2>&1
  done
  echo "-- $v"; cat "$OUT/isfile_${v}_second.txt"
done
python3 apply_patches.py > /dev/null
