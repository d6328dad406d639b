#!/usr/bin/env bash
# One GPU call: seconds to open the CUDA device in a fresh process (import tinygrad, Device["CUDA"]), the series without
# patch 35 (A, /tmp/A) against the whole series (B), interleaved, 6 rounds; then a second process of Youtu-LLM-2B (B).
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 DEV=CUDA OUT=${OUT:-out}
mkdir -p $OUT
python3 apply_patches.py > /dev/null
rm -rf /tmp/A && mkdir /tmp/A && tar --exclude=./.cache -cf - . | (cd /tmp/A && tar xf -) && ln -s "$PWD/.cache" /tmp/A/.cache
(cd /tmp/A && sed -i '/^0035-/d' patches/series && rm patches/0035-* && python3 apply_patches.py > /dev/null)
open_s='import time; t = time.perf_counter(); import apps; from tinygrad import Device; Device["CUDA"]; print(f"{time.perf_counter() - t:.3f}")'
for round in 1 2 3 4 5 6; do
  a=$(cd /tmp/A && PYTHONPATH=. python3 -c "$open_s"); b=$(PYTHONPATH=. python3 -c "$open_s")
  echo "round $round: A $a s, B $b s" | tee -a $OUT/open.txt
done
timeout 120 python3 -m tools.start_time --presets youtu-llm-2b 2>&1 | grep -v "^{" | tee -a $OUT/open.txt
