#!/usr/bin/env bash
# The GPU-machine runs the open issues still need, in the order of their value, each with its own time limit and log
# under $OUT (the device tool brings $OUT back). Run from the repo root on the GPU machine:
#   bash tools/gpu_session.sh [step ...]      steps: glm check serve bench profile llama side batch load kernels ncu abprefill abkernel
#                                             abfusions fill paths chunkpaths blocks generated abpatch variants abapps
#                                             (default: the first five)
# MODELS (default: youtu-llm-2b deepseek-v2-lite) picks the models of ncu (KERNELS=generated: that path's), abkernel, abfusions (OFF=<fusions A turns off>), abprefill
# (A=<file>: another apps/kernels/gemm.py as variant A; ROUNDS=<n>, default 5: 2% differences need that many), ncu (PROMPT=1:
# a 512-token prompt's chunk instead of a decode token) and fill (a 512-token prompt's chunk at pos 0, head and sampling included,
# kernel by kernel); abkernel needs A=<file>, variant A of
# apps/kernels/matvec.py (MODULE=<name> for another module), e.g. `git show HEAD~1:apps/kernels/matvec.py > ab/A/matvec.py`.
# chunkpaths: [SPECS="preset:tokens ..."] the paths against each other over a prompt's first chunks at full size (path_check --pinned).
# abapps: [A=<dir>] [C=<dir>] [PRESETS=...] [KERNELS=hand] [DEPTHS=4096,16384: long prompts and decode deep, instead] an apps change:
# the modules in A (default ab/A; C: a third variant) against the checkout's.
# abpatch: PATCH=<n> [PRESETS=...] [KERNELS=generated] [ROUNDS=1] the full-model numbers on the series without patch n (A) and with it (B).
# variants: VARIANTS="NAME:UPTO[:ENV=V][:hand] ..." [PRESETS=...] the full-model numbers of each variant in turn: the series' first
# UPTO patches (an empty UPTO: all), with ENV set, generated kernels unless :hand; logs $OUT/NAME.{log,json}.
# profile: [MODELS=<one preset>] [KERNELS=hand|generated] where a decode token goes, kernel by kernel.
# batch: [SIZES=1,4,8,16,32] [PRESETS=...] [LLAMA=1: llama-batched-bench too, after `llama`] aggregate decode of many sequences.
# load: [MODELS=<one preset>] [CLIENTS=...] [FAULTS=n] the server with 32 slots under tools.load, then n requests with faults.
# Carry: upstream/tinygrad upstream/.stamp upstream/.cache .cache/vocab (+ .cache/llama/llama-cpp-src.tar.xz for llama/side,
# made here by `python3 -m tools.llama_bench pack`). A fresh checkout has no .cache/vocab, which synthesis needs and the GPU
# machine cannot download: make it here first (`python3 -c 'from apps.vocab import vocab_file; vocab_file()'`).
set -u
export PYTHONUNBUFFERED=1 DEV=${DEV:-CUDA}
OUT=${OUT:-out}; mkdir -p "$OUT"
# gpu_bench --decode 32 --prefill 512 of each variant NAME:UPTO[:ENV=V][:hand] (see `variants`), the whole series restored after
bench_variants() {
  for spec in "$@"; do
    IFS=: read -r name upto extra kind <<< "$spec"
    python3 apply_patches.py ${upto:+--upto "$upto"} > /dev/null
    echo "-- $name (patches 1-${upto:-all} ${extra} ${kind:-${KERNELS:-generated}})"
    env TINYGRAD_UPTO=$upto $extra timeout ${LIMIT:-280} python3 -m tools.gpu_bench --kernels ${kind:-${KERNELS:-generated}} \
      --presets "${PRESETS:-youtu-llm-2b,deepseek-v2-lite}" --decode 32 --prefill 512 --json "$OUT/$name.json" 2>&1 \
      | tee "$OUT/$name.log" | grep -v '^{' | tail -5
  done
  python3 apply_patches.py > /dev/null
}
steps=${*:-glm check serve bench profile}
for s in $steps; do
  echo "=== $s"
  case $s in
    glm)     timeout 300 python3 -m tools.gpu_bench --presets glm-4.7-flash --decode 48 --prefill 256 --json "$OUT/glm.json" 2>&1 | tee "$OUT/glm.log" | grep -v '^{' | tail -4 ;;
    check)   timeout 300 python3 -m tools.gpu_check 2>&1 | tee "$OUT/check.log" | tail -11 ;;
    serve)   python3 apps/llm.py --model youtu-llm-2b --serve 8080 > "$OUT/serve.log" 2>&1 &
             srv=$!
             timeout 240 python3 -m tools.serve_client --port 8080 --requests 3 --max-tokens 128 2>&1 | tee "$OUT/client.log" | tail -2
             kill -INT $srv; wait $srv ;;
    bench)   for m in youtu-llm-2b deepseek-v2-lite glm-4.7-flash; do
               timeout 300 python3 bench_block.py 50 --rounds 5 --model $m --json > "$OUT/bench_$m.json" 2> "$OUT/bench_$m.log"
               tail -3 "$OUT/bench_$m.log"
             done ;;
    profile) timeout 300 python3 -m tools.profile --model ${MODELS:-deepseek-v2-lite} --kernels ${KERNELS:-hand} 2>&1 | tee "$OUT/profile.log" | tail -20 ;;
    llama)   python3 -m tools.llama_bench build --time-limit 540 2>&1 | tail -3 ;;   # exit 3: stopped, run the step again
    batch)   timeout 590 python3 -m tools.gpu_bench --batch ${SIZES:-1,4,8,16,32} --decode 64 ${LLAMA:+--llama} \
               --presets "${PRESETS:-youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash}" --json "$OUT/batch.json" 2>&1 | tee "$OUT/batch.log" | grep -v '^{' | tail -20 ;;
    load)    python3 apps/llm.py --model ${MODELS:-youtu-llm-2b} --serve 8080 --parallel 32 --max-context 2048 > "$OUT/load_serve.log" 2>&1 &
             srv=$!
             timeout 400 python3 -m tools.load --port 8080 --clients ${CLIENTS:-1,4,8,16,32} --requests 3 --seconds 60 --json "$OUT/load.json" 2>&1 | tee "$OUT/load.log"
             timeout 150 python3 -m tools.load --port 8080 --faults ${FAULTS:-300} --json "$OUT/faults.json" 2>&1 | tail -2 | tee "$OUT/faults.log"
             kill -INT $srv; wait $srv; tail -3 "$OUT/load_serve.log" ;;
    side)    timeout 590 python3 -m tools.gpu_bench --llama --upstream --json "$OUT/side.json" 2>&1 | tee "$OUT/side.log" | grep -v '^{' | tail -8 ;;
    kernels) timeout 400 python3 -m pytest -q -x -p no:cacheprovider test/test_kernels_matvec.py test/test_kernels_attention.py \
               test/test_kernels_router.py test/test_kernels_gemm.py 2>&1 | tee "$OUT/kernels.log" | tail -3 ;;
    abkernel) ms=${MODELS:-youtu-llm-2b deepseek-v2-lite}
             timeout 560 python3 -m tools.ab kernel --a "${A:?abkernel needs A=<variant file>}" --module "${MODULE:-matvec}" \
               --presets "${ms// /,}" --rounds 2 2>&1 | tee "$OUT/ab_kernel.log" ;;
    abfusions) ms=${MODELS:-youtu-llm-2b deepseek-v2-lite}   # tools.ab fusions: A = the named fusions off
             timeout 580 python3 -m tools.ab fusions --off "${OFF:-stack_q}" --presets "${ms// /,}" --rounds 2 2>&1 \
               | tee "$OUT/ab_fusions.log" ;;
    fill)    for m in ${MODELS:-youtu-llm-2b deepseek-v2-lite}; do
               timeout 300 python3 -m tools.profile --model $m --target prompt --chunk 512 --pos 0 --repeat 2 --count 3 --top 8 2>&1 \
                 | tee "$OUT/fill_$m.txt" | tail -40
             done ;;
    abprefill) ms=${MODELS:-youtu-llm-2b deepseek-v2-lite}   # A=<file>: that gemm.py against the checked-out one
             timeout 560 python3 -m tools.ab prefill ${A:+--a "$A"} --presets "${ms// /,}" --prefill 512 --rounds ${ROUNDS:-5} 2>&1 \
               | tee -a "$OUT/ab_prefill.log" ;;
    ncu)     cnt=${PROMPT:+3}; cnt=${cnt:-10}
             for m in ${MODELS:-youtu-llm-2b deepseek-v2-lite}; do   # device time of every kernel of one decode token (PROMPT=1:
               # of a 512-token prompt's chunk)
               timeout 400 ncu --profile-from-start off --clock-control none --csv --log-file "$OUT/ncu_$m.csv" \
                 --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
                 python3 -m tools.profile --model $m --kernels ${KERNELS:-hand} ${PROMPT:+--target prompt --chunk 512 --pos 0} --repeat 1 \
                 --count $cnt --ncu --json > "$OUT/ncu_rows_$m.json" 2> "$OUT/ncu_$m.log"
               python3 -m tools.profile --ncu-csv "$OUT/ncu_$m.csv" --rows "$OUT/ncu_rows_$m.json" --top 14 | tee "$OUT/ncu_$m.txt" | head -40
             done ;;
    paths)   timeout 580 python3 -m tools.path_check --presets "${PRESETS:-glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b}" \
               --depth "${DEPTH:-0,600}" --floor --pinned 2>&1 | tee "$OUT/paths.log" | tail -6 ;;
    chunkpaths) for spec in ${SPECS:-deepseek-v2-lite:544 glm-4.7-flash:128}; do   # preset:tokens, from position 0, the routing pinned
               IFS=: read -r m n <<< "$spec"
               timeout ${LIMIT:-280} python3 -m tools.path_check --presets $m --tokens $n --skip 0 --pinned > "$OUT/path_check_${m}_$n.txt" 2>&1
               tail -1 "$OUT/path_check_${m}_$n.txt"
             done ;;
    blocks)  for m in ${MODELS:-glm-4.7-flash deepseek-v2-lite}; do
               timeout 400 python3 -m tools.path_check --blocks $m 2>&1 | tee "$OUT/blocks_$m.txt" | tail -50
             done ;;
    generated) timeout 580 python3 -m tools.gpu_bench --kernels generated --presets "${PRESETS:-youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash}" \
               --decode 32 --prefill 512 --json "$OUT/generated.json" 2>&1 | tee "$OUT/generated.log" | grep -v '^{' | tail -6 ;;
    abpatch) n=${PATCH:?abpatch needs PATCH=<n>: A runs the first n-1 patches, B the whole series}
             for r in $(seq ${ROUNDS:-1}); do bench_variants "abpatch_A$r:$((n - 1))" "abpatch_B$r:"; done ;;
    variants) bench_variants ${VARIANTS:?variants needs VARIANTS="NAME:UPTO[:ENV=V][:hand] ..."} ;;
    abapps)  # A = the apps modules in ${A:-ab/A} (e.g. `git show HEAD~1:apps/mla.py > ab/A/mla.py`) over apps/, B = the checkout
             mkdir -p ab/B; for f in ${A:-ab/A}/*.py ${C:+$C/*.py}; do cp apps/$(basename $f) ab/B/; done   # B: every module A or C replaces
             for v in B A ${C:+C}; do   # C=<dir>: a third variant, as A
               src=ab/B; [ $v = A ] && src=${A:-ab/A}; [ $v = C ] && src=$C
               for f in $src/*.py; do cp $f apps/$(basename $f); done
               echo "-- $v"
               timeout ${LIMIT:-250} python3 -m tools.gpu_bench --kernels ${KERNELS:-generated} --presets "${PRESETS:-youtu-llm-2b,deepseek-v2-lite}" \
                 --decode 32 --prefill 512 ${DEPTHS:+--depths $DEPTHS} --json "$OUT/abapps_$v.json" 2>&1 | tee "$OUT/abapps_$v.log" | grep -v '^{' | tail -8
             done
             for f in ab/B/*.py; do cp $f apps/$(basename $f); done ;;
    *) echo "unknown step $s" ;;
  esac
done
