#!/usr/bin/env bash
# Writes variant A back: the generated path's products before the fp16 form (apps/quantized.py and apps/dispatch.py at
# 99037ff), which run2.sh copies over the checkout for the A runs (with the series' first 28 patches).
set -eu
cd "$(dirname "$0")"
mkdir -p A
for f in quantized dispatch; do git show 99037ff:apps/$f.py > A/$f.py; done
