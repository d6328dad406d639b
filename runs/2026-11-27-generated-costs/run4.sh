#!/usr/bin/env bash
# One H100 call: a generated Youtu-LLM-2B decode step (bench_block, position 32) with the heuristics, with BEAM=2 on the whole
# series (patch 23: L2 scrubbed between BEAM's timings on CUDA; patch 24: BEAM seeded with the heuristics' pick), then with
# BEAM=2 on the series up to 23.   bash runs/2026-11-27-generated-costs/run4.sh
export PYTHONUNBUFFERED=1 DEV=CUDA OUT=${OUT:-out}
mkdir -p $OUT
python3 -c "from apps import synth; synth.generate('youtu-llm-2b', 'release', progress=False)" && sync
bb() { timeout $1 python3 bench_block.py 30 --rounds 3 --model youtu-llm-2b --kernels generated --only decode --pos 32 2>&1 \
         | grep -v "^upstream" | tee $OUT/$2.txt | tail -1; }
BEAM=0 bb 60 bb_beam0
SECONDS=0; BEAM=2 bb 200 bb_beam2_seeded; echo "($SECONDS s)"
python3 apply_patches.py --upto 23 > /dev/null
SECONDS=0; TINYGRAD_UPTO=23 BEAM=2 bb 150 bb_beam2_l2only; echo "($SECONDS s)"
python3 apply_patches.py > /dev/null
