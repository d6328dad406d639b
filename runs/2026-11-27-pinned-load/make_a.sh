#!/usr/bin/env bash
# Writes variant A back: the loader before (apps/packed.py, readback.py, quantized.py, model.py at 4bfd6c2), which the
# run scripts copy over the checkout for the A runs.
set -eu
cd "$(dirname "$0")"
mkdir -p A
for f in packed readback quantized model; do git show 4bfd6c2:apps/$f.py > A/$f.py; done
