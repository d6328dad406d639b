#!/usr/bin/env bash
# Writes the timed mla_attention.py files back: A.py (2a9ee20's, the CUDA-core decode kernel), B.py and C.py (the tensor-core
# decode kernel, first and second form: B.diff, C.diff against A), and the one-line variants the runs also timed:
# B2 / C2 (min_blocks=2 always), B2s256 (B2 with SPLITS = 256), Bs64 (B with SPLITS = 64).
set -eu
cd "$(dirname "$0")"
git show 2a9ee20:apps/kernels/mla_attention.py > A.py
for v in B C; do cp A.py $v.py; patch -s $v.py $v.diff; done
mb='  return SourceKernel(name, params, body, (SPLITS, rows \* tiles, 1), (32, nw, 1), _ROPE_LANE'
sed "s/^\($mb\))$/\1, min_blocks=2)/" B.py > B2.py
sed "s/^\($mb\), min_blocks=2 if rows \* tiles > 1 else 1)$/\1, min_blocks=2)/" C.py > C2.py
sed 's/^SPLITS = 128 /SPLITS = 256 /' B2.py > B2s256.py
sed 's/^SPLITS = 128 /SPLITS = 64  /' B.py > Bs64.py
