#!/usr/bin/env bash
# Writes variant A back: the decode matvecs before tokens shared a workgroup (apps/kernels/matvec.py at 278ecad), which
# the run scripts copy over the checkout for the A runs.
set -eu
cd "$(dirname "$0")"
mkdir -p A
git show 278ecad:apps/kernels/matvec.py > A/matvec.py
