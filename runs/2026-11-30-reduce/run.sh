# GPU steps of 2026-11-30 (evening), from the repository root; carry upstream/tinygrad upstream/.stamp upstream/.cache .cache/vocab.
#   1: Youtu-LLM-2B's decode down product (Q4_0 2048 x 6144 + residual) under Nsight Compute (--set full): the generated
#      kernel, the same with its block scale out of the block's sum (SCALE_SPLIT=1, EXPERIMENT), and the hand-written matvec;
#      then SCALE_SPLIT 0 / 1 on three products in a graph (mv_probe) and on the generated decode and prefill 512
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1 PYTHONPATH=.
OUT=${OUT:-out}; mkdir -p "$OUT"
synth() { for m in "$@"; do python3 -c "from apps import synth; synth.generate('$m', 'release', progress=False)"; done; }
case $1 in
  1) python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     for v in generated:0 generated:1 hand:0; do
       SCALE_SPLIT=${v#*:} timeout 100 ncu --profile-from-start off --set full python3 runs/2026-11-30-reduce/ncu_product.py 2048 6144 ${v%:*} \
         > "$OUT/ncu_down_${v/:/_}.txt" 2>&1
       grep -E "^  [a-z_0-9]+\(|Duration|Registers Per|Achieved Occupancy|DRAM Throughput|Memory Throughput|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A|Theoretical Occ|Block Limit Reg|Grid Size|Block Size" "$OUT/ncu_down_${v/:/_}.txt" | head -16
     done
     for ss in 0 1; do echo "-- SCALE_SPLIT=$ss"; SCALE_SPLIT=$ss timeout 100 python3 runs/2026-11-30-fuse/mv_probe.py 2048:6144:r 12288:2048 2048:2048:r -- heur | cut -c1-90; done
     synth youtu-llm-2b deepseek-v2-lite
     for ss in 0 1; do
       echo "-- SCALE_SPLIT=$ss"
       CACHEDB=$(mktemp -d)/cache.db SCALE_SPLIT=$ss timeout 150 python3 -m tools.gpu_bench --kernels generated --presets youtu-llm-2b,deepseek-v2-lite \
         --decode 32 --prefill 512 --json "$OUT/ss_$ss.json" 2>&1 | grep -v '^{' | tail -3
     done ;;
esac
# 2: EXPERIMENT experiments/lanes-on-words.diff (the carried tree has it; A reverts it on the device's copy): the matvec rule puts
#    a warp's lanes side by side on a packed block's words. Youtu-LLM-2B's five decode products alone in a graph (mv_probe) and
#    the generated decode and prefill 512 of Youtu-LLM-2B and DeepSeek-V2-Lite, A then B, fresh kernel caches; B's greedy tokens
#    against the references
lanes() { (cd upstream && patch -s $1 -p1 < ../runs/2026-11-30-reduce/experiments/lanes-on-words.diff) || exit 1; }
case $1 in
  2) python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     synth youtu-llm-2b deepseek-v2-lite
     lanes -R
     for v in A B; do
       [ $v = B ] && lanes ""
       echo "-- $v"
       CACHEDB=$(mktemp -d)/cache.db timeout 120 python3 runs/2026-11-30-fuse/mv_probe.py 2048:6144:r 12288:2048 3072:1536 2048:2048:r 2112:2048 -- heur | cut -c1-90
       CACHEDB=$(mktemp -d)/cache.db timeout 150 python3 -m tools.gpu_bench --kernels generated --presets youtu-llm-2b,deepseek-v2-lite \
         --decode 32 --prefill 512 --json "$OUT/lanes_$v.json" 2>&1 | grep -v '^{' | tail -2
     done
     CACHEDB=$(mktemp -d)/cache.db timeout 120 python3 -m tools.gpu_check release --kernels generated 2>&1 | tail -4 ;;
