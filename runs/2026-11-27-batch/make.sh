#!/usr/bin/env bash
# Writes back what run4.sh and run7.sh read (not kept in git: copies of files of the commit before batched decode, 5dddd4f):
# variants/matvec_A.py, variants/gemm_A.py (run4's A) and head_apps/ (run7's and run8's A). Run from the repo root, before
# the device call (the files travel with the working tree).
set -eu
d=runs/2026-11-27-batch
mkdir -p $d/variants $d/head_apps
git show 5dddd4f:apps/kernels/matvec.py > $d/variants/matvec_A.py
git show 5dddd4f:apps/kernels/gemm.py > $d/variants/gemm_A.py
git archive 5dddd4f apps | tar -x --strip-components=1 -C $d/head_apps
