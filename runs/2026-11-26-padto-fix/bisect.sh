export DEV=CUDA PYTHONUNBUFFERED=1
timeout 150 python3 -m tools.gpu_check release --kernels generated 2>&1 | grep -v Warn | tail -5
for n in 13 10 12 11 9 4; do
  python3 apply_patches.py --upto $n > /dev/null
  echo "-- upto $n"; TINYGRAD_UPTO=$n timeout 90 python3 -m tools.path_check --presets youtu-llm-2b --depth 0 2>&1 | grep "^| youtu"
done
python3 apply_patches.py > /dev/null