esac
# 3: the products of step 2 again with their weights streaming from DRAM (step 2's probe read a few MB products from L2): the
#    heuristics without (A) and with (B) the lanes-on-words experiment, and A's opts varied. As run (the journal's numbers):
#    runs/2026-11-30-reduce/mv_probe.py of 54d4c21 (runs/2026-11-30-fuse/mv_probe.py with its copies past 150 MB); the same
#    measurement since, in interleaved rounds: tools.bench_quantized --opts
case $1 in
  3) lanes -R
     P="-m tools.bench_quantized --kernels generated --types Q4_0 --dtype float --shapes 2048:6144:r,12288:2048,2048:2048:r --rounds 3"
     H="R1:0,R2:0,R1:0"
     echo "-- A"; timeout 250 python3 $P --opts heur "$H,G0:32,U0:4,L0:2" "$H,G0:32,L0:4" "$H,G0:32,U0:2,L0:2" "$H,G0:16,U0:2,L0:4" | tail -17
     lanes ""
     echo "-- B"; timeout 100 python3 $P --opts heur | tail -5 ;;
esac
# Since e4d410e the split GEMM is in the tree (experiments/split-k-landed.diff: split-k.diff and the sum made contiguous):
# steps 4-6 revert it for A and apply it again for B
# (the diff no longer reverses onto the tree: A turns gemm.split_k off, B is the tree as it is)
landed() { if [ "$1" = -R ]; then sed -i 's/^  if s.experts or s.batched or s.T > 32: return s$/  if True: return s  # A: no split/' apps/kernels/gemm.py
           grep -q "# A: no split" apps/kernels/gemm.py || exit 1
           else sed -i 's/^  if True: return s  # A: no split$/  if s.experts or s.batched or s.T > 32: return s/' apps/kernels/gemm.py; fi; }
# 4: EXPERIMENT experiments/split-k.diff (applied on the device's copy for B): the tensor-core GEMM splits K over workgroups
#    for products of up to 32 tokens (a batched decode step's), the slices' sums added by a tensor op after it. Youtu-LLM-2B's
#    batched decode at 16 and 32 sequences, A then B (fresh kernel caches)
case $1 in
  4) synth youtu-llm-2b
     landed -R
     for v in A B; do
       [ $v = B ] && landed ""
       echo "-- $v"
       CACHEDB=$(mktemp -d)/cache.db timeout ${LIMIT:-80} python3 -m tools.gpu_bench --presets youtu-llm-2b --batch 16,32 --decode 32 \
         --json "$OUT/split_$v.json" 2>&1 | grep -v '^{' | tail -4
     done ;;
esac
# 5: step 4 on DeepSeek-V2-Lite (its shared expert's and attention's products split; the routed experts' are not)
# 16: step 4 on GLM-4.7-Flash (as 5)
# 6: Youtu-LLM-2B at 2, 4 and 8 sequences: A, then C = the split GEMM for every product of 2 tokens or more (split-k.diff and
#    matvec.MAX_ROWS 1: the decode matvecs keep one token)
case $1 in
  5|6|16) case $1 in 5) M=deepseek-v2-lite; SIZES=16,32 ;; 16) M=glm-4.7-flash; SIZES=16,32 ;; *) M=youtu-llm-2b; SIZES=2,4,8 ;; esac
     synth $M
     landed -R
     for v in A B; do
       if [ $v = B ]; then
         landed ""
         [ $1 = 6 ] && { sed -i 's/^MAX_ROWS = 8 /MAX_ROWS = 1 /' apps/kernels/matvec.py; grep -q "^MAX_ROWS = 1 " apps/kernels/matvec.py || exit 1; }
       fi
       echo "-- $v"
       CACHEDB=$(mktemp -d)/cache.db timeout ${LIMIT:-150} python3 -m tools.gpu_bench --presets $M --batch $SIZES --decode 32 \
         --json "$OUT/split$1_$v.json" 2>&1 | grep -v '^{' | tail -5
     done ;;
