#!/usr/bin/env bash
# Decode attention on the tensor cores: the kernels alone (A = the CUDA-core kernel of HEAD, the checkout's tensor-core
# kernel B and its variants), the paths against each other at full size, then Youtu-LLM-2B at depth, A against B.
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
V=runs/2026-11-27-mma-decode/variants
timeout 150 python3 -m tools.bench_mla_attention --pos 32,1024,4095,16383,32767 --iters 30 --layers 8 \
  --variants $V/A.py,$V/B2.py,$V/B2s256.py,$V/Bs64.py 2>&1 | tee "$OUT/attn.log" | grep -v "^ *$" | tail -40
timeout 130 python3 -m tools.path_check --presets youtu-llm-2b,glm-4.7-flash --depth 1000 2>&1 | tee "$OUT/paths.log" | tail -4
cp apps/kernels/mla_attention.py /tmp/B.py
for v in A B; do
  src=$V/A.py; [ $v = B ] && src=/tmp/B.py
  cp $src apps/kernels/mla_attention.py
  echo "-- $v"
  timeout 130 python3 -m tools.gpu_bench --depths 4096,16384,32768 --presets youtu-llm-2b --decode 64 --json "$OUT/depths_$v.json" 2>&1 \
    | tee "$OUT/depths_$v.log" | grep -v '^{' | tail -5
done
cp /tmp/B.py apps/kernels/mla_attention.py
