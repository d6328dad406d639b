export DEV=CUDA PYTHONUNBUFFERED=1; mkdir -p $OUT
python3 apply_patches.py --upto 14 > /dev/null
echo "-- A attention"; TINYGRAD_UPTO=14 timeout 90 python3 -m tools.bench_mla_attention --prefill 512 --pos 0 --kernels generated --layers 4 --iters 10 2>&1 | tee $OUT/attn_A.txt | tail -12
python3 apply_patches.py > /dev/null
echo "-- B attention"; timeout 90 python3 -m tools.bench_mla_attention --prefill 512 --pos 0 --kernels generated --layers 4 --iters 10 2>&1 | tee $OUT/attn_B.txt | tail -12
PATCH=15 PRESETS=youtu-llm-2b,deepseek-v2-lite LIMIT=200 bash tools/gpu_session.sh abpatch