esac
# 7: EXPERIMENT experiments/x-lanes.diff: the generated decode products read x lane-major (float4 q of block b at (q nb + b) 4),
#    so the lanes of a warp, a block apart, read neighbouring float4s (the Nsight Compute entry: 786,432 excess sectors of x) and
#    keep their 16-byte weight loads. Youtu-LLM-2B's five products alone, weights past the L2, X_LANES 0 then 2 (2: x handed
#    to the product lane-major, no copy kernel in the time), each under the heuristics and three other opts in 3 rounds
case $1 in
  7) patch -s -p1 < runs/2026-11-30-reduce/experiments/x-lanes.diff || exit 1
     H="R1:0,R2:0,R1:0"
     for xl in 0 2; do   # with x coalesced, fewer rows a thread (more warps an SM: 12% occupancy under Nsight) may pay
       echo "-- X_LANES=$xl"
       X_LANES=$xl timeout 280 python3 -m tools.bench_quantized --kernels generated --types Q4_0 --dtype float --rounds 3 \
         --shapes 2048:6144:r,12288:2048,3072:1536,2048:2048:r,2112:2048 --opts heur "$H,G0:32,L0:4" "$H,G0:32,L0:8" "$H,G0:32,U0:2,L0:2" \
         | tail -22
     done ;;
esac
# 8: step 7's x-lanes.diff on the whole generated decode (QuantizedLinear.call hands the product x lane-major, a view the
#    producer's kernel stores, or a copy where x is a buffer already: +2 kernels a block on Youtu-LLM-2B-tiny), X_LANES 0 1 1 0,
#    Youtu-LLM-2B and DeepSeek-V2-Lite, fresh kernel caches; then the greedy tokens with X_LANES=1 against the references
case $1 in
  8) patch -s -p1 < runs/2026-11-30-reduce/experiments/x-lanes.diff || exit 1
     synth youtu-llm-2b deepseek-v2-lite
     for xl in 0 1 1 0; do
       echo "-- X_LANES=$xl"
       CACHEDB=$(mktemp -d)/cache.db X_LANES=$xl timeout 150 python3 -m tools.gpu_bench --kernels generated --presets youtu-llm-2b,deepseek-v2-lite \
         --decode 32 --prefill 512 --json "$OUT/xl_${xl}_$RANDOM.json" 2>&1 | grep -v '^{' | tail -2
     done
     CACHEDB=$(mktemp -d)/cache.db X_LANES=1 timeout 120 python3 -m tools.gpu_check release --kernels generated 2>&1 | tail -4 ;;
esac
# 9: step 8 again on Youtu-LLM-2B alone (step 8 gave X_LANES=1 505.7 then 319.7 tok/s, X_LANES=0 441.8 and 441.7): five runs
#    interleaved, 1 0 1 0 1, fresh kernel caches, decode 64; then tools.profile's per-kernel decode table, X_LANES 0 and 1
case $1 in
  9) patch -s -p1 < runs/2026-11-30-reduce/experiments/x-lanes.diff || exit 1
     synth youtu-llm-2b
     for xl in 1 0 1 0 1; do
       CACHEDB=$(mktemp -d)/cache.db X_LANES=$xl timeout 90 python3 -m tools.gpu_bench --kernels generated --presets youtu-llm-2b \
         --decode 64 --prefill 64 --json "$OUT/xl9_${xl}_$RANDOM.json" > /dev/null 2>&1
       echo "X_LANES=$xl $(python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['rows'][0]; print(round(r['decode_tok_s'],1), round(r['decode_p10_ms'],3), round(r['decode_p90_ms'],3))" $(ls -t $OUT/xl9_* | head -1))"
     done
     for xl in 0 1; do
       echo "-- profile X_LANES=$xl"
       CACHEDB=$(mktemp -d)/cache.db X_LANES=$xl timeout 100 python3 -m tools.profile --kernels generated --model youtu-llm-2b --top 8 2>&1 | tail -40
     done ;;
