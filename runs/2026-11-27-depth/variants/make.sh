#!/usr/bin/env bash
# The mla_attention.py variants timed in this folder's calls, as diffs against the decode kernel landed in dd97f4f:
#   bash runs/2026-11-27-depth/variants/make.sh     (from the repo root) writes runs/2026-11-27-depth/variants/<name>.py
set -eu
cd "$(dirname "$0")"
for d in *.diff; do
  git show dd97f4f:apps/kernels/mla_attention.py > "${d%.diff}.py"
  [ -s "$d" ] && patch -s "${d%.diff}.py" "$d"
done
