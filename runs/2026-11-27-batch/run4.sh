#!/usr/bin/env bash
# A/B of the decode matvecs for batched steps: A = matvecs up to 4 tokens (grid: row groups, slots, tokens) and the GEMMs
# above; B = matvecs up to 32 tokens with the tokens fastest in the grid (one row group's workgroups together: its weights
# from DRAM once; measured with matvec.MAX_ROWS = 32, now 8). Both with the pipelined step (launch / collect). PRESETS
# picks the models. make.sh writes variants/ first.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
V=runs/2026-11-27-batch/variants
mkdir -p /tmp/B && cp apps/kernels/matvec.py apps/kernels/gemm.py /tmp/B/
for v in A B; do
  if [ $v = A ]; then cp $V/matvec_A.py apps/kernels/matvec.py; cp $V/gemm_A.py apps/kernels/gemm.py
  else cp /tmp/B/matvec.py /tmp/B/gemm.py apps/kernels/; fi
  echo "== $v"
  timeout 280 python3 -m tools.gpu_bench --batch ${SIZES:-1,4,8,16,32} --decode 32 --presets ${PRESETS:-youtu-llm-2b,deepseek-v2-lite} \
    --json "$OUT/batch_$v.json" 2>&1 | tee "$OUT/batch_$v.log" | grep -v '^{' | tail -11
done
