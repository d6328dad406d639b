#!/usr/bin/env bash
# the matvec heuristic's variants (ab/heur_x.py, MVX_G / MVX_T / MVX_WG) on the generated decode step
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p $OUT
cp ab/heur_x.py upstream/tinygrad/codegen/opt/heuristic.py
for m in ${MODELS:-youtu-llm-2b}; do
  for cfg in ${CFGS:-32_0_128 64_0_128 32_65536_128 64_32768_128 64_65536_128 64_131072_128}; do
    set -- ${cfg//_/ }
    echo "== $m G=$1 T=$2 WG=$3"
    MVX_G=$1 MVX_T=$2 MVX_WG=$3 timeout ${LIMIT:-150} python3 bench_block.py 30 --rounds 3 --model $m --kernels generated --only decode --pos ${POS:-32} \
      > $OUT/sw_${m}_$1_$2_$3.txt 2>&1
    grep -iE "decode|tok/s" $OUT/sw_${m}_$1_$2_$3.txt | tail -3
  done
done
