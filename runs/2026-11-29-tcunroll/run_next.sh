# GPU: patches/0049 (a tensor-core kernel unrolls a short reduce outside the tensor core's: the block products' three int8
# parts) on the generated path, and the generated path beside llama.cpp in one run. Carry upstream/tinygrad upstream/.stamp
# upstream/.cache .cache/vocab .cache/llama/llama-cpp-src.tar.xz.
# (Patch 49 was rejected in step 2 and left the series; its file is rejected/. Step 3 ran as the series of 48 beside llama.cpp.)
# Step 1 (~500 s): the three release-mix files and llama.cpp's build side by side, then the paths against each other at full
#   size over DeepSeek-V2-Lite's first 544 tokens (path_check --pinned: the generated side with patch 49's kernels, the
#   hand-written side with the attention in tile groups).
# Step 2 (~450 s): series 48 (A) against 49 (B), Youtu-LLM-2B and DeepSeek-V2-Lite, gpu_bench --kernels generated.
# Step 3 (~550 s): GLM-4.7-Flash on series 48 (A), then B: the three models with llama-bench beside them (--llama).
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { python3 -c "from apps import synth; synth.generate('$1', 'release', progress=False)"; }
case ${1:-1} in
  1) (python3 -m tools.llama_bench build --time-limit 480 > "$OUT/llama_build.txt" 2>&1; echo "build exit $?" >> "$OUT/llama_build.txt") &
     t0=$(date +%s)
     for m in deepseek-v2-lite youtu-llm-2b glm-4.7-flash; do synth $m; echo "synth $m $(( $(date +%s) - t0 )) s"; done
     OUT=$OUT LIMIT=240 SPECS="deepseek-v2-lite:544" bash tools/gpu_session.sh chunkpaths
     wait; tail -n 2 "$OUT/llama_build.txt" ;;
  2) LIMIT=250 PATCH=49 PRESETS=youtu-llm-2b,deepseek-v2-lite bash tools/gpu_session.sh abpatch ;;
  3) python3 apply_patches.py --upto 48 > /dev/null
     TINYGRAD_UPTO=48 timeout 200 python3 -m tools.gpu_bench --kernels generated --presets glm-4.7-flash --decode 32 --prefill 512 \
       --json "$OUT/glm_A.json" 2>&1 | tee "$OUT/glm_A.log" | grep -v '^{' | tail -3
     python3 apply_patches.py > /dev/null
     timeout 380 python3 -m tools.gpu_bench --kernels generated --presets youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash --decode 32 \
       --prefill 512 --llama --json "$OUT/side_B.json" 2>&1 | tee "$OUT/side_B.log" | grep -v '^{' | tail -8 ;;
esac
