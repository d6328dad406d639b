# GPU, for the next lease: a long prefill chunk's tensor-op attention over keys and values expanded per head from the latent
# rows (apps/mla.py expanded_attention; B, the checkout) against the absorbed form (A: the commit before b2cd05b), on the generated
# path (the hand-written path's prefill attention is unchanged; decode unchanged); then the same expanded attention on the
# hand-written path's long prompts in place of its absorbed tensor-core kernel (C: hand-expanded.diff). Here, first:
#   mkdir -p ab/X ab/Y && for f in mla model; do git show b2cd05b~1:apps/$f.py > ab/X/$f.py; done
#   cp apps/mla.py /tmp/mla.py && git apply runs/2026-11-29-expand/hand-expanded.diff && cp apps/mla.py ab/Y/ && cp /tmp/mla.py apps/mla.py
# Step 1: Youtu-LLM-2B and DeepSeek-V2-Lite, B then A (~400 s). Step 2: GLM-4.7-Flash, B then A (B pays the compiles).
# Step 3: the paths against each other at full size over a 512-token chunk and one of 32 (path_check --pinned).
# Step 4: the hand-written path's prompts of 4096 and 16384 tokens and decode after them, the checkout against C (Youtu-LLM-2B,
# DeepSeek-V2-Lite). Step 5: the same for GLM-4.7-Flash. Step 6: the attention alone, both forms kernel by kernel, a chunk of
# 512 at positions 0, 4096 and 15872 (tools.bench_mla_attention; where the expanded form's expansions start to cost).
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { python3 -c "from apps import synth; synth.generate('$1', 'release', progress=False)"; }
case ${1:-1} in
  1) synth youtu-llm-2b && synth deepseek-v2-lite && OUT=$OUT PRESETS=youtu-llm-2b,deepseek-v2-lite LIMIT=250 A=ab/X bash tools/gpu_session.sh abapps ;;
  2) synth glm-4.7-flash && OUT=$OUT PRESETS=glm-4.7-flash LIMIT=290 A=ab/X bash tools/gpu_session.sh abapps ;;
  3) synth deepseek-v2-lite && synth glm-4.7-flash && OUT=$OUT LIMIT=290 SPECS="deepseek-v2-lite:544 glm-4.7-flash:544" \
       bash tools/gpu_session.sh chunkpaths ;;
  4) synth youtu-llm-2b && synth deepseek-v2-lite && OUT=$OUT PRESETS=youtu-llm-2b,deepseek-v2-lite KERNELS=hand DEPTHS=4096,16384 LIMIT=280 \
       A=ab/Y bash tools/gpu_session.sh abapps ;;
  5) synth glm-4.7-flash && OUT=$OUT PRESETS=glm-4.7-flash KERNELS=hand DEPTHS=4096,16384 LIMIT=290 A=ab/Y bash tools/gpu_session.sh abapps ;;
  6) timeout 500 python3 -m tools.bench_mla_attention --prefill 512 --pos 0,4096,15872 --kernels generated --layers 4 --iters 10 \
       2>&1 | tee "$OUT/attention_forms.txt" | grep -v "us/block" ;;
esac
