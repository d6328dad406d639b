# GPU, for the next lease (~200 s a model): the patch in this folder (a grouped reduction for a few thousand outputs of a
# symbolic length: a prompt chunk's softmax sums over the keys so far, 8192-10240 rows, a thread a row today) against the
# series without it, on the generated path. From the repository root; it puts the patch into the series as the next one
# (its test: `git apply runs/2026-11-29-symgroup/test_0049.diff`), applies the series and runs gpu_session.sh abpatch.
# Carry upstream/tinygrad upstream/.stamp upstream/.cache .cache/vocab.
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
n=$(( $(grep -c '^[0-9]' patches/series) + 1 ))
f=$(printf '%04d' $n)-heuristic-a-grouped-reduction-for-a-few-thousand-outputs-of-a-symbolic-length.patch
cp runs/2026-11-29-symgroup/0049-heuristic-a-grouped-reduction-for-a-few-thousand-outputs-of-a-symbolic-length.patch patches/$f
grep -q "^$f" patches/series || echo "$f" >> patches/series
python3 apply_patches.py > /dev/null
for m in ${PRESETS:-youtu-llm-2b deepseek-v2-lite glm-4.7-flash}; do
  python3 -c "from apps import synth; synth.generate('$m', 'release', progress=False)"
  LIMIT=${LIMIT:-150} PATCH=$n PRESETS=$m OUT=${OUT:-out}/$m bash tools/gpu_session.sh abpatch
done
