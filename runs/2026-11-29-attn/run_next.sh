# GPU, for the next lease: the tensor-core prefill attention in workgroups of two m16 tiles on the same staged keys (B, the
# checkout: MMA_GROUP = 2 from two tiles per SM on) against a workgroup a tile (A: ab/attn/mla_attention.py). Here, first:
#   mkdir -p ab/attn && git show e4693f6:apps/kernels/mla_attention.py > ab/attn/mla_attention.py
# Step 1 (~200 s): Youtu-LLM-2B's hand-written path, a 16384-token prompt and decode after it, B then A; then the attention
# alone (both forms of the kernel and the CUDA-core one as the reference, DeepSeek-V2-Lite's and GLM-4.7-Flash's shapes) for
# a 512-token chunk at positions 0, 4096 and 15872 (done: NOTES.md).
# Step 2 (~400 s): the same A / B on DeepSeek-V2-Lite's hand-written path, prompts of 4096 and 16384 tokens; then the paths
# against each other at full size over a 544-token window (path_check --pinned: the hand-written side now in groups).
# Step 3 (a call each; .cache/llama/llama-cpp-src.tar.xz carried, made by `python3 -m tools.llama_bench pack`):
#   `bash tools/gpu_session.sh llama` (the build; again where it says stopped), then the long-context table with llama.cpp side
#   by side: `3a` Youtu-LLM-2B and DeepSeek-V2-Lite, `3b` GLM-4.7-Flash (gpu_bench --depths 4096,16384 --llama).
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { python3 -c "from apps import synth; synth.generate('$1', 'release', progress=False)"; }
case ${1:-1} in
  1) synth youtu-llm-2b
     cp apps/kernels/mla_attention.py /tmp/mla_attention_B.py
     for v in B A; do
       [ $v = A ] && cp ab/attn/mla_attention.py apps/kernels/mla_attention.py
       echo "-- $v"
       timeout 75 python3 -m tools.gpu_bench --kernels hand --presets youtu-llm-2b --decode 32 --prefill 512 --depths ${DEPTHS:-16384} \
         --json "$OUT/depth_$v.json" 2>&1 | tee "$OUT/depth_$v.log" | grep -v '^{' | tail -4
     done
     cp /tmp/mla_attention_B.py apps/kernels/mla_attention.py
     timeout 100 python3 -m tools.bench_mla_attention --prefill 512 --pos 15872,4096,0 --layers 4 --iters 10 --variants ab/attn/mla_attention.py \
       2>&1 | tee "$OUT/attention_groups.txt" ;;
  2) synth deepseek-v2-lite
     cp apps/kernels/mla_attention.py /tmp/mla_attention_B.py
     for v in B A; do
       [ $v = A ] && cp ab/attn/mla_attention.py apps/kernels/mla_attention.py
       echo "-- $v"
       timeout 120 python3 -m tools.gpu_bench --kernels hand --presets deepseek-v2-lite --decode 32 --prefill 512 --depths 4096,16384 \
         --json "$OUT/depth_dsv2_$v.json" 2>&1 | tee "$OUT/depth_dsv2_$v.log" | grep -v '^{' | tail -4
     done
     cp /tmp/mla_attention_B.py apps/kernels/mla_attention.py
     OUT=$OUT LIMIT=200 SPECS="deepseek-v2-lite:544" bash tools/gpu_session.sh chunkpaths ;;
  3a) synth youtu-llm-2b && synth deepseek-v2-lite
      timeout 590 python3 -m tools.gpu_bench --kernels hand --presets youtu-llm-2b,deepseek-v2-lite --depths 4096,16384 --llama \
        --json "$OUT/depths_llama_a.json" 2>&1 | tee "$OUT/depths_llama_a.log" | grep -v '^{' | tail -8 ;;
  3b) synth glm-4.7-flash
      timeout 590 python3 -m tools.gpu_bench --kernels hand --presets glm-4.7-flash --depths 4096,16384 --llama \
        --json "$OUT/depths_llama_b.json" 2>&1 | tee "$OUT/depths_llama_b.log" | grep -v '^{' | tail -8 ;;
esac
