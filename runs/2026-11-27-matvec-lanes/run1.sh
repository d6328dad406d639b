#!/usr/bin/env bash
# One H100 call: the portable Q4_0 matvec's opts swept DRAM-bound, then ncu's device time of every kernel of a generated
# Youtu-LLM-2B decode token. bash runs/2026-11-27-matvec-lanes/run1.sh (logs under $OUT)
export PYTHONUNBUFFERED=1 DEV=CUDA OUT=${OUT:-out}
mkdir -p $OUT
timeout 200 python3 runs/2026-11-27-matvec-lanes/mv_sweep.py --variants heur \
  'R:2:0 R:2:0 G:1:4 G:0:8 U:0:4 L:0:4' 'R:2:0 R:2:0 G:1:4 G:0:8 U:0:2 L:0:8' 'R:2:0 R:2:0 G:1:4 G:0:8 U:0:4 L:0:2' \
  'R:1:0 R:2:0 R:1:0 G:0:32 U:0:8 L:0:2' 'R:0:2 R:1:0 R:2:0 R:1:0 G:0:32 U:0:4 L:0:4' 'R:1:0 R:2:0 R:1:0 G:0:16 U:0:4 L:0:8' \
  'R:2:0 R:2:0 G:1:4 G:0:16 U:0:4 L:0:2' 2>&1 | grep -v "^upstream" | tee $OUT/sweep.txt
python3 -c "from apps import synth; synth.generate('youtu-llm-2b','release',progress=False)" && sync
KERNELS=generated MODELS=youtu-llm-2b bash tools/gpu_session.sh ncu 2>&1 | tail -45
