#!/usr/bin/env bash
# One H100 call on the series with patch 22: the generated path's greedy check on CUDA, then a generated Youtu-LLM-2B decode
# step (bench_block, position 32) with the heuristics and with BEAM=2.   bash runs/2026-11-27-generated-costs/run3.sh
export PYTHONUNBUFFERED=1 DEV=CUDA OUT=${OUT:-out}
mkdir -p $OUT
python3 -c "from apps import synth; synth.generate('youtu-llm-2b', 'release', progress=False)" && sync
timeout 150 python3 -m tools.gpu_check release --kernels generated 2>&1 | tee $OUT/check_generated.log | tail -4
for b in 0 2; do
  BEAM=$b timeout 330 python3 bench_block.py 30 --rounds 3 --model youtu-llm-2b --kernels generated --only decode --pos 32 2>&1 \
    | grep -v "^upstream" | tee $OUT/bb_youtu_beam$b.txt | tail -2
done