esac
# 10: step 9's X_LANES=1 runs were 340 / 499 / 502 tok/s (and step 8's 506 / 320): is the slow mode a property of the process's
#     hash seed (set order in scheduling or memory planning)? X_LANES=1 under PYTHONHASHSEED 1-8, then 1-8 again (one kernel cache)
case $1 in
  10) patch -s -p1 < runs/2026-11-30-reduce/experiments/x-lanes.diff || exit 1
     synth youtu-llm-2b
     export CACHEDB=$(mktemp -d)/cache.db
     for seed in 1 2 3 4 5 6 7 8 1 2 3 4 5 6 7 8; do
       PYTHONHASHSEED=$seed X_LANES=${XL:-1} timeout 60 python3 -m tools.gpu_bench --kernels generated --presets youtu-llm-2b \
         --decode 64 --prefill 64 --json "$OUT/xl10_${seed}_$RANDOM.json" > /dev/null 2>&1
       echo "seed=$seed $(python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['rows'][0]; print(round(r['decode_tok_s'],1), round(r['decode_p10_ms'],3), round(r['first_token_s'],1))" $(ls -t $OUT/xl10_* | head -1))"
     done ;;
esac
# 11: step 10 found the slow mode in processes of the same hash seed (seeds 1-4 twice: 323/314, 314/504, 324/491, 278/364).
#     Is it the products' own? Youtu-LLM-2B's down and gate_up alone (weights past the L2), X_LANES 0 2 2 0 2 2, a process each;
#     then step 4 (split-k.diff, batched decode at 16 and 32 sequences, A then B)
case $1 in
  11) patch -s -p1 < runs/2026-11-30-reduce/experiments/x-lanes.diff || exit 1
     for xl in 0 2 2 0 2 2; do
       echo "-- X_LANES=$xl"
       X_LANES=$xl timeout 45 python3 -m tools.bench_quantized --kernels generated --types Q4_0 --dtype float --rounds 3 \
         --shapes 2048:6144:r,12288:2048 --opts heur 2>&1 | tail -3
     done
     patch -s -R -p1 < runs/2026-11-30-reduce/experiments/x-lanes.diff || exit 1
     LIMIT=70 bash "$0" 4 ;;
esac
# steps 12-14 (run on 68c0a03, before the split GEMM landed): lines added to gemm.split_k after its first rule (which
# products split), on the device's copy
split_rule() { python3 - "$1" <<'PY' || exit 1
import sys
from pathlib import Path
p = Path("apps/kernels/gemm.py"); s = p.read_text()
old = "  if s.experts or s.batched or s.T > 32: return s\n"
assert old in s
p.write_text(s.replace(old, old + sys.argv[1]))
PY
}
# 12: step 11's split-K batched decode agreed with the single-sequence tokens on row 0 only (agree 16,1,1,1): the split
#     products on the device against float64 (split_check.py), then the batched decode at 16 with only some forms split
#     (SPLIT_ONLY: res = a residual product, glu, plain = the rest), to find which one breaks the rows
case $1 in
  12) patch -s -p1 < runs/2026-11-30-reduce/experiments/split-k.diff || exit 1
     split_rule $'  import os\n  if (\'res\' if s.residual else \'glu\' if s.glu else \'plain\') not in os.environ.get(\'SPLIT_ONLY\', \'res,glu,plain\').split(\',\'): return s\n'
     timeout 120 python3 runs/2026-11-30-reduce/split_check.py 2>&1 | tail -25
     synth youtu-llm-2b
     for only in res glu plain; do
       echo "-- SPLIT_ONLY=$only"
       SPLIT_ONLY=$only CACHEDB=$(mktemp -d)/cache.db timeout 70 python3 -m tools.gpu_bench --presets youtu-llm-2b --batch 16 --decode 8 2>&1 | grep -v '^{' | tail -2
     done ;;
