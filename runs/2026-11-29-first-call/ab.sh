# CPU (keep it otherwise idle): a loaded model's first prompt with its steps on disk, the series without its last patch (A)
# against the whole series (B), each with its own capture directory (writing one removes those of other code), three tiny presets, A B interleaved ROUNDS times after one run of each that makes its steps.
#   bash runs/2026-11-29-first-call/ab.sh > ab.txt
cd "$(dirname "$0")/../.."
n=$(grep -c '^[0-9]' patches/series)
for r in 0 $(seq ${ROUNDS:-3}); do
  for v in A B; do
    if [ $v = A ]; then ./.venv/bin/python apply_patches.py --upto $((n - 1)) > /dev/null; U=$((n - 1)); else ./.venv/bin/python apply_patches.py > /dev/null; U=; fi
    for m in ${PRESETS:-youtu-llm-2b-tiny deepseek-v2-lite-tiny glm-4.7-flash-tiny}; do
      echo "round $r $v $(CAPTURES=/tmp/first-call-captures-$v TINYGRAD_UPTO=$U DEV=CPU PYTHONPATH=. ./.venv/bin/python runs/2026-11-29-first-call/parts.py $m 2>&1 | tail -1)"
    done
  done
done
./.venv/bin/python apply_patches.py > /dev/null
