#!/usr/bin/env bash
# bench_block decode (generated) with the modules of ab/A (A) against the checkout (B), then B's profile
export PYTHONUNBUFFERED=1 DEV=CUDA
OUT=${OUT:-out}; mkdir -p $OUT ab/B
for f in ab/A/*.py; do cp apps/$(basename $f) ab/B/; done
for v in A B A B; do
  src=ab/B; [ $v = A ] && src=ab/A
  for f in $src/*.py; do cp $f apps/$(basename $f); done
  echo "-- $v"
  timeout 150 python3 bench_block.py 30 --rounds 3 --model ${M:-youtu-llm-2b} --kernels generated --only decode --pos 32 2>&1 | tail -1
done
timeout 200 python3 -m tools.profile --model ${M:-youtu-llm-2b} --kernels generated --pos 32 --repeat 3 --count 3 --top 12 > $OUT/profile_B.txt 2>&1
for f in ab/A/*.py; do cp $f apps/$(basename $f); done
timeout 200 python3 -m tools.profile --model ${M:-youtu-llm-2b} --kernels generated --pos 32 --repeat 3 --count 3 --top 12 > $OUT/profile_A.txt 2>&1
for f in ab/B/*.py; do cp $f apps/$(basename $f); done
head -5 $OUT/profile_A.txt $OUT/profile_B.txt
