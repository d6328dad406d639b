#!/usr/bin/env bash
# One H100 call: the generated path's greedy check on CUDA (series with patch 21), the in-graph cost of every generated
# kernel family of a GLM-4.7-Flash decode token, and where a generated 512-token prefill chunk goes (Youtu-LLM-2B).
#   bash runs/2026-11-27-generated-costs/run1.sh   (logs under $OUT)
export PYTHONUNBUFFERED=1 DEV=CUDA OUT=${OUT:-out}
mkdir -p $OUT
python3 -c "from apps import synth; [synth.generate(p, 'release', progress=False) for p in ('glm-4.7-flash', 'youtu-llm-2b')]" && sync
timeout 150 python3 -m tools.gpu_check release --kernels generated 2>&1 | tee $OUT/check_generated.log | tail -5
timeout 330 python3 -m tools.kernel_costs --model glm-4.7-flash --kernels generated --count 20 --rounds 2 --json $OUT/costs_glm.json 2>&1 \
  | grep -v "^upstream" | tee $OUT/costs_glm.txt
timeout 100 python3 -m tools.profile --model youtu-llm-2b --kernels generated --target prompt --chunk 512 --pos 0 --repeat 2 --count 3 --top 6 2>&1 \
  | tee $OUT/fill_gen_youtu.txt | head -70
