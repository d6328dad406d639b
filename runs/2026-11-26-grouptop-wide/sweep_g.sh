#!/usr/bin/env bash
# GROUPTOP sizes for few outputs (ab/heur_g.py: GT_MAX, GT_INT) against the series, generated decode at pos 32
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p $OUT
cp upstream/tinygrad/codegen/opt/heuristic.py ab/heur_series.py
for m in ${MODELS:-youtu-llm-2b deepseek-v2-lite}; do
  for cfg in ${CFGS:-series 256_0 256_1 series 256_0}; do
    if [ $cfg = series ]; then cp ab/heur_series.py upstream/tinygrad/codegen/opt/heuristic.py; set -- 16 0
    else cp ab/heur_g.py upstream/tinygrad/codegen/opt/heuristic.py; set -- ${cfg//_/ }; fi
    echo "== $m $cfg"
    GT_MAX=$1 GT_INT=$2 timeout ${LIMIT:-150} python3 bench_block.py 30 --rounds 3 --model $m --kernels generated --only decode --pos ${POS:-32} \
      > $OUT/gt_${m}_${cfg}.txt 2>&1
    tail -1 $OUT/gt_${m}_${cfg}.txt
  done
done
cp ab/heur_series.py upstream/tinygrad/codegen/opt/heuristic.py
