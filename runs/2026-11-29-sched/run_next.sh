# GPU, for the next lease: what patches 44-47 (a store's hazard checks without a graph walk, a call takes its compiled
# program without a walk, the ops of a backward slice cached, a kernel's estimates kept short) save in a first and a second
# process, and the profiles the next changes need. Here, first: make .cache/vocab
# (tools/gpu_session.sh's header). Carry upstream/tinygrad upstream/.stamp upstream/.cache .cache/vocab.
# Step 1 (~560 s): GLM-4.7-Flash's generated path, first process on an empty compile cache, the series of 43 (A) then the
#   whole series (B): wall seconds of gpu_bench --decode 32 --prefill 512 (load, capture, compile, timing) and its numbers.
# Step 2 (~400 s): the same for DeepSeek-V2-Lite, then the hand-written path's start (tools.start_time, first and second
#   process, the three models), A then B.
# Step 3 (~300 s): where DeepSeek-V2-Lite's generated 512-token chunk goes now (tools.profile, kernel by kernel), and a
#   batched decode step of 4 on the hand-written path (tools.profile --batch 4).
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { python3 -c "from apps import synth; synth.generate('$1', 'release', progress=False)"; }
first() {   # first() PRESET LIMIT: A = the series of 43, B = all, each a fresh process on its series' empty compile cache
  for v in A:43 B:; do
    name=${v%%:*}; upto=${v#*:}
    python3 apply_patches.py ${upto:+--upto $upto} > /dev/null
    s=$SECONDS
    TINYGRAD_UPTO=$upto timeout $2 python3 -m tools.gpu_bench --kernels generated --presets $1 --decode 32 --prefill 512 \
      --json "$OUT/first_$1_$name.json" > "$OUT/first_$1_$name.log" 2>&1
    echo "$1 $name (patches 1-${upto:-all}): $((SECONDS - s)) s, rc $?"; grep -A2 "^model" "$OUT/first_$1_$name.log" | tail -1
  done
  python3 apply_patches.py > /dev/null
}
case ${1:-1} in
  1) synth glm-4.7-flash && first glm-4.7-flash 285 ;;
  2) synth deepseek-v2-lite && first deepseek-v2-lite 200
     for v in A:43 B:; do
       name=${v%%:*}; upto=${v#*:}
       python3 apply_patches.py ${upto:+--upto $upto} > /dev/null
       TINYGRAD_UPTO=$upto timeout 200 python3 -m tools.start_time --presets youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash --kernels hand \
         --json "$OUT/start_$name.json" 2>&1 | tee "$OUT/start_$name.txt" | tail -5
     done
     python3 apply_patches.py > /dev/null ;;
  3) synth deepseek-v2-lite
     timeout 330 python3 -m tools.profile --model deepseek-v2-lite --kernels generated --target prompt --chunk 512 --pos 0 --top 40 \
       > "$OUT/profile_dsv2_prompt.txt" 2>&1; head -60 "$OUT/profile_dsv2_prompt.txt"
     timeout 200 python3 -m tools.profile --model deepseek-v2-lite --batch 4 --pos 256 --top 12 > "$OUT/profile_dsv2_batch4.txt" 2>&1
     head -40 "$OUT/profile_dsv2_batch4.txt" ;;
esac
