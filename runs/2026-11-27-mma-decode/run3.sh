#!/usr/bin/env bash
# Nsight Compute on one decode attention (attend kernel) at 4095 and 16383: A (HEAD's CUDA-core kernel) against C (the checkout).
set -u
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p "$OUT"
V=runs/2026-11-27-mma-decode
for pos in 4095 16383; do
  for v in A C; do
    mod=$V/variants/A.py; [ $v = C ] && mod=""
    timeout 100 ncu --clock-control none --kernel-name regex:mla_attend --launch-skip 2 --launch-count 1 --set full \
      python3 $V/one_step.py $mod $pos > "$OUT/ncu_${v}_$pos.txt" 2>&1
    echo "== $v $pos"; grep -E "^    (Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Compute \(SM\) Throughput|L2 Hit Rate|Issued Ipc Active|Warp Cycles Per Issued)" "$OUT/ncu_${v}_$pos.txt"
  done
done
