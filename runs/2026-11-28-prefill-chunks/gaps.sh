#!/usr/bin/env bash
# gaps.py against a server of A (the checkout: a prompt's chunks the longest its tokens fill) and B (B.diff: the shortest
# chunk while other streams run), in turn. DEV, PRESET, LONG (words) from the environment. Restores the checkout's files.
set -u
export PYTHONUNBUFFERED=1 DEV=${DEV:-CPU} PYTHONPATH=.
PRESET=${PRESET:-glm-4.7-flash-tiny}; PORT=${PORT:-18431}; LONG=${LONG:-1400}
OUT=${OUT:-out}; mkdir -p "$OUT"
R=runs/2026-11-28-prefill-chunks
for v in ${VARIANTS:-A B A B}; do
  git checkout -q apps/batching.py apps/model.py test/test_batching.py
  [ $v = B ] && git apply $R/B.diff
  python3 apps/llm.py --model $PRESET --serve $PORT --parallel 4 --max-context 4096 > "$OUT/server_$v.log" 2>&1 &
  srv=$!
  python3 $R/gaps.py $PORT $LONG 2>&1 | tee -a "$OUT/gaps_$v.log" | sed "s/^/$v /"
  kill $srv; wait $srv 2>/dev/null
done
git checkout -q apps/batching.py apps/model.py test/test_batching.py