esac
# 13: step 12 found the plain (normed, no residual, no SwiGLU) split products break rows 1-3 (res and glu alone agree): the
#     products on the device (split_check.py, fixed to import no gguf), then the batched decode with one product split at
#     a time (SPLIT_N: the products of these N; each split shape printed once)
case $1 in
  13) patch -s -p1 < runs/2026-11-30-reduce/experiments/split-k.diff || exit 1
     split_rule $'  import os, sys\n  if os.environ.get(\'SPLIT_N\') and str(s.N) not in os.environ[\'SPLIT_N\'].split(\',\'): return s\n  print(\'SPLIT\', s, file=sys.stderr)\n'
     timeout 100 python3 runs/2026-11-30-reduce/split_check.py 2>&1 | grep -v "SPLIT" | tail -25
     synth youtu-llm-2b
     for n in 2112 3072; do
       echo "-- SPLIT_N=$n"
       SPLIT_N=$n CACHEDB=$(mktemp -d)/cache.db timeout 70 python3 -m tools.gpu_bench --presets youtu-llm-2b --batch 16 --decode 8 2>&1 | grep -v '^{' | sort -u | tail -6
     done ;;
esac
# 14: step 13: qkv_a's split (N 2112, read in place by the decode attention kernel) breaks rows 1-3, though the product alone
#     is right on the device. The split sum made contiguous in apps/dispatch.launch (C), batched decode at 16, qkv_a split only
case $1 in
  14) patch -s -p1 < runs/2026-11-30-reduce/experiments/split-k.diff || exit 1
     sed -i 's/    return (y + res.reshape(y.shape) if res is not None else y).reshape(out.shape)/    return (y + res.reshape(y.shape) if res is not None else y).reshape(out.shape).contiguous()/' apps/dispatch.py
     grep -q "reshape(out.shape).contiguous()" apps/dispatch.py || exit 1
     split_rule $'  import os\n  if os.environ.get(\'SPLIT_N\') and str(s.N) not in os.environ[\'SPLIT_N\'].split(\',\'): return s\n'
     synth youtu-llm-2b
     for n in 2112 2112,3072,2048,6144; do
       echo "-- C SPLIT_N=$n"
       SPLIT_N=$n CACHEDB=$(mktemp -d)/cache.db timeout 70 python3 -m tools.gpu_bench --presets youtu-llm-2b --batch 16 --decode 8 2>&1 | grep -v '^{' | tail -2
     done ;;
esac
# 15: x read lane-major's slow mode (the journal: X_LANES=1 processes decode Youtu-LLM-2B at ~500 or ~320 tok/s, all steps
#     alike): six X_LANES=1 processes of xl_order.py (one kernel cache), each three captures of the step, each its time as
#     run and its graph's kernel order; then A (X_LANES=0) twice
case $1 in
  15) python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     patch -s -p1 < runs/2026-11-30-reduce/experiments/x-lanes.diff || exit 1
     synth youtu-llm-2b
     export CACHEDB=$(mktemp -d)/cache.db
     for i in 1 2 3 4 5 6; do echo "-- X_LANES=1 process $i"; X_LANES=1 timeout 120 python3 runs/2026-11-30-reduce/xl_order.py youtu-llm-2b "$OUT/xo_$i.json" 2>&1 | tail -3; done
     for i in 7 8; do echo "-- X_LANES=0 process $i"; X_LANES=0 timeout 120 python3 runs/2026-11-30-reduce/xl_order.py youtu-llm-2b "$OUT/xo_$i.json" 2>&1 | tail -3; done ;;
esac
# 17: which products of 2-8 tokens take the split GEMM: A (the tree: matvecs up to 8 tokens), C (every product of 2 or more
#     tokens on the GEMMs: matvec.MAX_ROWS 1, as step 6's B) and L (plain products alone: experts and per-slot products keep
#     their matvecs), batched decode of 2, 4 and 8 sequences on the three models, fresh kernel caches
case $1 in
  17) synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash
     for v in A C L; do
       case $v in
         C) sed -i 's/^MAX_ROWS = 8 /MAX_ROWS = 1 /' apps/kernels/matvec.py; grep -q "^MAX_ROWS = 1 " apps/kernels/matvec.py || exit 1 ;;
         L) sed -i 's/^MAX_ROWS = 1 /MAX_ROWS = 8 /' apps/kernels/matvec.py
            sed -i 's/if t.type not in TYPES or t.B > MAX_ROWS: return False/if t.type not in TYPES or t.B > (1 if t.op == "linear" else MAX_ROWS): return False/' apps/kernels/matvec.py
            sed -i 's/if spec.B <= matvec.MAX_ROWS or/if spec.B <= (1 if spec.op == "linear" else matvec.MAX_ROWS) or/' apps/kernels/gemm.py
            grep -q '1 if t.op == "linear"' apps/kernels/matvec.py && grep -q '1 if spec.op == "linear"' apps/kernels/gemm.py || exit 1 ;;
       esac
       echo "-- $v"
       CACHEDB=$(mktemp -d)/cache.db timeout 240 python3 -m tools.gpu_bench --presets youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash --batch 2,4,8 \
         --decode 32 --json "$OUT/rows17_$v.json" 2>&1 | grep -v '^{' | tail -11
     done ;;
esac
# 18: gemm.FEW_TOKENS as committed (a batched step of 5-8 sequences: plain and per-slot products on the split GEMM, routed
#     experts on the matvecs) against A (FEW_TOKENS 8: every product of up to 8 tokens on the matvecs), a step of 8
#     sequences on the three models, A B A B, fresh kernel caches
case $1 in
  18) synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash
     i=0
     for v in A B A B; do
       i=$((i + 1))
       if [ $v = A ]; then sed -i 's/^FEW_TOKENS = 4$/FEW_TOKENS = 8/' apps/kernels/gemm.py; grep -q "^FEW_TOKENS = 8$" apps/kernels/gemm.py || exit 1
       else sed -i 's/^FEW_TOKENS = 8$/FEW_TOKENS = 4/' apps/kernels/gemm.py; grep -q "^FEW_TOKENS = 4$" apps/kernels/gemm.py || exit 1; fi
       echo "-- $v"
       CACHEDB=$(mktemp -d)/cache.db timeout 150 python3 -m tools.gpu_bench --presets youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash --batch 8 \
         --decode 32 --json "$OUT/few18_$i$v.json" 2>&1 | grep -v '^{' | tail -4
     done ;;
esac
# 19: the committed rule (B) against D = B and the matvecs also leave the products of 5-8 tokens that the GEMM does not
#     take (everything but routed experts; then tinygrad's generated kernel takes them, as step 17's C did), a step of 8
#     sequences on the three models, B D B D
case $1 in
  19) synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash
     i=0
     for v in B D B D; do
       i=$((i + 1))
       if [ $v = D ]; then sed -i 's/if t.type not in TYPES or t.B > MAX_ROWS: return False/if t.type not in TYPES or t.B > (MAX_ROWS if t.op == "experts" else 4): return False/' apps/kernels/matvec.py
         grep -q 'MAX_ROWS if t.op == "experts" else 4' apps/kernels/matvec.py || exit 1
       else sed -i 's/if t.type not in TYPES or t.B > (MAX_ROWS if t.op == "experts" else 4): return False/if t.type not in TYPES or t.B > MAX_ROWS: return False/' apps/kernels/matvec.py; fi
       echo "-- $v"
       CACHEDB=$(mktemp -d)/cache.db timeout 150 python3 -m tools.gpu_bench --presets youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash --batch 8 \
         --decode 32 --json "$OUT/few19_$i$v.json" 2>&1 | grep -v '^{' | tail -4
     done ;;
esac
