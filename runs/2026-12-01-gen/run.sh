# GPU steps of 2026-12-01, from the repository root; carry upstream/tinygrad upstream/.stamp upstream/.cache .cache/vocab (and, for
# llama.cpp, .cache/llama/llama-cpp-src.tar.xz).
# Measured 2026-12-02 (calls 49-54): 48 (found DeepSeek-V2-Lite's generated path wrong), 56 (the bisect: patch 69), 57 (the
# series with patch 70 checked and timed), 51 (the flash prefill kernel: 1.9-4.0x at depth), 55 and 54 (rejected).
# Measured 2026-12-02 (calls 55-57): 53 (PATHS=1: the flash prefill in the model, landed), 49 (split experts: +7.5% at 8, -8.4%
# at 32), 58 (rejected), 61 (the flash prefill's path check on the MoE models and their long prompts).
# Measured 2026-12-02 (calls 58-60): PATHS=1 63 (chunks of 2048: landed where the 512s flash), PATHS=1 66 (beside llama.cpp; found
# DeepSeek-V2-Lite's 2048-token experts on the matvecs), 67 (its fix timed; GLM-4.7-Flash's 2048 check, open).
# Measured 2026-12-02 (calls 61-64): 70 (one tf32 pass over an fp16 cache: landed), 68 (GLM-4.7-Flash's 2048 block by
# block: a routing cascade; landed), 69 (patch 0071: +2.5% / +3.0%), 71 (beside llama.cpp; DeepSeek-V2-Lite's and GLM-4.7-Flash's
# fp16 rows ran out of the call).
# Measured 2026-12-02 (calls 65-67): 73 (the fp16 mma flash kernel: landed with one warp a tile), 76 (the f16 rows beside
# llama.cpp: DeepSeek-V2-Lite in one run; GLM-4.7-Flash's ran out), 77 (GLM-4.7-Flash and Youtu-LLM-2B alone).
# Measured 2026-12-02 (calls 68-72): 78 (the pairs' kernel: 16 heads 8.4 -> 4.1 ms with one warp; the model +6.5% only), 81 (the
# 16k prompt's last chunk kernel by kernel: the pairs' store doubled the expansions), 82 (B: the expansions as fp16 products on
# tinygrad's tensor cores: slower, rejected; GLM-4.7-Flash's split kernel failed to compile: patches/0073), 83 (the realized
# products split after: Youtu-LLM-2B's 16k prompt 8,142 -> 11,031 over an fp32 cache, landed).
# Measured 2026-12-03 (calls 73-77): 84 (the expansions as one GEMM on the tensor cores: landed; the paths of the three models
# over an fp32 cache with it), 71 (Youtu-LLM-2B beside llama.cpp with it).
# Measured 2026-12-03 (calls 78-84): 88 (Nsight Compute on the attend kernel and the expansion GEMM; the L2 prefetch: rejected),
# MODEL=1 64 (TT = 4 / 16-row stages / a head a warp: rejected), 89 (the transposed warp sums: landed; dual, pipe: rejected),
# 71 with DEPTHS=4096,16384,32768 (three models beside llama.cpp to 32k, fp16 caches), ILP="splits256 twosm twosm8" 89 (rejected).
# Measured 2026-12-03 (calls 85-88): ILP=kr2 89 (rejected), 75 (the batched experts' profile), DIFF=experts-split-16.diff
# BATCH=8,16,32 49 and DIFF=experts-split-8.diff PRESETS=glm-4.7-flash,deepseek-v2-lite BATCH=8,16 49 (not landed).
# Measured 2026-12-03/04 (calls 89-92): 90 (the tensor-core decode attend at every depth: 4k -11%), 91 (its Nsight Compute
# profile; decode-mma-early.diff rejected), PRESETS=youtu-llm-2b,deepseek-v2-lite POS=4095,16383,32767 PATH_DEPTH=10300
# PATH_ARGS=--no-generated VARIANTS="B A B A" 90 (from 10,240 keys on: landed), DEADLINE=110 92 (call92: rejected).
# Measured 2026-12-04 (calls 93-96): 93 (the 64-key-stage tensor-core decode at every depth: 4k -12%, its queries' loads one at
# a time), 94 (its Nsight Compute profile), 93 again (the loads issued together: 4k -3-4%, 16k / 32k +14-23%), 95 (the depth
# kernel from 6,144 keys, GLM-4.7-Flash too: landed).
# Measured 2026-12-04 (calls 97-101): 97 (a decode token at depth kernel by kernel: the combine 6.5 us, the attend 15.0 at 4k), 98
# (their stall samples per instruction), 99 (the combine's loads at once, the tensor-core attend's first stage first, C: 16 heads
# from 2,048 keys: landed), RUNS="youtu-llm-2b:f16 deepseek-v2-lite:f16" DEPTHS=4096,16384,32768 DECODE=32 PATHS71=youtu-llm-2b
# PATH_DEPTH=3000 71 (beside llama.cpp: Youtu-LLM-2B 2.04x at 4k; DeepSeek-V2-Lite's own rows ran out).
# Measured 2026-12-04 (calls 102-106): PATHD=10300 VARIANTS="B A" 100 (GLM-4.7-Flash's 20 heads in one workgroup a split:
# +2% / +16% / +24% at 4k / 16k / 32k, landed), RUNS="glm-4.7-flash:f16 deepseek-v2-lite:f16" DEPTHS=4096,16384,32768 DECODE=32
# 71 (GLM-4.7-Flash beside llama.cpp; DeepSeek-V2-Lite's in the next call with RUNS=deepseek-v2-lite:f16), POS="2048 0" 102
# (DeepSeek-V2-Lite's 4k prompt kernel by kernel: the routed experts' GEMMs 55-61%), then `gpu_bench --presets
# glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b --decode 64 --prefill 512` (short context, f32) and the same of the first two
# against a tree with decode-mma-t.diff and decode-start.diff reversed, A B A B (call106: GLM-4.7-Flash's decode -1.3%).
# Measured 2026-12-04 (calls 107-111): 107 (the split and the combine alone at six sizes; mc64 / predmc64 in the model
# -20%: rejected), 108 (the combine's old loop +1.3% in the model at short context, pred +0.3%; experiments/experts-list.diff
# alone: GLM-4.7-Flash's gate_up -3%, DeepSeek-V2-Lite's unchanged, 2 / 4 slots slower: not landed), 109 (old8 / old16 +1.3%
# / +1.4% short, 2 us a block slower at 16k-32k alone), 110 (combine-f2.diff, 48 registers: no change in the model: rejected),
# DIFF=combine-hybrid.diff POS=575,1023,4095,16383 DEADLINE=420 110 (call111, its files named f2_: the loop where ns < SPLITS:
# short +1.5%, 4k -1.7% (125 splits took the loop), 16k +0.2%; landed with the loop where splits take MIN_CHUNK keys).
# Measured 2026-12-04 (calls 112-115): 112 (an experts GEMM's x records dynamic: DeepSeek-V2-Lite's pp4096 +16.5%, landed),
# 111 and PRESETS=deepseek-v2-lite,youtu-llm-2b 111 (the decode attend on fp16 m16n8k16: GLM-4.7-Flash's 20 heads +2.1% /
# +7.8% / +11.6% at 4k / 16k / 32k, landed; the 16 heads' -2% at 4k: rejected, experiments/decode-mma-16h-f16.diff),
# RUNS=glm-4.7-flash:f16 DEPTHS=4096,16384,32768 DECODE=32 71 (ran out: llama.cpp's build 367 s beside the synthesis).
# Measured 2026-12-04 (calls 116-120): BUILD_ONLY=1 RUNS="glm-4.7-flash:f16 deepseek-v2-lite:f16" 71 (built; the machine
# went back before the next call, which built again), RUNS=glm-4.7-flash:f16 DEPTHS=4096,16384,32768 DECODE=32 71 (only
# llama.cpp's rows in time: its depths with flash attention off took half of them), NOLLAMA=1 RUNS="glm-4.7-flash:f16
# deepseek-v2-lite:f16" DEPTHS=4096,16384,32768 DECODE=32 71 (ours: GLM-4.7-Flash 2.00x / 2.11x / 2.05x call117's llama.cpp),
# DIFF=experts-dyn-steps.diff PRESETS=deepseek-v2-lite,glm-4.7-flash NODEPTH=1 POS=575 110 (short context unchanged), DIFF=
# combine-short.diff PRESETS=glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b NODEPTH=1 POS=575 110 (A B B A: +1.5-1.6%).
# Measured 2026-12-04 (calls 121-126): RUNS=glm-4.7-flash:f16 DEPTHS=4096,16384,32768 DECODE=32 71 (GLM-4.7-Flash beside
# llama.cpp in one call: decode 2.04x / 2.12x / 2.04x, prompts 1.50x / 1.42x / 1.44x), 121 (A B A without llama.cpp: the
# machine had gone back; second process 2.15 -> 1.86 -> 1.76 s on Youtu-LLM-2B), M=glm-4.7-flash POS="576 4096" NCU_POS=4096
# 97 (the step 2.86 / 2.97 ms: depth costs 0.11 ms a token), DIFF=experts-split-picks.diff ... 49 (did not apply: regenerated
# since), 105, RUNS=deepseek-v2-lite:f16 DEPTHS=4096,16384,32768 DECODE=32 71 (one run: 2.09x / 2.44x / 2.27x, 1.32x / 1.54x /
# 1.77x).
# Measured 2026-12-05 (calls 127-130, H100): LLAMA=1 128 (the file pinned and the driver started early: Youtu-LLM-2B's
# second process 1.59-1.74 -> 1.23-1.37 s, landed; the diffs no longer apply since, so 123, 124 and 128 need none), PRESETS=
# youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash VARIANTS="D A" LLAMA=1 128 (all three within 1.5x llama.cpp in one run),
# DIFF=experts-split-picks.diff PRESETS=deepseek-v2-lite,glm-4.7-flash BATCH=4,8 49 (+6.1% at 8 on DeepSeek-V2-Lite:
# landed), DIFF=mixed-split-k.diff 127 (A only: the mixed turns; B ran out of the call).
# Measured 2026-12-05 (calls 131-134): 131 (a batched step's kernels fewer: split sums in the GEMM, x rounded in it: slower,
# rejected), DIFF=vb-matvec.diff PRESETS=youtu-llm-2b,deepseek-v2-lite BATCH=1,4,8 49 (landed with 128 values a head),
# DEADLINE=110 9 then DEADLINE=270 M=youtu-llm-2b 29 (the load's profile; the step of 8 kernel by kernel: q_b's and k_b's
# 8-row matvecs 14-15 us each), DIFF=vb-matvec.diff PRESETS=glm-4.7-flash BATCH=1,8 49 (-1.1% on 256 values a head).
# Measured 2026-12-05 (calls 135-140, H100): 135 (q_b and k_b on the GEMM, the normed xq's row in registers: D, both, landed:
# the step of 8 -18% / -4.9%), PRESETS=glm-4.7-flash VARIANTS="A D D A" 135 (GLM-4.7-Flash -9.4%), DEADLINE=300 M=youtu-llm-2b 29
# (the step of 8 kernel by kernel with them: the split sums and x quantizations a third of a block), DEADLINE=400 129 (B only),
# 139 (a split SwiGLU's slices into down's x quantization: Youtu-LLM-2B -1.6%, landed), DEADLINE=290 VARIANTS=A 129 (the
# A side, a later machine: mixed turns -10% to -33% with the split, landed).
# Measured 2026-12-05 (calls 141-144, H100): 141 (residual sums in the next norm's xq: rejected; one xq for the shared and
# routed gate_up: DeepSeek-V2-Lite -1.1%, landed), VARIANTS="A B A B" 129 (the mixed split in one call: -33% / -12.5%, its last
# B ran out), SERVE=1 129 (C's warmup ran past the load's 150 s wait), SERVE=1 PAR=8 CLIENTS=1,8 WAIT=280 LEVEL_S=280
# VARIANTS="C A" DEADLINE=450 129 (the server's chunks as rows of the steps: 8 clients +22%, landed).
# Measured 2026-12-06 (calls 145-146, H100): DEADLINE=170 VARIANTS="A B" 150 and PRESETS=deepseek-v2-lite VARIANTS="B A B" 150
# (the 4-bit radix select: Youtu-LLM-2B's sampled step 4.39 -> 2.81 ms, DeepSeek-V2-Lite's 1.60 -> 2.42), DEADLINE=200 BATCH=2,4
# VARIANTS="A B C" 152 (4 rows on the GEMM: Youtu-LLM-2B -10%, DeepSeek-V2-Lite +8%; 2 rows lose on both), BATCH=1,8 145 (chunks
# of 8 and 32: a mixed turn's fixed ~2.2 ms; the 128s ran out).
# Measured 2026-12-06 (calls 147-152, H100): PRESETS=youtu-llm-2b 153 and PRESETS=deepseek-v2-lite VARIANTS="B A" 153 (a chunk's
# latent rows in one kernel: the mixed turn -4% / 0%, landed), A_PATHS=deepseek-v2-lite CHUNKS=32 154 (the mixed turn kernel by
# kernel: the 32-token chunk's tensor-core attention 2.05 of 5.83 ms), 155 (short chunks on the split prefill kernel: -12.5% /
# -5.0%, landed), then on that machine path_check --chunks 32 and --mixed of 155's B, and gpu_bench --mixed-chunk 16 / 8 of B.
# Measured 2026-12-06 (calls 157-158, H100): 160 (the step of 8 and a mixed turn kernel by kernel, each row a token of its own:
# DeepSeek-V2-Lite's routed experts 43% of the step, 1.1-1.4 TB/s), 161 (build_mma's steps x occupancy x slices on those
# products: -5% / -12% at best). Tried and not started (no machine came for the rest of the lease): 163.
# Measured 2026-12-06 (calls 159-164, H100): 163 (the streaming experts kernel: rejected), 146 with M= each model (the server
# at 1-32 clients), NCU=1 165 (the few-token tile: landed; Nsight Compute on the routed gate_up and the output head: the
# register loads' sectors half used, L1/TEX the limit).
# Measured 2026-12-06 (calls 165-167, H100): 167 then M=youtu-llm-2b CLIENTS=1,8 SECS=10 146 (the staged kernel: DeepSeek-V2-Lite's
# step of 8 -5.8%, landed for the routed experts of <= 8 tokens; the server in tools.load's concurrent window), M="deepseek-v2-lite
# youtu-llm-2b glm-4.7-flash" 147 (the three models beside llama-batched-bench), CLIENTS=8,16,32 SECS=8 WAIT=150 170 (ran out:
# B's first server captured 56 steps in more than 150 s).
# Measured 2026-12-06 (calls 168-171, H100): 167 (the landed staged rule: DeepSeek-V2-Lite's step of 8 -4.3%, the rest as
# they were), 171 (few-tokens-large.diff: the step of 4 -17% / -1.5% / -4.5%, landed in b05fa2b), 168 (argmax-pad.diff:
# Youtu-LLM-2B -2.6% / -4.5% at 1 / 8 rows, landed), M=deepseek-v2-lite CLIENTS=1,8 SECS=10 146 (8 clients 2.05x one), CLIENTS=8,32
# SECS=10 WAIT=260 170 (batching-queued-chunks.diff: 32 clients +17%, TTFT p50 -74%, landed), M=glm-4.7-flash 146 (ran out:
# its server still capturing). The landed diffs are gone from experiments/; 168, 170 and 171 ran them against 3764646.
# Measured 2026-12-07 (calls 172-176, H100): BATCH=4 KINDS=rows PRESETS=youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash 160 (the
# step of 4 kernel by kernel), 172 (rejected), CLIENTS=8,32 SECS=10 148 (rejected), M=glm-4.7-flash CLIENTS=1,8 SECS=8 146
# (twice: the first server's captures took the first call), M=youtu-llm-2b SECS=8 146 and M="youtu-llm-2b deepseek-v2-lite
# glm-4.7-flash" BATCH=1,4,8 147 (the batched table beside llama.cpp at 1 / 4 / 8). Tried and not started (the budget was
# spent): 13 (Youtu-LLM-2B's load, driver call by driver call).
# Measured 2026-12-07 (call178, H100): 179 (the fast-start targets beside llama.cpp: all met). Tried and not started (no
# machine came for them): 180, 177.
# Measured 2026-12-07 (calls 179-181, H100, after nine failed starts): 182 (the expert mix at two workgroups an SM: landed),
# 177 (LARGE 10M: landed), 166 (four sub-steps: landed for 5-8 rows), PRESETS=deepseek-v2-lite,glm-4.7-flash BATCH=2,4 183
# (the three together, A B). Tried and not started: M=deepseek-v2-lite SLOTS=8 ... 148.
# Measured 2026-12-07 (calls 182-187, H100, three failed starts): 181 (Nsight Compute on DeepSeek-V2-Lite's MoE matvecs at 1 and
# 4 rows: instruction-bound, 0.2 instructions a weight byte), 184 (four rows at eight warps for the routed experts of 2-4
# tokens: landed), M="deepseek-v2-lite glm-4.7-flash youtu-llm-2b" BATCH=1,2,4,8,16,32 147 (the batched table beside
# llama.cpp), 185 (the four-rows plan from 5 tokens: landed), M=deepseek-v2-lite SLOTS=8 CLIENTS=1,8 SECS=8 VARIANTS=A 148
# twice (the tree's server with 8 slots; the first server's first long prompt captured the 128-token prefill chunk while it
# waited: warmup makes it since, edf57c9).
# Measured 2026-12-07 (calls 188-191, H100, one failed start): 189 (half-warp rows: landed for 2+ rows), 186 (rejected), 187
# (k_b in place: landed), 188 (twice: the mix from 1 wave landed on the half-warp rows), M="deepseek-v2-lite glm-4.7-flash
# youtu-llm-2b" BATCH=1,2,4,8,16,32 147 (the batched table beside llama.cpp with them).
# Measured 2026-12-07 (call192, H100, after four failed starts): BATCH=16 KINDS=rows PRESETS=glm-4.7-flash,deepseek-v2-lite 160,
# then BATCH=2 and BATCH=1 KINDS=rows PRESETS=deepseek-v2-lite 160 (the routed GEMMs of 16 rows at 1.0-1.2 TB/s).
# Measured 2026-12-07 (calls 193-195, H100, two failed starts): 193 (the routed GEMMs of 16 and 32 tokens alone; staged split
# tiles from 9 tokens: rejected; Nsight Compute on GLM-4.7-Flash's gate_up of 16: 168 registers, spills, 18.8% occupancy),
# 194 (8 x 256 tiles in K slices: landed, the steps of 16 / 32 -10% to -16%), M="deepseek-v2-lite glm-4.7-flash"
# BATCH=1,8,16,32 147 (beside llama.cpp with it).
# Measured 2026-12-07 (calls 196-198, H100, four failed starts): NOSWEEP=1 196 (the 24-token prompt's path check at full size;
# 5-8 tokens on 8 x 256 tiles and the GEMM from 32 picks: rejected), 197 (a tile's x records of its entries only: landed),
# 198 (the table beside llama.cpp with it; Nsight Compute on the routed gate_ups of 8 and 16 tokens; the staged stages swept).
# Measured 2026-12-07 (calls 199-202, H100): 199 (three stages for the staged routed GEMM: DeepSeek-V2-Lite's step of 8 -1.6%,
# landed; the step of 8 kernel by kernel after it), 200 (call200: the staged gate_up in two stages and two slices, rejected; the
# steps of 32 / 16 rows kernel by kernel), BATCH=16,32 169 (call201: x-slots.diff rejected, prefill -23% / -25%), 202 (call202:
# the output heads of 16 / 32 rows swept: compute-bound at every tile).
# Next lease, in order: 203 (DeepSeek-V2-Lite's step of 8 under Nsight Compute: each kernel's own time in the step; four tries
# got no machine), 205 (the staged routed GEMM's copy offsets once a tile, prepared: 9% fewer instructions in the gate_up's K
# loop), 204 (the Q6_K output heads of 9-16 rows on call202's best tile, prepared),
# M=deepseek-v2-lite SLOTS=8 CLIENTS=1,8 SECS=8 WAIT=300 148 (B: every prompt beside running streams in chunks of 128 on the MoE
# models; 8 slots capture fewer steps), then M=glm-4.7-flash SLOTS=8 CLIENTS=1,8 SECS=8 WAIT=300 148, 180 (GLM-4.7-Flash's first server:
# answering after one request's steps, the batched ones while idle), PRESETS=glm-4.7-flash 167,
# CHUNKS=128 BATCH=1,8 145, 151 (one capture of a mixed step for a prompt's chunks, prepared), 125 (GLM-4.7-Flash's 20 heads on the CUDA cores below 2,048 fp16 keys: short A B B A, depths B A),
# 122 (the short context's decode over f32 and f16 caches on both MoE models, if 125 leaves it open), PRESETS=glm-4.7-flash
# VARIANTS="A B" 139, PRESETS=glm-4.7-flash,deepseek-v2-lite 84, 85, 80, VARIANTS="B A" 74. Measured and closed: 150
# (superseded by 159), 155-159 (OPTIMIZATION_JOURNAL.md, 2026-12-06).
#   1: where a generated decode token of DeepSeek-V2-Lite and GLM-4.7-Flash goes, kernel by kernel: Nsight Compute's device
#      times (L2 and clocks left as they run: --cache-control none --clock-control none) against the step as run in its
#      graphs; then BEAM=2 on DeepSeek-V2-Lite's 8 slowest decode kernels (tools.beam_kernels) while the time lasts
cd "$(dirname "$0")/../.."
export DEV=${DEV:-CUDA} PYTHONUNBUFFERED=1 PYTHONPATH=.
OUT=${OUT:-out}; mkdir -p "$OUT"
left() { echo $((${DEADLINE:-590} - SECONDS)); }
synth() { for m in "$@"; do python3 -c "from apps import synth; synth.generate('$m', 'release', progress=False)"; done; }
ncu_decode() {  # ncu_decode M [SPARE [TARGET ARGS...]]: the generated step's kernels under Nsight Compute, the table in $OUT/ncu_T_M.txt
  local m=$1 spare=${2:-0} t=${3:-decode}; shift 3 2>/dev/null || shift $#
  local args=${*:---pos 32}
  timeout $(($(left) - spare)) ncu --profile-from-start off --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv --log-file "$OUT/ncu_${t}_$m.csv" \
    python3 -m tools.profile --model $m --kernels generated --target $t $args --repeat 3 --count 20 --ncu --json > "$OUT/rows_${t}_$m.json" \
    2> "$OUT/ncu_${t}_$m.err"
  python3 -m tools.profile --ncu-csv "$OUT/ncu_${t}_$m.csv" --rows "$OUT/rows_${t}_$m.json" --top 40 > "$OUT/ncu_${t}_$m.txt" 2>&1
  [ -s "$OUT/ncu_${t}_$m.err" ] || rm -f "$OUT/ncu_${t}_$m.err"   # the device returns at most 8 files
  head -4 "$OUT/ncu_${t}_$m.txt"; grep -E '\(all\)' "$OUT/ncu_${t}_$m.txt"
}
prompts_ab() {  # prompts_ab TAG: $P's prompts of $DEPTHS (gpu_bench) over each of $CACHES, in the order $VARIANTS (A = /tmp/A,
               # B = the tree), a json a run named TAG_<variant>_<cache>
  local tag=$1 v c d
  for v in ${VARIANTS:-A B B A}; do for c in ${CACHES:-f32 f16}; do
    d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $c $(date +%T)"
    (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --cache-type $c --decode 32 --depths ${DEPTHS:-4096,16384} \
      --json "$OUT/${tag}_${v}_$c.$RANDOM.json" 2>&1 | grep -v "^{" | tail -4)
  done; done
}
tree() {  # tree DIR [DIFF [-R]]: a copy of the tree (its .cache left out) in DIR, experiments/DIFF applied (-R: reversed)
  rm -rf "$1" && mkdir "$1" && cp -r $(ls -A | grep -v '^.cache$') "$1"/ || return 1
  [ -z "$2" ] || patch -s -p1 $3 -d "$1" < runs/2026-12-01-gen/experiments/$2
}
batch_ab() {  # batch_ab TAG V:DIFF[:-R] ...: gpu_bench --batch $BATCH (default 8,16) of $P (default youtu-llm-2b,deepseek-v2-lite)
             # in the order $VARIANTS (default A B B A); variant V is the tree with experiments/DIFF (-R: reversed) in /tmp/V,
             # every other variant the tree; a json a run named TAG_<variant>
  local tag=$1 spec v d; shift
  for spec in "$@"; do IFS=: read -r v d r <<< "$spec"; tree /tmp/$v $d $r || exit 1; python3 -m compileall -q /tmp/$v/upstream/tinygrad /tmp/$v/apps /tmp/$v/tools > /dev/null; done
  python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
  P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
  for v in ${VARIANTS:-A B B A}; do
    d=.; for spec in "$@"; do [ "${spec%%:*}" = $v ] && d=/tmp/$v; done; echo "-- $v $(date +%T)"
    (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-8,16} --decode 32 \
      --json "$OUT/${tag}_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -6)
  done
}
serve_ab() {  # serve_ab V DIFF: the server under load ($M, 32 slots, 1 / 8 / 16 clients: TTFT and ITL p50 / p99) for each
             # variant of VARIANTS (A B B A), variant V a copy of the tree with experiments/DIFF, the other the tree
  local v d
  tree /tmp/$1 $2 || return 1
  for d in . /tmp/$1; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
  for v in ${VARIANTS:-A B B A}; do
    d=.; [ $v = $1 ] && d=/tmp/$1; echo "-- $v $(date +%T)"
    (cd $d && exec python3 apps/llm.py --model $M --serve 8080 --parallel 32 --max-context 2048 --queue 64 > /tmp/server_$v.log 2>&1) &
    local pid=$!
    timeout $(( $(left) > 150 ? 150 : $(left) - 5 )) python3 -m tools.load --port 8080 --clients 1,8,16 --requests 3 --seconds 30 --wait 120 2>&1 | tail -5
    kill $pid; wait $pid 2>/dev/null
  done
}
start_ab() {  # start_ab TAG ORDER TREE: a second process's start and its load phases (tools.start_time) of $P for each variant
             # of ORDER, /tmp/<variant> but TREE's (the tree itself), a json a run named TAG_<variant>; $extra: more flags
  local v d
  for v in $2; do
    d=/tmp/$v; [ $v = $3 ] && d=.; echo "-- $v $(date +%T)"
    (cd $d && timeout $(($(left) - 3)) python3 -m tools.start_time --presets $P --repeat 3 $extra --json "$OUT/$1_$v.$RANDOM.json" 2>&1 \
      | grep -v Warn | tail -8)
  done
}
short_ab() {  # short_ab TAG ORDER TREE: gpu_bench's short context (decode 64 after a 512-token prompt, prefill 512) of $P for
             # each variant of ORDER, /tmp/<variant> but TREE's (the tree itself), a json a run named TAG_<variant>
  local v d
  for v in $2; do
    d=/tmp/$v; [ $v = $3 ] && d=.; echo "-- $v $(date +%T)"
    (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --decode 64 --prefill 512 \
      --json "$OUT/$1_$v.$RANDOM.json" 2>&1 | grep -E '^(glm|deep|youtu).*[0-9]\.[0-9]+ +[0-9]')
  done
}
abdiff() {  # abdiff TAG DIFF PRESETS POSITIONS: the generated decode step (bench_block.py --only decode, a step's own time) of each
           # preset at each position, A = the tree, B = a copy with experiments/DIFF applied, A B B A (a kernel cache a variant)
  local tag=$1 diff=$2 P=$3 poses=$4 v d m pos
  export TINYGRAD_MLA_CACHE=$PWD/.cache   # the copy's models and vocabulary are the tree's
  tree /tmp/B $diff || return 1
  for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
  synth ${P//,/ }; echo "synthesized $(date +%T)"
  for v in A B B A; do
    d=.; [ $v = B ] && d=/tmp/B; mkdir -p /tmp/bb$tag$v
    for m in ${P//,/ }; do for pos in ${poses//,/ }; do
      echo "-- $tag $v $m pos $pos $(date +%T)"
      (cd $d && CACHEDB=/tmp/bb$tag$v/cache.db timeout $(($(left) - 3)) python3 bench_block.py 30 --rounds 3 --model $m \
        --kernels generated --only decode --pos $pos --json > /tmp/bb.json 2> /tmp/bb.err; tail -1 /tmp/bb.err; python3 bench_block.py --markdown /tmp/bb.json 2>&1 | tail -1)
    done; done
  done
}
#   2: EXPERIMENT experiments/chunk-mod.diff (CHUNK_MOD=0 the old form): a K-quant chunk's coordinates as (R // step) %
#      dim, so the code generator splits the chunk range into the block's ranges, where R - blk * cpb left div / mod index math
#      it could not fold. The products alone (Q6_K / Q5_K shapes of the MoE models' shared experts and output head), CHUNK_MOD 0
#      then 1; the generated decode and prefill 512 of DeepSeek-V2-Lite and GLM-4.7-Flash, CHUNK_MOD 0 1 1 0 (a kernel cache a
#      variant; the second pair reuses the first's); CHUNK_MOD=1's greedy tokens on the tiny presets
#   3: start times beside llama.cpp in one run (carry .cache/llama/llama-cpp-src.tar.xz too): llama.cpp builds in the background
#      while the three files are synthesized, then tools.start_time --llama (first and second process, 16-token prompt)
# The next lease:
#   4: DeepSeek-V2-Lite's Q6_K down product (2048 x 2816 + residual, the only K-quant product whose merged chunk range, 176,
#      the matvec rule pads: to 192 for 32 lanes, masked loads) alone, the heuristics against a group of 16 that divides it
#      (no PADTO), two and four rows a thread; then GLM-4.7-Flash's generated decode under Nsight Compute (step 1's
#      profile, which ran out of time there)
#   6: where Youtu-LLM-2B's generated prefill of a 512-token prompt goes (one chunk of 512 at position 0 with the head and
#      the first token's sampling, Nsight Compute), then step 4
#   7: the norm inside a decode product with its operand staged whole (x * norm_w one local buffer, the codegen change
#      experiments/stage-whole.diff): A = HEAD's apps/dispatch.py (the norm's scale a kernel of its own), B = the tree's; the generated decode of
#      $PRESETS (default the MoE models) in $VARIANTS (A B B A), a kernel cache a variant; then B's greedy tokens on the tiny
#      presets unless NOCHECK is set (DECODE, PREFILL: the tokens decoded and the prompt's length, default 32 and 16)
#   8: EXPERIMENT the norm inside a decode product, its x * norm_w staged as one operand (experiments/stage-whole.diff, a
#      codegen change to patch 63's pass) and its rms shared with the products that take the norm apart
#      (experiments/norm-shared.diff: the router no longer reduces x again, which made step 7's kernel count the same as A's;
#      q_b reads its q_a in place): both applied, then step 7 on the three models (A = HEAD's apps/dispatch.py with the
#      codegen change, which changes no kernel of A)
#   9: where Youtu-LLM-2B's start goes on this machine (its second process is 2.1 s against llama.cpp's 1.0-1.3): the imports
#      (python -X importtime, the 40 slowest), Engine.load under cProfile (prof_load.py), and tools.start_time's phases
#  10: DeepSeek-V2-Lite's largest generated decode kernels under Nsight Compute's full set (the routed experts' gate_up and
#      down, the shared expert's Q5_K gate_up and Q6_K down, the fp32 router): occupancy, stalls, DRAM throughput, the
#      first two calls of each
#  11: where step 8's B loses DeepSeek-V2-Lite's decode (-10% / -17% where Youtu-LLM-2B gained 3% and GLM-4.7-Flash held):
#      tools.profile's per-kernel table of its generated decode token, A then B (step 8's diffs), a kernel cache a variant
#  12: step 8's B (both diffs) on DeepSeek-V2-Lite's generated decode under Nsight Compute (step 1's profile is A's): step 11
#      found its step 0.9 ms slower as run in its graphs while each kernel alone was no slower
#  13: Youtu-LLM-2B's load step by step, CUDA driver calls included, in three second processes (calls 12-13 and 15 ran
#      it as runs/2026-12-01-gen/prof_cuda.py, since folded into tools.start_time --calls)
#  14: start times, A = HEAD's apps/ (a copy of the tree), B = the tree's (the file's pages mapped on a thread while the
#      metadata is read and the device opens; the staging slots sized in host bytes): tools.start_time of Youtu-LLM-2B in
#      A B B A, then $MORE (default the MoE models) in B and A; with LLAMA set, llama.cpp is built beside them (carry
#      .cache/llama/llama-cpp-src.tar.xz) and the last run is --llama
#  15: EXPERIMENT experiments/chunk-factor.diff: a generated decode product multiplies a chunk's sum by its scale once
#      (Q4_0's, Q5_0's, Q8_0's d), not each weight (Nsight Compute's full set, call17: the products issue on 42-51% of the
#      cycles at 7-21% of DRAM). The products alone (A = HEAD's apps/dispatch.py, B = the diff's; A B A B), then step 7's
#      generated decode of the three models (A B B A) and B's greedy tokens on the tiny presets
#  16: EXPERIMENT experiments/lazy-jinja.diff: jinja2 imported inside a model's load (ChatTemplate), beside the device's
#      opening, not at the process's start (0.13 s of Youtu-LLM-2B's imports on this host, call11). tools.start_time --repeat 5
#      of Youtu-LLM-2B, A = the tree, B = the tree with the diff (a copy), A B B A; with LLAMA set, llama.cpp is built beside
#      them (carry .cache/llama/llama-cpp-src.tar.xz) and B runs once more with --llama
#  17: the routing's selection on the logits (softmax keeps their order, so the selection waits on neither of softmax's sums):
#      A = HEAD's apps/mla.py, B = the tree's; the generated decode of DeepSeek-V2-Lite (softmax gating) and Youtu-LLM-2B
#      (dense: unchanged) in A B B A with step 7, then tools.profile's as-run table of GLM-4.7-Flash's generated decode token
#  18: the generated path beside llama.cpp in one run (carry .cache/llama/llama-cpp-src.tar.xz too): llama.cpp builds while
#      the files are synthesized and the greedy check runs, then gpu_bench --kernels generated --llama, decode and prefill 512
#  19: EXPERIMENT the K-quant products with clean indices and a warp's lanes over several reduce ranges: experiments/chunk-mod.diff
#      (CHUNK_MOD: a chunk's coordinates as (R // step) % dim, which splits R into the block's ranges; rejected alone, step 2)
#      and experiments/mv-multi.diff (MV_MULTI, heuristic.py: a matvec group short of 32 lanes takes the reduce ranges left
#      as loops too, whole, where they divide the warp). The products alone (CHUNK_MOD MV_MULTI: 0 0, 1 1, 1 0), then the
#      generated decode of the MoE models, 0 0 then 1 1 (a kernel cache a variant)
#  20: EXPERIMENT experiments/shared-beside.diff: run_sum's separate calls (the generated path) run the shared expert's down
#      first and the routed experts' down last with the shared result added to it, so the shared expert runs beside the
#      routing's chain, not after it (the critical path of DeepSeek-V2-Lite's generated decode, tools.profile --like on
#      DEV=NULL:NVCC:sm_90 with call1's Nsight Compute times, runs/2026-12-01-gen/cpu/: 676 -> 650 kernels, 2.93 ->
#      2.64 ms of device time). A = HEAD's apps/dispatch.py, B = the diff's: the generated decode of the MoE models (A B B A,
#      step 7), B's greedy tokens on the tiny presets
#  21: EXPERIMENT experiments/chunk-split-tokens.diff: a K-quant product of several tokens takes its chunk coordinates as
#      (R // step) % dim (split ranges, no div / mod index arithmetic; the one-token products keep R whole for the matvec
#      rule): step 19's 16-token prompts gained 16-29% from the split form. A = HEAD's apps/dispatch.py, B = the diff's: the
#      generated decode and 16-token prompts of the MoE models (A B B A, step 7), B's greedy tokens on the tiny presets
#  22: EXPERIMENT experiments/group-coalesced.diff (GROUP_COAL=0 the heuristics as they are): a grouped reduction of few
#      outputs over a range every load reads contiguously (the fp32 router's 64 rows of 2048, the norms' sums of squares)
#      takes UNROLL 4 then GROUP (a warp's loads one coalesced span of float4s) where GROUPTOP gave each lane a run of its
#      own (Nsight Compute: the router 5.5-6.6 us at 96 GB/s, one warp a scheduler stalled on its loads). The router's
#      product alone (heuristics, GROUP_COAL=0, against explicit opts), then the generated decode of the MoE models,
#      GROUP_COAL $VARIANTS (default 0 1 1 0; a kernel cache a variant)
#  23: EXPERIMENT experiments/group-coalesced-any.diff (GROUP_COAL_ANY=0 patch 67 as it is): patch 67's coalesced group for
#      any grouped reduction over a constant range every load reads contiguously, whatever its outputs: the attention's
#      scores (a head's query against each key row, 576 long, outputs heads x the keys so far) go from GROUPTOP 16 (each lane
#      36 consecutive floats) to UNROLL 4, GROUP 16 (r_16_(start_pos+1)_16_9_4; rendered for sm_90, the only kernel of
#      DeepSeek-V2-Lite's generated decode that changes). The generated decode of $PRESETS (default all three),
#      GROUP_COAL_ANY $VARIANTS (default 0 1 1 0; a kernel cache a variant), then greedy tokens unless NOCHECK is set
#  24: EXPERIMENT experiments/mv-exact-group.diff (MVX=0 the matvec rule as it is): the packed matvec rule groups the longest
#      reduce range with 32 or 16 lanes where either divides it before padding it to 32 (DeepSeek-V2-Lite's shared Q6_K down,
#      176 chunks: PADTO 192, GROUP 32, UPCAST 2, LOCAL 4 -> GROUP 16, LOCAL 4; the only kernel of its generated decode that
#      changes, rendered for sm_90). Alone (call5, 2026-12-01) GROUP 16 took 5.0 / 4.6 us with 2 / 4 rows a thread against the
#      heuristics' 6.5. The product alone (MVX 0 and 1, and those two picks), then the generated decode of DeepSeek-V2-Lite,
#      MVX $VARIANTS (default 0 1 1 0; a kernel cache a variant)
#  25: EXPERIMENTS 23 and 24 in one call: both diffs applied, (GROUP_COAL_ANY MVX) in $VARIANTS (default 00 10 11 11 10 00;
#      a kernel cache a variant): 00 -> 10 is the scores' coalesced group (both models), 10 -> 11 the exact matvec group
#      (DeepSeek-V2-Lite's shared Q6_K down; GLM-4.7-Flash's kernels unchanged, a repeat); the generated decode and 16-token
#      prompts of the MoE models, then both on: greedy tokens on the tiny presets unless NOCHECK is set
#  26: patch 67's form for any outputs (the series now) against its form for constant outputs only
#      (experiments/group-coalesced-any-off.diff, GROUP_COAL_ANY=0): the generated decode of $PRESETS (default Youtu-LLM-2B and
#      GLM-4.7-Flash: step 25 measured DeepSeek-V2-Lite), GROUP_COAL_ANY $VARIANTS (default 0 1 1 0; a kernel cache a variant)
#  27: the CLI's start with its device opened on a thread from its first lines (apps.open_early) against the device opened
#      after the imports, before the load (experiments/no-early-open.diff in A, a copy of the tree): tools.start_time --cli
#      (llm.py -p to its first printed byte, and the loader's own times) of Youtu-LLM-2B, --repeat 3, A B B A; with LLAMA set,
#      llama.cpp is built beside them (carry .cache/llama/llama-cpp-src.tar.xz) and B runs the three models with --llama last
#  28: BEAM=2 on the whole generated decode step of $PRESETS (default GLM-4.7-Flash, then DeepSeek-V2-Lite while time is left),
#      beside BEAM=0 in the same call (bench_block.py --only decode --pos 32: a step's own time; BEAM's picks in a fresh
#      kernel cache): the issue's decode target with BEAM is the search's best
#  29: where a batched decode step of DeepSeek-V2-Lite goes on the hand-written path (8 sequences: 1,327 tok/s against
#      llama-batched-bench's 1,283, the issue's aim 2x; one sequence 706): tools.profile's as-run step and per-kernel table at
#      --batch 8 and --batch 1, then Nsight Compute's device times of the batch-8 step while time is left (step 1's ncu_decode)
#  30: the generated path's chunk products with the weights' int8 quants held from the load (QuantizedLinear.hold_quants), not
#      made by each chunk: A = the tree less experiments/held-quants.diff (a copy), B = the tree; gpu_bench --kernels generated
#      of Youtu-LLM-2B (decode 32, prefill 512) in A B B A while llama.cpp builds, then B beside llama.cpp (--llama); then
#      $MORE (default the MoE models) in B and A while time is left (a kernel cache a variant)
#  31: step 30's A/B again on Youtu-LLM-2B alone, A B A B, nothing else on the host (step 30's first runs shared it with
#      llama.cpp's build), the held quants realized in one schedule at the load
#  32: [rejected, call39] the hand-written decode matvec's routed experts of several tokens with a row group's (slot, token) pairs as neighbouring
#      workgroups (EXPERIMENT experiments/expert-pairs.diff, its emulator test in it: the pairs that picked one expert read its
#      rows together; the grid kept each slot's pairs apart): A = the tree, B = the tree with the diff (a copy); gpu_bench
#      --batch 1,2,4,8 of $PRESETS (default DeepSeek-V2-Lite; GLM-4.7-Flash in a call of its own), A B B A (one token's kernels are
#      the same in both)
#  33: [rejected, call37] EXPERIMENT experiments/routing-one-kernel.diff: the portable routing's selection in one kernel (each of the k outputs
#      counts the ranks it needs: k x n x n compares) where it ranked in one kernel and picked in another, and its weights with
#      their sum in one more, beside it, where they gathered after the selection and summed apart (rendered for sm_90,
#      generated decode: GLM-4.7-Flash-tiny 159 -> 151 kernels, 133 -> 129 on the critical path; DeepSeek-V2-Lite-tiny 808 ->
#      782, 676 -> 650): abdiff (the generated decode step at position 32) of $PRESETS (default the MoE models)
#  34: [rejected, call37] EXPERIMENT experiments/decode-softmax-in-values.diff: a generated decode step's attention without a kernel of the
#      probabilities (the values' product takes exp(s - max) itself and divides by their sum after it: GLM-4.7-Flash-tiny 159
#      -> 154 kernels rendered for sm_90, the critical path 133 -> 128; each of the values' threads takes the exp of its keys'
#      scores, a cost that grows with the depth): abdiff of $PRESETS (default GLM-4.7-Flash) at positions 32 and 4000
#  35: [rejected, call38] EXPERIMENT experiments/norm-one-kernel.diff: rms_norm of up to 8 rows as one kernel (the mean written once for each
#      output, the row expanded over them: each workgroup sums the row itself) where it was a reduction and a scaling kernel
#      (rendered for sm_90, generated decode: GLM-4.7-Flash 1,503 -> 1,314 kernels, the critical path 1,225 -> 1,083;
#      DeepSeek-V2-Lite-tiny 808 -> 726, Youtu-LLM-2B-tiny 100 -> 83): abdiff of $PRESETS (default all three) at position 32;
#      then the side-by-side step 18 on what lands
#  37: [rejected, call36] steps 33-35's diffs together (experiments/decode-fewer-kernels.diff: rendered for sm_90, generated decode GLM-4.7-Flash-tiny
#      159 -> 125 kernels, DeepSeek-V2-Lite-tiny 808 -> 673, Youtu-LLM-2B-tiny 100 -> 79; test_model.py's goldens pass with it on
#      the CPU): abdiff of $PRESETS (default all three) at position 32. First in the next lease: if it gains, steps 33-35 say
#      which of the three do
#  38: where step 37's B lost (GLM-4.7-Flash 4.2 -> 21.3 ms a decode step, Youtu-LLM-2B 2.1-2.3 -> 2.6-2.8): tools.profile's
#      per-kernel table of the combined diff's generated decode token on $PRESETS (default GLM-4.7-Flash, Youtu-LLM-2B), then
#      each of steps 33-35's diffs alone, bench_block once a model
#  39: the generated decode step of $PRESETS (default GLM-4.7-Flash) under Nsight Compute, as the tree is (step 1's profile)
#  40: [rejected, call42] EXPERIMENT experiments/expert-picks-gemm.diff: a batched decode step's routed experts of more than 32 (token, expert)
#      picks take the tensor-core GEMM (DeepSeek-V2-Lite at 8 sequences: 48 picks; GLM-4.7-Flash's 32 keep the matvecs):
#      gpu_bench --batch $BATCH (default 8) of $PRESETS (default DeepSeek-V2-Lite), A B B A
#  41: [landed as patches/0068, call43; the diff no longer applies] EXPERIMENT experiments/short-row-group.diff (the heuristic): the matvec rule's group of a row of up to 8 packed blocks is
#      all of them (GLM-4.7-Flash's k_b, 6 blocks: GROUP 6 LOCAL 8 where it was GROUP 2 LOCAL 32, 4.5 us a call at 250 GB/s):
#      abdiff of $PRESETS (default GLM-4.7-Flash) at position 32
#  42: [rejected, call47] EXPERIMENT experiments/short-row-warps.diff (the heuristic, on patch 69): the matvec rule's workgroup of a group that is not
#      a power of two takes whole warps (GLM-4.7-Flash's k_b: GROUP 6 with LOCAL 16, 96 threads, where patch 68 gives LOCAL 8, 48
#      threads, a warp half empty); abdiff of $PRESETS (default GLM-4.7-Flash) at position 32
#  43: [landed as patches/0069, call44; the diff no longer applies] EXPERIMENT experiments/matvec-unroll-steps.diff (the heuristic, on patch 68): the matvec rule unrolls the blocks a thread
#      walks after the group's share where the body stays at most 512 products (GLM-4.7-Flash's attn_output: 5 steps of 2 rows,
#      whose loop issued each step's weight loads after the last step's math: SASS of the rendered kernel, 2 x LDG.128 a loop
#      step; unrolled, all 10 go out before the first barrier, 56 -> 118 registers): 8 of GLM-4.7-Flash's decode products, 7
#      of DeepSeek-V2-Lite's, 6 of Youtu-LLM-2B's change (rendered for sm_90). abdiff of $PRESETS (default all three) at 32
#  44: [measured, call45; the diff no longer applies] step 18 (the generated path beside llama.cpp; carry
#      .cache/llama/llama-cpp-src.tar.xz) with step 43's diff applied
#  45: [rejected, call47-48] EXPERIMENT experiments/matvec-unroll-1024.diff (the heuristic, on patch 69): the unrolled walk's body up to 1024 products,
#      not 512 (GLM-4.7-Flash's Q5_K shared gate_up and the dense down unroll too); abdiff of $PRESETS (default the MoE models)
#  46: step 42 on GLM-4.7-Flash, then step 45: one call
#  49: EXPERIMENT experiments/experts-split.diff (apps/kernels/gemm.py, apps/dispatch.py; its tests pass on the CPU emulator): a
#      batched decode step's routed experts on the tensor-core GEMM from 5 sequences on, in narrow tiles (8 or 16 entries x
#      64 rows, 128 with SwiGLU) with K in up to 4 slices, the down's expert mix as tensor ops after the slices' sum (the
#      journal's batch-8 profile: the routed matvecs, one per (token, expert) pick, are half of DeepSeek-V2-Lite's step; the
#      GEMM at 16 x 256 rows unsplit left 72 workgroups): gpu_bench --batch $BATCH (default 8,32) --prefill 512 of $PRESETS
#      (default DeepSeek-V2-Lite), A B B A (the agree column: each batched row's first 16 tokens against its tokens alone);
#      DIFF=experts-split-16.diff: the split experts up to 16 tokens only (call56: 8 sequences +7.5%, 32 -8.4%)
#  50: step 48's path check on the tree with experts-split.diff (a prompt's last chunk of 32 tokens takes the split experts too)
#  51: EXPERIMENT experiments/prefill-flash-expanded.diff (apps/kernels/mla_attention.py flash_prefill_kernel, its emulator tests,
#      bench_mla_attention's expanded rows): a prefill chunk's attention in the form expanded per head (keys 192 / 256 wide,
#      values 128 / 256) as flash attention on the tensor cores (tf32 x3, the scores in registers), against the absorbed
#      tensor-core kernel on the same chunk: bench_mla_attention --prefill 512 at 15872 / 4096 / 0 (the flash kernel with its
#      tensor-op expansions, and alone; its output against the expanded tensor ops'), then the same at 2048 tokens, 14336
#  52: EXPERIMENT experiments/gemm-strided-x.diff (apps/kernels/gemm.py: the x quantization reads rows x_stride apart, so the
#      tensor-core GEMM takes a strided input: q_b's normed q_a inside [q_a; kv_a], k_b's q_nope inside q): a batched step
#      of 5-8 sequences runs them on the tensor cores, not as 8-token matvecs (DeepSeek-V2-Lite's k_b 14.8 us a layer at 8,
#      the journal's batch-8 profile), and a prompt's chunk without the copy (and the norm kernels) before them:
#      gpu_bench --batch 8 --decode 32 --prefill 512 of $PRESETS (default Youtu-LLM-2B, DeepSeek-V2-Lite), A B B A; then
#      PRESETS=... step 48's path check with the diff (PATHS=1)
#  53: EXPERIMENT experiments/prefill-flash-model.diff (step 51's kernel and, in apps/mla.py / model.py, the hand-written path's
#      long chunks (those expands_latents gives: 512 tokens) on it: the keys and values of rows 0..start_pos + T - 1 expanded
#      per head by two tensor-op products into the model's zeroed buffers (Transformer.expanded), the flash kernel over
#      them): gpu_bench --depths 4096,16384 --decode 32 --prefill 512 of $PRESETS (default Youtu-LLM-2B), A B B A; with
#      PATHS=1 the full-size path check of the diff (a 600-token depth: its 512-token chunk takes the flash kernel)
#  54: EXPERIMENT experiments/staging-pieces.diff (apps/readback.py, apps/packed.py): uploads through the pinned slots in pieces
#      of at most 32 MB (readback.CHUNK), a tensor's file blocks memmoved from the mapping into a slot a piece at a time and
#      split on the device a piece at a time, so the two slots are pinned at 32 MB, not at the largest upload (~150 MB each:
#      156 ms of cuMemHostAlloc before the first tensor, call16's profile); the lent-slot path goes. First the weights as
#      loaded: each preset's greedy text of one prompt in A and B (a misplaced piece changes it); then tools.start_time
#      --repeat 3 of $PRESETS (default Youtu-LLM-2B, DeepSeek-V2-Lite), A B B A (the load's phases and GB/s)
#  55: EXPERIMENT (variants made here by sed): the decode attend kernel at two workgroups an SM. It takes 169 registers a
#      thread (8 warps, 43k registers: one workgroup an SM, 8 warps, latency-bound at depth, the journal); __launch_bounds__(256,
#      2) holds it to 128 (ptxas sm_90: 152 bytes of spill stores for the 16-head shape, 564 for GLM-4.7-Flash's 20 at 96),
#      and 256 splits give the second workgroup work (256 splits at one an SM lost: 2026-11-27). bench_mla_attention --pos
#      32,4095,16383,32767 with variants mb2 (128 registers), s256 (256 splits), s256mb2 (both); then, where one wins at depth
#      and holds at 32, Youtu-LLM-2B's decode at depth with it in a copy of the tree (gpu_bench --depths 4096,16384, A B B A)
#  56: which patch breaks DeepSeek-V2-Lite's generated path at full size (call49: prefill vs generated 1.27, argmax 0/32 at
#      depth 0, where the tiny presets agree and GLM-4.7-Flash holds 1.7e-5): tools.path_check of DeepSeek-V2-Lite at depth 0
#      on trees of the first N patches ($UPTOS, each its own copy and kernel cache, side by side on the one GPU), and
#      path_check --blocks on the whole series (which block's attention or feed-forward parts first)
#  57: the series with patch 0070 (an unrolled padded reduction keeps its unmasked steps): llama.cpp built in the background
#      (carry .cache/llama/llama-cpp-src.tar.xz) while tools.path_check runs at depth 0 on the three models and at 600 on
#      DeepSeek-V2-Lite; then DeepSeek-V2-Lite's generated path beside llama.cpp (gpu_bench --kernels generated --llama)
#  58: EXPERIMENT experiments/decode-mma.diff (apps/kernels/mla_attention.py decode_mma_kernel, mla_decode_attention_mma;
#      its emulator tests; bench_mla_attention's "tensor cores" row): a decode token's scores and value product on the
#      tensor cores, the heads an m16 tile, the keys split as attend_kernel splits them, then its combine. bench_mla_attention
#      --pos 32,4095,16383,32767 (the row's rel err against float64 on the host; the tensor-op reference's us beside it)
#  59: step 53 on the MoE models, the flash prefill in the tree (B; A = a copy without prefill-flash-model.diff): the full-size
#      path check at a 600-token depth (its 512-token chunk takes the flash kernel), then gpu_bench --depths 4096,16384 of
#      $PRESETS (default DeepSeek-V2-Lite, GLM-4.7-Flash) in $VARIANTS (default A B)
#  60: long prompts in longer chunks (the flash prefill's expansions of the context's rows are paid once a chunk): gpu_bench
#      --depths 4096,16384 --chunks C of $PRESETS (default Youtu-LLM-2B, DeepSeek-V2-Lite) for C in $CHUNKS (default the
#      model's 512,128,32, then 2048,512,128,32 and 1024,512,128,32)
#  61: one call for the flash prefill in the tree: the path check of DeepSeek-V2-Lite and GLM-4.7-Flash at a 600-token depth,
#      their prompts of 4096 and 16384 tokens, then Youtu-LLM-2B's in chunks of 2048 (step 60's first variant)
#  62: long prompts and decode at depth beside llama.cpp in one run (carry .cache/llama/llama-cpp-src.tar.xz too), the flash
#      prefill in the tree: gpu_bench --llama --depths 4096,16384 of $PRESETS (default Youtu-LLM-2B, DeepSeek-V2-Lite; then
#      PRESETS=glm-4.7-flash), llama.cpp built while the files are synthesized
#  63: EXPERIMENT experiments/long-chunks.diff (apps/model.py: one sequence on the tensor cores' hand-written path prefills in
#      chunks of 2048 too, a server's model of several keeps 512; "fit" counts no per-key scores there): with PATHS=1 the
#      path check at a 2600-token depth (a chunk of 2048, then 512), then gpu_bench --depths 4096,16384 of $PRESETS (default
#      Youtu-LLM-2B, GLM-4.7-Flash: its chunks of 2048 take the flash kernel) in $VARIANTS (default A B); step 60 measures the
#      chunk lengths alone (gpu_bench --chunks) without the diff
#  64: EXPERIMENT the decode attend kernel with 4 keys a step of a warp (TT = 4, not 2): each warp sum's shuffle chain then
#      serves 4 keys of a head, where call56 found the kernel bound by its chains at one workgroup an SM, not by its
#      instructions or bytes (sm_90: 207 registers, no spills; the emulated decode and prefill tests pass with it):
#      bench_mla_attention --pos 32,4095,16383,32767 with the variant and with it at 16 rows a stage (tt4s16: 36 KB, past
#      Metal's 32 KB; 14 rows of 576 floats leave a step of 4 half masked); with MODEL=1 Youtu-LLM-2B's decode at 4k / 16k A B B A
#  65: the decode attend kernel at 16k keys under Nsight Compute's full set (Youtu-LLM-2B's decode step at position 16383:
#      warp states, stall reasons, issue slots, DRAM throughput), what bounds it (call56: not its instructions, not its bytes);
#      VARIANT=tt4 after step 64 in the same call: the same for its variant
#  48: FIRST on the next lease: the full-size paths against each other on the series of 69 (tools.path_check: prefill,
#      decode and generated logits of the three models, depth 0 and 600): patch 69's unrolled products at full size
#  47: [rejected, call46] EXPERIMENT experiments/prefill-keys-stages.diff (patch 70: a program carries its dynamic shared memory;
#      apps/kernels: DYN_SHARED, SourceKernel.smem, the tensor-core prefill attention's `keys` a stage) applied to the tree,
#      then MMA_KEYS 8 -> 16 as B: two n8 tiles of scores between barriers (90.6 KB of workgroup memory, dynamic). The
#      attention alone (bench_mla_attention --prefill 512 at 15872 / 4096 / 0, the three shapes, the 16-key kernel as a
#      variant), then Youtu-LLM-2B's prompts of 4096 and 16384 tokens (gpu_bench --depths), A B B A
#   5: EXPERIMENT experiments/norm-fuse.diff (NORM_FUSE=0 the tree as it is): a decode product's norm inside it on the
#      generated path (x * norm_w where the product reads x, which patch 63 stages once a workgroup; the rows' 1 / rms from
#      one reduction kernel before, applied at the store): the norm's scale kernel goes where one product reads the normed x
#      (attn_norm's [q; kv_a], q_a_norm's q_b, the router). Rejected at -6% / +1% on an H100 before patch 63 (2026-11-27).
#      The generated decode and prefill 512 of $PRESETS (the MoE models), NORM_FUSE $VARIANTS (0 1 0; a kernel cache a variant:
#      three runs of both fit a call); greedy tokens
case $1 in
  1) python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     synth deepseek-v2-lite glm-4.7-flash; echo "synthesized $(date +%T)"
     ncu_decode deepseek-v2-lite 300; echo "$(date +%T)"
     ncu_decode glm-4.7-flash 120; echo "$(date +%T)"
     timeout $(($(left) - 5)) python3 -m tools.beam_kernels --model deepseek-v2-lite --kernels generated --target decode --pos 32 --top 8 --beam 2 \
       2>&1 | tee "$OUT/beam_dec_deepseek-v2-lite.txt" | tail -30 ;;
  2) patch -s -p1 < runs/2026-12-01-gen/experiments/chunk-mod.diff || exit 1
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     (synth deepseek-v2-lite glm-4.7-flash; echo "synthesized $(date +%T)") &
     for c in 0 1; do
       echo "-- CHUNK_MOD=$c products"
       CHUNK_MOD=$c CACHEDB=$(mktemp -d)/cache.db timeout 100 python3 -m tools.bench_quantized --kernels generated --types Q6_K,Q5_K --dtype float \
         --rounds 3 --shapes 2048:2816:r,5632:2048,2048:1536:r,3072:2048,102400:2048 2>&1 | tail -12
     done
     wait
     for c in 0 1 1 0; do
       echo "-- CHUNK_MOD=$c $(date +%T)"; mkdir -p /tmp/cm$c
       CHUNK_MOD=$c CACHEDB=/tmp/cm$c/cache.db timeout $(($(left) - 30)) python3 -m tools.gpu_bench --kernels generated \
         --presets deepseek-v2-lite,glm-4.7-flash --decode 32 --prefill 512 --json "$OUT/cm_$c.$RANDOM.json" 2>&1 | grep -v '^{' | tail -3
     done
     CHUNK_MOD=1 timeout $(($(left) - 2)) python3 -m tools.gpu_check release --kernels generated 2>&1 | tail -4 ;;
  3) (python3 -m tools.llama_bench build --time-limit 330 > "$OUT/llama_build.log" 2>&1) &
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash; echo "synthesized $(date +%T)"
     wait; tail -2 "$OUT/llama_build.log"; echo "built $(date +%T)"
     timeout $(($(left) - 3)) python3 -m tools.start_time --presets youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash --llama --json "$OUT/start.json" 2>&1 \
       | tee "$OUT/start.log" | tail -14 ;;
  4) python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     timeout 150 python3 -m tools.bench_quantized --kernels generated --types Q6_K --dtype float --rounds 4 --shapes 2048:2816:r \
       --opts heur R3:0,R1:0,R1:0,G0:16,U0:2,L0:4 R3:0,R1:0,R1:0,G0:16,U0:4,L0:4 R3:0,R1:0,R1:0,G0:16,U0:2,L0:8 2>&1 | tail -7
     synth glm-4.7-flash
     ncu_decode glm-4.7-flash 5 ;;
  6) python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     synth youtu-llm-2b; echo "synthesized $(date +%T)"
     ncu_decode youtu-llm-2b 330 prompt --chunk 512 --pos 0; echo "$(date +%T)"
     DEADLINE=$(left) exec bash runs/2026-12-01-gen/run.sh 4 ;;
  7) python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     cp apps/dispatch.py /tmp/dispatch_B.py; git show HEAD:apps/dispatch.py > /tmp/dispatch_A.py
     P=${PRESETS:-deepseek-v2-lite,glm-4.7-flash}
     synth ${P//,/ }; echo "synthesized $(date +%T)"
     for v in ${VARIANTS:-A B B A}; do
       echo "-- $v $(date +%T)"; mkdir -p /tmp/c$v; cp /tmp/dispatch_$v.py apps/dispatch.py
       CACHEDB=/tmp/c$v/cache.db timeout $(($(left) - ${MARGIN:-50})) python3 -m tools.gpu_bench --kernels generated \
         --presets $P --decode ${DECODE:-32} --prefill ${PREFILL:-16} --json "$OUT/nf65_$v.$RANDOM.json" 2>&1 | grep -v '^{' | grep -v "^x \|^$" | tail -4
     done
     cp /tmp/dispatch_B.py apps/dispatch.py
     [ -z "$NOCHECK" ] && timeout $(($(left) - 2)) python3 -m tools.gpu_check release --kernels generated 2>&1 | tail -4 ;;
  8) patch -s -p1 -d upstream < runs/2026-12-01-gen/experiments/stage-whole.diff || exit 1
     patch -s -p1 < runs/2026-12-01-gen/experiments/norm-shared.diff || exit 1
     PRESETS=${PRESETS:-youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash} DEADLINE=$(left) exec bash runs/2026-12-01-gen/run.sh 7 ;;
  9) python3 -m compileall -q upstream/tinygrad apps tools runs > /dev/null
     synth youtu-llm-2b
     python3 -X importtime -c "import apps; from apps import engine; from tinygrad import Device" 2> "$OUT/importtime.txt"
     sort -t'|' -k2 -n -r "$OUT/importtime.txt" | head -40 > "$OUT/importtime_top.txt"; head -12 "$OUT/importtime_top.txt"
     python3 runs/2026-12-01-gen/prof_load.py youtu-llm-2b > "$OUT/prof_load.txt" 2>&1; head -3 "$OUT/prof_load.txt"
     timeout $(($(left) - 2)) python3 -m tools.start_time --presets youtu-llm-2b --json "$OUT/start.json" 2>&1 | tail -3 ;;
  10) python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     synth deepseek-v2-lite
     timeout $(($(left) - 5)) ncu --profile-from-start off --set full --launch-count 10 \
       --kernel-name regex:"q4_0_experts|q5_k_linear_1_1_5632|q6_k_linear_1_1_2048_2816|f32_linear" \
       python3 -m tools.profile --model deepseek-v2-lite --kernels generated --target decode --pos 32 --repeat 1 --count 2 --ncu \
       > "$OUT/ncu_full_dec.txt" 2>&1
     grep -E "^  [a-z_0-9]+\(|Duration|Registers Per|Achieved Occupancy|DRAM Throughput|Memory Throughput|Warp Cycles Per Issued|Theoretical Occ|Block Limit|Grid Size|Block Size|Dynamic Shared|Static Shared" \
       "$OUT/ncu_full_dec.txt" | head -150 ;;
  11) patch -s -p1 -d upstream < runs/2026-12-01-gen/experiments/stage-whole.diff || exit 1
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     cp apps/dispatch.py /tmp/dispatch_A.py; patch -s -p1 < runs/2026-12-01-gen/experiments/norm-shared.diff || exit 1
     cp apps/dispatch.py /tmp/dispatch_B.py
     M=${MODEL:-deepseek-v2-lite}; synth $M
     for v in A2 B1; do
       d=${v:1}; v=${v:0:1}; echo "-- $v $(date +%T)"; mkdir -p /tmp/c$v; cp /tmp/dispatch_$v.py apps/dispatch.py
       CACHEDB=/tmp/c$v/cache.db timeout $(( ($(left) - 5) / d )) python3 -m tools.profile --model $M --kernels generated \
         --target decode --pos 32 --repeat 5 --count 20 --top 60 > "$OUT/prof_$v.txt" 2>&1; head -30 "$OUT/prof_$v.txt"
     done ;;
  12) patch -s -p1 -d upstream < runs/2026-12-01-gen/experiments/stage-whole.diff || exit 1
     patch -s -p1 < runs/2026-12-01-gen/experiments/norm-shared.diff || exit 1
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     synth deepseek-v2-lite; ncu_decode deepseek-v2-lite 5 ;;
  13) python3 -m compileall -q upstream/tinygrad apps tools runs > /dev/null
     synth youtu-llm-2b
     timeout $(($(left) - 2)) python3 -m tools.start_time --presets youtu-llm-2b --repeat 3 --calls --json "$OUT/start.json" 2>&1 | tail -20 ;;
  14) [ -n "$LLAMA" ] && (python3 -m tools.llama_bench build --time-limit 330 > "$OUT/llama_build.log" 2>&1) &
     export TINYGRAD_MLA_CACHE=$PWD/.cache
     tree /tmp/A && git -C /tmp/A checkout -q HEAD -- apps
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     M=${MORE-deepseek-v2-lite,glm-4.7-flash}
     synth youtu-llm-2b ${M//,/ }; echo "synthesized $(date +%T)"
     for v in A B B A; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 60)) python3 -m tools.start_time --presets youtu-llm-2b --json "$OUT/st_$v.$RANDOM.json" 2>&1 | tail -2)
     done
     wait
     for v in B A; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $(date +%T)"; extra=; [ -n "$LLAMA" ] && [ $v = A ] && extra=--llama
       [ -n "$M" ] && (cd $d && timeout $(($(left) - 3)) python3 -m tools.start_time --presets $M $extra --json "$OUT/stm_$v.json" 2>&1 | tail -4)
     done ;;
  15) patch -s -p1 < runs/2026-12-01-gen/experiments/chunk-factor.diff || exit 1
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     cp apps/dispatch.py /tmp/dispatch_B.py; git show HEAD:apps/dispatch.py > /tmp/dispatch_A.py
     for v in A B A B; do
       echo "-- products $v"; cp /tmp/dispatch_$v.py apps/dispatch.py
       timeout 60 python3 -m tools.bench_quantized --kernels generated --types Q4_0,Q8_0,Q5_0 --dtype float --rounds 1 \
         --shapes 2816:2048,2048:1408:r,3648:2048,2048:2048:r 2>&1 | grep -E "^ *Q"
     done
     cp /tmp/dispatch_B.py apps/dispatch.py
     PRESETS=${PRESETS:-youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash} DEADLINE=$(left) exec bash runs/2026-12-01-gen/run.sh 7 ;;
  16) [ -n "$LLAMA" ] && (python3 -m tools.llama_bench build --time-limit 330 > "$OUT/llama_build.log" 2>&1) &
     export TINYGRAD_MLA_CACHE=$PWD/.cache
     tree /tmp/B lazy-jinja.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     synth youtu-llm-2b; echo "synthesized $(date +%T)"
     for v in A B B A ${LLAMA:+L}; do
       d=.; [ $v = B ] && d=/tmp/B; extra=; [ $v = L ] && wait && d=/tmp/B && extra=--llama   # L: B beside llama.cpp
       echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 5)) python3 -m tools.start_time --presets youtu-llm-2b --repeat 5 $extra --json "$OUT/sj_$v.$RANDOM.json" 2>&1 | tail -2)
     done ;;
  17) python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     cp apps/mla.py /tmp/mla_B.py; git show HEAD:apps/mla.py > /tmp/mla_A.py
     synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash; echo "synthesized $(date +%T)"
     for v in A B B A; do
       echo "-- $v $(date +%T)"; mkdir -p /tmp/r$v; cp /tmp/mla_$v.py apps/mla.py
       CACHEDB=/tmp/r$v/cache.db timeout $(($(left) - 150)) python3 -m tools.gpu_bench --kernels generated \
         --presets youtu-llm-2b,deepseek-v2-lite --decode 32 --prefill 16 --json "$OUT/rt_$v.$RANDOM.json" 2>&1 | grep -v '^{' | grep -v "^x \|^$" | tail -3
     done
     cp /tmp/mla_B.py apps/mla.py
     timeout $(($(left) - 3)) python3 -m tools.profile --model glm-4.7-flash --kernels generated --target decode --pos 32 --repeat 5 \
       --count 20 --top 60 > "$OUT/prof_glm.txt" 2>&1; head -12 "$OUT/prof_glm.txt" ;;
  18) (python3 -m tools.llama_bench build --time-limit 330 > "$OUT/llama_build.log" 2>&1) &
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash; echo "synthesized $(date +%T)"
     timeout 100 python3 -m tools.gpu_check release --kernels generated 2>&1 | tail -4
     wait; tail -2 "$OUT/llama_build.log"; echo "built $(date +%T)"
     timeout $(($(left) - 3)) python3 -m tools.gpu_bench --kernels generated --llama --decode 32 --prefill 512 --json "$OUT/side_gen.json" 2>&1 \
       | tee "$OUT/side_gen.log" | grep -v '^{' | tail -8 ;;
  19) patch -s -p1 -d upstream < runs/2026-12-01-gen/experiments/mv-multi.diff || exit 1
     patch -s -p1 < runs/2026-12-01-gen/experiments/chunk-mod.diff || exit 1
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     (synth deepseek-v2-lite glm-4.7-flash; echo "synthesized $(date +%T)") &
     for v in "0 0" "1 1" "1 0"; do
       set -- $v; echo "-- products CHUNK_MOD=$1 MV_MULTI=$2 $(date +%T)"
       CHUNK_MOD=$1 MV_MULTI=$2 CACHEDB=$(mktemp -d)/cache.db timeout 80 python3 -m tools.bench_quantized --kernels generated --types Q6_K,Q5_K \
         --dtype float --rounds 3 --shapes 2048:2816:r,5632:2048,2048:1536:r,3072:2048,102400:2048 2>&1 | grep -E "^Q" | tail -10
     done
     wait
     for v in 0 1; do
       echo "-- CHUNK_MOD=MV_MULTI=$v $(date +%T)"; mkdir -p /tmp/mm$v
       CHUNK_MOD=$v MV_MULTI=$v CACHEDB=/tmp/mm$v/cache.db timeout $(($(left) - 3)) python3 -m tools.gpu_bench --kernels generated \
         --presets deepseek-v2-lite,glm-4.7-flash --decode 32 --prefill 16 --json "$OUT/mm_$v.json" 2>&1 | grep -v '^{' | grep -v "^x \|^$" | tail -3
     done ;;
  20) patch -s -p1 < runs/2026-12-01-gen/experiments/shared-beside.diff || exit 1
     DEADLINE=$(left) exec bash runs/2026-12-01-gen/run.sh 7 ;;
  21) patch -s -p1 < runs/2026-12-01-gen/experiments/chunk-split-tokens.diff || exit 1
     DEADLINE=$(left) exec bash runs/2026-12-01-gen/run.sh 7 ;;
  22) patch -s -p1 -d upstream < runs/2026-12-01-gen/experiments/group-coalesced.diff || exit 1
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     (synth deepseek-v2-lite glm-4.7-flash; echo "synthesized $(date +%T)") &
     GROUP_COAL=0 CACHEDB=$(mktemp -d)/cache.db timeout 60 python3 -m tools.bench_quantized --kernels generated --types F32 --dtype float \
       --rounds 3 --shapes 64:2048 --opts heur R0:4,G0:64 R0:4,G0:128 R0:4,G0:256 2>&1 | grep -E "^ *F32|heur|R0" | tail -8
     wait
     for v in ${VARIANTS:-0 1 1 0}; do
       echo "-- GROUP_COAL=$v $(date +%T)"; mkdir -p /tmp/gc$v
       GROUP_COAL=$v CACHEDB=/tmp/gc$v/cache.db timeout $(($(left) - 3)) python3 -m tools.gpu_bench --kernels generated \
         --presets deepseek-v2-lite,glm-4.7-flash --decode 32 --prefill 16 --json "$OUT/gc_$v.$RANDOM.json" 2>&1 | grep -v '^{' | grep -v "^x \|^$" | tail -3
     done ;;
  23) patch -s -p1 -d upstream < runs/2026-12-01-gen/experiments/group-coalesced-any.diff || exit 1
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash}
     synth ${P//,/ }; echo "synthesized $(date +%T)"
     for v in ${VARIANTS:-0 1 1 0}; do
       echo "-- GROUP_COAL_ANY=$v $(date +%T)"; mkdir -p /tmp/ga$v
       GROUP_COAL_ANY=$v CACHEDB=/tmp/ga$v/cache.db timeout $(($(left) - ${MARGIN:-50})) python3 -m tools.gpu_bench --kernels generated \
         --presets $P --decode 32 --prefill 16 --json "$OUT/ga_$v.$RANDOM.json" 2>&1 | grep -v '^{' | grep -v "^x \|^$" | tail -4
     done
     [ -z "$NOCHECK" ] && GROUP_COAL_ANY=1 timeout $(($(left) - 2)) python3 -m tools.gpu_check release --kernels generated 2>&1 | tail -4 ;;
  24) patch -s -p1 -d upstream < runs/2026-12-01-gen/experiments/mv-exact-group.diff || exit 1
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     (synth deepseek-v2-lite; echo "synthesized $(date +%T)") &
     for v in 0 1; do
       MVX=$v CACHEDB=$(mktemp -d)/cache.db timeout 60 python3 -m tools.bench_quantized --kernels generated --types Q6_K --dtype float \
         --rounds 3 --shapes 2048:2816:r --opts heur $([ $v = 1 ] && echo R3:0,R1:0,R1:0,G0:16,U0:2,L0:4 R3:0,R1:0,R1:0,G0:16,U0:4,L0:4) 2>&1 | grep -E "^Q6" | tail -3
     done
     wait
     for v in ${VARIANTS:-0 1 1 0}; do
       echo "-- MVX=$v $(date +%T)"; mkdir -p /tmp/mx$v
       MVX=$v CACHEDB=/tmp/mx$v/cache.db timeout $(($(left) - 3)) python3 -m tools.gpu_bench --kernels generated \
         --presets deepseek-v2-lite --decode 32 --prefill 16 --json "$OUT/mx_$v.$RANDOM.json" 2>&1 | grep -v '^{' | grep -v "^x \|^$" | tail -2
     done ;;
  25) patch -s -p1 -d upstream < runs/2026-12-01-gen/experiments/group-coalesced-any.diff || exit 1
     patch -s -p1 -d upstream < runs/2026-12-01-gen/experiments/mv-exact-group.diff || exit 1
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     synth deepseek-v2-lite glm-4.7-flash; echo "synthesized $(date +%T)"
     for v in ${VARIANTS:-00 10 11 11 10 00}; do
       a=${v:0:1} m=${v:1:1}; echo "-- GROUP_COAL_ANY=$a MVX=$m $(date +%T)"; mkdir -p /tmp/v$v
       GROUP_COAL_ANY=$a MVX=$m CACHEDB=/tmp/v$v/cache.db timeout $(($(left) - ${MARGIN:-45})) python3 -m tools.gpu_bench --kernels generated \
         --presets deepseek-v2-lite,glm-4.7-flash --decode 32 --prefill 16 --json "$OUT/v_$v.$RANDOM.json" 2>&1 | grep -v '^{' | grep -v "^x \|^$" | tail -3
     done
     [ -z "$NOCHECK" ] && GROUP_COAL_ANY=1 MVX=1 timeout $(($(left) - 2)) python3 -m tools.gpu_check release --kernels generated 2>&1 | tail -4 ;;
  26) patch -s -p1 -d upstream < runs/2026-12-01-gen/experiments/group-coalesced-any-off.diff || exit 1
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     P=${PRESETS:-youtu-llm-2b,glm-4.7-flash}
     synth ${P//,/ }; echo "synthesized $(date +%T)"
     for v in ${VARIANTS:-0 1 1 0}; do
       echo "-- GROUP_COAL_ANY=$v $(date +%T)"; mkdir -p /tmp/ga$v
       GROUP_COAL_ANY=$v CACHEDB=/tmp/ga$v/cache.db timeout $(($(left) - 3)) python3 -m tools.gpu_bench --kernels generated \
         --presets $P --decode 32 --prefill 16 --json "$OUT/ga_$v.$RANDOM.json" 2>&1 | grep -v '^{' | grep -v "^x \|^$" | tail -3
     done ;;
  27) [ -n "$LLAMA" ] && (python3 -m tools.llama_bench build --time-limit 330 > "$OUT/llama_build.log" 2>&1) &
     export TINYGRAD_MLA_CACHE=$PWD/.cache
     tree /tmp/A no-early-open.diff || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     synth youtu-llm-2b ${LLAMA:+deepseek-v2-lite glm-4.7-flash}; echo "synthesized $(date +%T)"
     spare=0; [ -n "$LLAMA" ] && spare=150
     for v in A B B A; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - spare)) python3 -m tools.start_time --presets youtu-llm-2b --repeat 3 --cli --json "$OUT/cli_$v.$RANDOM.json" 2>&1 | tail -2)
     done
     wait
     [ -n "$LLAMA" ] && timeout $(($(left) - 3)) python3 -m tools.start_time --presets youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash --cli --llama \
       --json "$OUT/cli_llama.json" 2>&1 | tail -6 ;;
  28) python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     P=${PRESETS:-glm-4.7-flash,deepseek-v2-lite}
     synth ${P//,/ }; echo "synthesized $(date +%T)"
     for m in ${P//,/ }; do
       for b in 0 2; do
         echo "-- $m BEAM=$b $(date +%T)"; mkdir -p /tmp/bm$b
         BEAM=$b CACHEDB=/tmp/bm$b/cache.db timeout $(($(left) - 3)) python3 bench_block.py 30 --rounds 3 --model $m --kernels generated \
           --only decode --pos 32 --json > "$OUT/beam${b}_$m.json" 2> "$OUT/beam${b}_$m.err"; tail -2 "$OUT/beam${b}_$m.err"
         python3 bench_block.py --markdown "$OUT/beam${b}_$m.json" 2>&1 | tail -1
       done
     done ;;
  29) python3 -m compileall -q upstream/tinygrad apps tools > /dev/null; M=${M:-deepseek-v2-lite}   # the step of 8 sequences of $M, kernel by kernel
     synth $M; echo "synthesized $(date +%T)"
     for b in 8 1; do
       timeout $(($(left) - 3)) python3 -m tools.profile --model $M --target decode --batch $b --pos 32 --repeat 3 --count 20 \
         --top 40 > "$OUT/prof_b$b.txt" 2>&1; head -8 "$OUT/prof_b$b.txt"
     done
     timeout $(($(left) - 3)) ncu --profile-from-start off --clock-control none --cache-control none \
       --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv --log-file "$OUT/ncu_b8.csv" \
       python3 -m tools.profile --model $M --target decode --batch 8 --pos 32 --repeat 3 --count 20 --ncu --json > "$OUT/rows_b8.json" 2> "$OUT/ncu_b8.err"
     python3 -m tools.profile --ncu-csv "$OUT/ncu_b8.csv" --rows "$OUT/rows_b8.json" --top 40 > "$OUT/ncu_b8.txt" 2>&1; head -6 "$OUT/ncu_b8.txt" ;;
  30) (python3 -m tools.llama_bench build --time-limit 300 > "$OUT/llama_build.log" 2>&1) &
     export TINYGRAD_MLA_CACHE=$PWD/.cache
     tree /tmp/A held-quants.diff -R || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     synth youtu-llm-2b; echo "synthesized $(date +%T)"
     hq() {  # hq VARIANT PRESETS [ARGS...]: gpu_bench of the generated path in A's copy or the tree, a kernel cache a variant
       local v=$1 p=$2 d=.; shift 2; [ $v = A ] && d=/tmp/A; mkdir -p /tmp/hq$v; echo "-- $v $p $(date +%T)"
       (cd $d && CACHEDB=/tmp/hq$v/cache.db timeout $(($(left) - 3)) python3 -m tools.gpu_bench --kernels generated --presets $p --decode 32 \
         --prefill 512 --json "$OUT/hq_$v.$RANDOM.json" "$@" 2>&1 | grep -v '^{' | tail -6)
     }
     for v in A B B A; do hq $v youtu-llm-2b; done
     wait; tail -2 "$OUT/llama_build.log"; echo "built $(date +%T)"
     hq B youtu-llm-2b --llama
     M=${MORE-deepseek-v2-lite,glm-4.7-flash}
     for m in ${M//,/ }; do synth $m; for v in B A; do [ $(left) -gt 90 ] && hq $v $m; done; done ;;
  31) export TINYGRAD_MLA_CACHE=$PWD/.cache
     tree /tmp/A held-quants.diff -R || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     synth youtu-llm-2b; echo "synthesized $(date +%T)"
     for v in A B A B; do
       d=.; [ $v = A ] && d=/tmp/A; mkdir -p /tmp/hq$v; echo "-- $v $(date +%T)"
       (cd $d && CACHEDB=/tmp/hq$v/cache.db timeout $(($(left) - 3)) python3 -m tools.gpu_bench --kernels generated --presets youtu-llm-2b \
         --decode 32 --prefill 512 2>&1 | grep youtu-llm-2b | tail -1)
     done ;;
  32) export TINYGRAD_MLA_CACHE=$PWD/.cache
     tree /tmp/B expert-pairs.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-deepseek-v2-lite}
     synth ${P//,/ }; echo "synthesized $(date +%T)"
     for v in A B B A; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch 1,2,4,8 --decode 32 --json "$OUT/pairs_$v.$RANDOM.json" 2>&1 \
         | grep -v '^{' | tail -10)
     done ;;
  33) abdiff route routing-one-kernel.diff ${PRESETS:-glm-4.7-flash,deepseek-v2-lite} 32 ;;
  34) abdiff soft decode-softmax-in-values.diff ${PRESETS:-glm-4.7-flash} 32,4000 ;;
  35) abdiff norm norm-one-kernel.diff ${PRESETS:-glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b} 32 ;;
  44) patch -s -p1 < runs/2026-12-01-gen/experiments/matvec-unroll-steps.diff || exit 1
      bash "$0" 18 ;;
  49) export TINYGRAD_MLA_CACHE=$PWD/.cache
     tree /tmp/B ${DIFF:-experts-split.diff} || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-deepseek-v2-lite}; synth ${P//,/ }; echo "synthesized $(date +%T)"
     for v in A B B A; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-8,32} --decode 32 --prefill 512 \
         --json "$OUT/split_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -8)
     done ;;
  50) patch -s -p1 < runs/2026-12-01-gen/experiments/experts-split.diff || exit 1
     python3 -m compileall -q apps tools > /dev/null
     bash "$0" 48 ;;
  51) patch -s -p1 < runs/2026-12-01-gen/experiments/prefill-flash-expanded.diff || exit 1
     python3 -m compileall -q apps tools > /dev/null
     timeout $(($(left) / 2)) python3 -m tools.bench_mla_attention --prefill 512 --pos 15872,4096,0 --layers 4 --iters 10 2>&1 \
       | tee "$OUT/flash512.txt" | grep -v '^$'
     timeout $(($(left) / 2)) python3 -m tools.bench_mla_attention --prefill 2048 --pos 14336 --layers 2 --iters 5 2>&1 \
       | tee "$OUT/flash2048.txt" | grep -v '^$'
     # the expansions' products on the tensor cores at fp32 accuracy (patched tinygrad's ALLOW_TF32=2: three tf32 products)
     ALLOW_TF32=2 timeout $(($(left) - 3)) python3 -m tools.bench_mla_attention --prefill 512 --pos 15872 --layers 4 --iters 10 2>&1 \
       | tee "$OUT/flash512_tf32.txt" | grep -v '^$' ;;
  52) export TINYGRAD_MLA_CACHE=$PWD/.cache
     tree /tmp/B gemm-strided-x.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; synth ${P//,/ }; echo "synthesized $(date +%T)"
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-8} --decode 32 --prefill 512 \
         --json "$OUT/xs_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -6)
     done
     if [ -n "$PATHS" ]; then (cd /tmp/B && timeout $(($(left) - 3)) python3 -m tools.path_check --presets $P --depth 0,600 2>&1 | tail -14); fi ;;
  53) export TINYGRAD_MLA_CACHE=$PWD/.cache
     tree /tmp/B prefill-flash-model.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b}; synth ${P//,/ }; echo "synthesized $(date +%T)"
     # the kernel's last 32 queries at 16k keys against float64 (the "vs f64" column; the tensor ops' too)
     (cd /tmp/B && timeout 150 python3 -m tools.bench_mla_attention --prefill 512 --pos 15872 --layers 2 --iters 5 2>&1 | tee "$OUT/flash_f64.txt" | grep -v '^$')
     if [ -n "$PATHS" ]; then (cd /tmp/B && timeout $(($(left) / 2)) python3 -m tools.path_check --presets $P --depth 0,600 2>&1 | tail -14); fi
     for v in A B B A; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --decode 32 --prefill 512 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/flashm_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -6)
     done ;;
  54) export TINYGRAD_MLA_CACHE=$PWD/.cache
     tree /tmp/B staging-pieces.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; synth ${P//,/ }; echo "synthesized $(date +%T)"
     for m in ${P//,/ }; do
       for v in A B; do d=.; [ $v = B ] && d=/tmp/B; (cd $d && timeout 150 python3 -m apps.llm --model $m -p "The capital of France is" \
         -n 24 --temperature 0 > /tmp/greedy_${m}_$v.txt 2>/dev/null); done
       cmp -s /tmp/greedy_${m}_A.txt /tmp/greedy_${m}_B.txt && [ -s /tmp/greedy_${m}_A.txt ] && echo "$m greedy: the same text" \
         || echo "$m greedy: DIFFERENT or empty"
     done
     for v in A B B A; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 5)) python3 -m tools.start_time --presets $P --repeat 3 --json "$OUT/pieces_$v.$RANDOM.json" 2>&1 | tail -3)
     done ;;
  55) mkdir -p /tmp/var && f=apps/kernels/mla_attention.py
     sed 's/^SPLITS = 128 /SPLITS = 256 /' $f > /tmp/var/s256.py
     sed 's/(SPLITS, rows, 1), (32, g, 1), _ROPE_LANE)$/(SPLITS, rows, 1), (32, g, 1), _ROPE_LANE, min_blocks=2)/' $f > /tmp/var/mb2.py
     sed 's/(SPLITS, rows, 1), (32, g, 1), _ROPE_LANE)$/(SPLITS, rows, 1), (32, g, 1), _ROPE_LANE, min_blocks=2)/' /tmp/var/s256.py > /tmp/var/s256mb2.py
     timeout $(($(left) / 3)) python3 -m tools.bench_mla_attention --pos 32,4095,16383,32767 --layers 8 --iters 30 \
       --variants /tmp/var/mb2.py,/tmp/var/s256.py,/tmp/var/s256mb2.py 2>&1 | tee "$OUT/attend_variants.txt" | grep -v '^$'
     if [ -n "$VARIANT" ]; then   # VARIANT=s256mb2 (a file above): the model's decode at depth with it, A B B A
       export TINYGRAD_MLA_CACHE=$PWD/.cache
       tree /tmp/B && cp /tmp/var/$VARIANT.py /tmp/B/$f
       python3 -m compileall -q /tmp/B/apps > /dev/null; synth youtu-llm-2b
       for v in A B B A; do
         d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
         (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets youtu-llm-2b --decode 32 --prefill 512 --depths 4096,16384 \
           --json "$OUT/attv_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -4)
       done
     fi ;;
  56) export TINYGRAD_MLA_CACHE=$PWD/.cache; synth deepseek-v2-lite; echo "synthesized $(date +%T)"
     for n in ${UPTOS:-56 62 63 65 66 67 68}; do
       tree /tmp/u$n
       (cd /tmp/u$n && python3 apply_patches.py --upto $n > /dev/null && TINYGRAD_UPTO=$n CACHEDB=/tmp/u$n/cache.db timeout $(($(left) - 10)) \
         python3 -m tools.path_check --presets deepseek-v2-lite --depth 0 --tokens 16 --skip 8 > /tmp/u$n.txt 2>&1) &
     done
     timeout $(($(left) - 10)) python3 -m tools.path_check --blocks deepseek-v2-lite --tokens 16 > "$OUT/blocks.txt" 2>&1 &
     wait
     for n in ${UPTOS:-56 62 63 65 66 67 68}; do echo "== upto $n"; grep -v Warn /tmp/u$n.txt | tail -3; done | tee "$OUT/bisect.txt"
     grep -v Warn "$OUT/blocks.txt" | tail -30 ;;
  57) export TINYGRAD_MLA_CACHE=$PWD/.cache
     (python3 -m tools.llama_bench build --time-limit 330 > "$OUT/llama_build.log" 2>&1) &
     synth deepseek-v2-lite youtu-llm-2b glm-4.7-flash; echo "synthesized $(date +%T)"
     timeout $(($(left) - 150)) python3 -m tools.path_check --depth 0 2>&1 | tee "$OUT/paths0.txt" | grep -v Warn | tail -6
     timeout $(($(left) - 120)) python3 -m tools.path_check --presets deepseek-v2-lite --depth 600 2>&1 | tee "$OUT/paths600.txt" | grep -v Warn | tail -4
     wait; tail -2 "$OUT/llama_build.log"; echo "built $(date +%T)"
     timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets ${PRESETS:-deepseek-v2-lite} --kernels generated --llama --decode 32 --prefill 512 \
       --json "$OUT/side_gen.json" 2>&1 | tee "$OUT/side_gen.log" | grep -v '^{' | tail -8 ;;
  59) export TINYGRAD_MLA_CACHE=$PWD/.cache
     tree /tmp/A prefill-flash-model.diff -R || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-deepseek-v2-lite,glm-4.7-flash}; synth ${P//,/ }; echo "synthesized $(date +%T)"
     timeout $(($(left) / 2)) python3 -m tools.path_check --presets $P --depth 600 2>&1 | tee "$OUT/paths600.txt" | grep -v Warn | tail -5
     for v in ${VARIANTS:-A B}; do for m in ${P//,/ }; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $m $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $m --decode 32 --prefill 512 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/flashm_${v}_$m.json" 2>&1 | grep -v '^{' | tail -4)
     done; done ;;
  60) export TINYGRAD_MLA_CACHE=$PWD/.cache
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; synth ${P//,/ }; echo "synthesized $(date +%T)"
     for c in ${CHUNKS:-512,128,32 2048,512,128,32 1024,512,128,32}; do for m in ${P//,/ }; do
       echo "-- chunks $c $m $(date +%T)"
       timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $m --decode 32 --depths ${DEPTHS:-4096,16384} --chunks $c \
         --json "$OUT/chunks_${c%%,*}_$m.json" 2>&1 | grep -v '^{' | tail -3
     done; done ;;
  61) export TINYGRAD_MLA_CACHE=$PWD/.cache
     for m in deepseek-v2-lite glm-4.7-flash youtu-llm-2b; do synth $m & done; wait; echo "synthesized $(date +%T)"
     timeout $(($(left) - 200)) python3 -m tools.path_check --presets deepseek-v2-lite,glm-4.7-flash --depth 600 2>&1 | tee "$OUT/paths600.txt" | grep -v Warn | tail -5
     echo "-- flash $(date +%T)"
     timeout $(($(left) - 60)) python3 -m tools.gpu_bench --presets deepseek-v2-lite,glm-4.7-flash --decode 32 --depths 4096,16384 \
       --json "$OUT/flash_moe.json" 2>&1 | grep -v '^{' | tail -4
     echo "-- chunks 2048 $(date +%T)"
     timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets youtu-llm-2b --decode 32 --depths 4096,16384 --chunks 2048,512,128,32 \
       --json "$OUT/chunks2048.json" 2>&1 | grep -v '^{' | tail -3 ;;
  62) export TINYGRAD_MLA_CACHE=$PWD/.cache
     (python3 -m tools.llama_bench build --time-limit 330 > "$OUT/llama_build.log" 2>&1) &
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; synth ${P//,/ }; echo "synthesized $(date +%T)"
     wait; tail -2 "$OUT/llama_build.log"; echo "built $(date +%T)"
     timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --llama --decode 64 --depths ${DEPTHS:-4096,16384} \
       --json "$OUT/depths_llama.json" 2>&1 | tee "$OUT/depths_llama.log" | grep -v '^{' | tail -8 ;;
  63) export TINYGRAD_MLA_CACHE=$PWD/.cache
     tree /tmp/B long-chunks.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b,glm-4.7-flash}; synth ${P//,/ }; echo "synthesized $(date +%T)"
     if [ -n "$PATHS" ]; then (cd /tmp/B && timeout $(($(left) / 2)) python3 -m tools.path_check --presets $P --depth 2600 2>&1 | tee "$OUT/paths2600.txt" | grep -v Warn | tail -5); fi
     for v in ${VARIANTS:-A B}; do for m in ${P//,/ }; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $m $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $m --decode 32 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/long_${v}_$m.json" 2>&1 | grep -v '^{' | tail -4)
     done; done ;;
  64) mkdir -p /tmp/var && f=apps/kernels/mla_attention.py
     sed 's/^TT = 2 /TT = 4 /' $f > /tmp/var/tt4.py; grep -q '^TT = 4 ' /tmp/var/tt4.py || exit 1
     sed 's/32768 \/\/ (4 \* (self.kv_lora + self.qk_rope))/40960 \/\/ (4 * (self.kv_lora + self.qk_rope))/' /tmp/var/tt4.py > /tmp/var/tt4s16.py
     grep -q '40960 //' /tmp/var/tt4s16.py || exit 1
     # hg1: a head a warp (16 / 20 warps; sm_90 121 / 96 registers against 169 / 150): twice the warps a scheduler, each
     # row read from shared memory by twice the warps
     sed 's/for hg in (2, 4, 8, 1) if/for hg in (1, 2, 4, 8) if/' $f > /tmp/var/hg1.py; grep -q '(1, 2, 4, 8) if' /tmp/var/hg1.py || exit 1
     timeout $(($(left) / 3)) python3 -m tools.bench_mla_attention --pos 32,4095,16383,32767 --layers 8 --iters 30 \
       --variants /tmp/var/tt4.py,/tmp/var/tt4s16.py,/tmp/var/hg1.py 2>&1 | tee "$OUT/attend_tt4.txt" | grep -v '^$'
     if [ -n "$MODEL" ]; then   # the model's decode at depth with it, A B B A
       export TINYGRAD_MLA_CACHE=$PWD/.cache
       tree /tmp/B && cp /tmp/var/tt4.py /tmp/B/$f
       python3 -m compileall -q /tmp/B/apps > /dev/null; synth youtu-llm-2b
       for v in A B B A; do
         d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
         (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets youtu-llm-2b --decode 32 --depths 4096,16384 \
           --json "$OUT/tt4_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -4)
       done
     fi ;;
  65) export TINYGRAD_MLA_CACHE=$PWD/.cache; synth youtu-llm-2b
     for v in . ${VARIANT:+/tmp/var}; do   # VARIANT=tt4 (step 64's file, made there first): the same for it
       f=; [ $v = . ] || { tree /tmp/B && cp /tmp/var/$VARIANT.py /tmp/B/apps/kernels/mla_attention.py; f=/tmp/B; }
       (cd ${f:-.} && timeout $(($(left) / 2 - 5)) ncu --profile-from-start off --set full --launch-count 4 --kernel-name regex:"mla_attend" \
         python3 -m tools.profile --model youtu-llm-2b --kernels hand --target decode --pos 16383 --max-context 16448 --repeat 1 --count 2 --ncu \
         > "$OUT/ncu_attend${f:+_$VARIANT}.txt" 2>&1)
       grep -E "^  [a-z_0-9]+\(|Duration|Registers Per|Achieved Occupancy|DRAM Throughput|Warp Cycles Per Issued|Issue Slots Busy|Stall|No Eligible" \
         "$OUT/ncu_attend${f:+_$VARIANT}.txt" | head -60
     done ;;
  66) export TINYGRAD_MLA_CACHE=$PWD/.cache
     [ -x .cache/llama/build/bin/llama-bench ] || (python3 -m tools.llama_bench build --time-limit 330 \
       > "$OUT/llama_build.log" 2>&1) &
     (for m in youtu-llm-2b deepseek-v2-lite glm-4.7-flash; do synth $m & done; wait); echo "synthesized $(date +%T)"
     # depth 2010: the compared rows sit in the prefill path's chunk of 2048 (flash), the decode path's prefix in chunks of 512
     [ -n "$PATHS" ] && timeout 240 python3 -m tools.path_check --depth 2010 --no-generated 2>&1 | tee "$OUT/paths2010.txt" | grep -v Warn | tail -6
     wait; tail -2 "$OUT/llama_build.log" 2>/dev/null; echo "built $(date +%T)"
     for m in ${PRESETS:-youtu-llm-2b deepseek-v2-lite}; do
       timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $m --llama --decode 64 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/depths_$m.json" 2>&1 | grep -v '^{' | tail -4
     done ;;
  67) export TINYGRAD_MLA_CACHE=$PWD/.cache
     (for m in deepseek-v2-lite glm-4.7-flash; do synth $m & done; wait); echo "synthesized $(date +%T)"
     # DeepSeek-V2-Lite's chunks of 2048 with the experts' 16-bit lists (the tensor-core GEMM; its 32-bit lists fell back to
     # the matvecs) against chunks of 512, one process each
     for c in 512,128,32 2048,512,128,32; do
       echo "-- chunks $c $(date +%T)"
       timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets deepseek-v2-lite --decode 32 --depths ${DEPTHS:-4096,16384} --chunks $c \
         --json "$OUT/chunks_${c%%,*}_dsv2.json" 2>&1 | grep -v '^{' | tail -3
     done
     # GLM-4.7-Flash's prefill vs decode at depth 2010 with chunks of 512 for both paths (their prefixes chunked apart, no flash)
     # against the default (the prefill path's chunk of 2048 flash): near-tie routing or the chunk of 2048
     for c in 512,128,32 2048,512,128,32; do
       timeout $(($(left) - 3)) python3 -m tools.path_check --presets glm-4.7-flash --depth 2010 --no-generated --chunks $c 2>&1 \
         | tee "$OUT/paths2010_${c%%,*}.txt" | grep -v Warn | tail -1
     done ;;
  68) export TINYGRAD_MLA_CACHE=$PWD/.cache; synth glm-4.7-flash; echo "synthesized $(date +%T)"
     # GLM-4.7-Flash's 2048 tokens as one chunk, block by block against tinygrad's own kernels: the flash form (chunks 2048)
     # then the latent-row form (chunks 512); teacher-forced attention distances a block ("attn fc": the form's numerics) and
     # the routing decisions that differ with their margins (near ties or not)
     for c in 2048,512,128,32 512,128,32; do
       echo "-- blocks, chunks $c $(date +%T)"
       timeout $(($(left) / 2)) python3 -m tools.path_check --blocks glm-4.7-flash --tokens 2048 --chunks $c 2>&1 \
         | tee "$OUT/blocks2048_${c%%,*}.txt" | grep -v Warn | tail -50 | cut -c1-160
     done ;;
  69) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # A = the series without patch 0071 (the flash prefill's expansions copied into their buffers), B = the tree's
     tree /tmp/A && (cd /tmp/A && python3 apply_patches.py --upto 70 > /dev/null) || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b}; synth ${P//,/ }; echo "synthesized $(date +%T)"
     for v in A B B A; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $(date +%T)"
       (cd $d && TINYGRAD_UPTO=$([ $v = A ] && echo 70 || echo 71) CACHEDB=/tmp/cache_$v.db timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --decode 32 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/copies_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -4)
     done ;;
  127) export TINYGRAD_MLA_CACHE=$PWD/.cache; P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash}; M=${M:-youtu-llm-2b}
     # a prompt of MIX tokens that starts beside B running sequences: each of its 32-token chunks as rows of their step (the
     # mixed step, Transformer.launch(slots, prompt)) against alone between two of their steps (the server's way), ms a turn,
     # in one process (gpu_bench --batch --mixed); SERVE=1 instead: the server under load, A = the tree, B = the tree with
     # experiments/batching-mixed.diff (the scheduler's prompts as rows of the steps), M, 32 slots, 1 / 8 / 16 clients
     # (VARIANTS="A B": A B B A takes ~600 s)
     # DIFF=mixed-split-k.diff: the tree (A) and a copy with the diff (B: the products of the mixed step's 33-64 rows split K
     # as a chunk's 32 do), VARIANTS (A B) of PRESETS (default youtu-llm-2b,deepseek-v2-lite)
     if [ -n "$SERVE" ]; then synth $M; serve_ab B batching-mixed.diff; exit; fi
     vs=A; [ -z "$DIFF" ] || { vs=${VARIANTS:-A B}; P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; tree /tmp/B $DIFF || exit 1
                              python3 -m compileall -q /tmp/B/apps > /dev/null; }
     synth ${P//,/ }; echo "synthesized $(date +%T)"
     # first the full-size check: the window's latents as rows of another sequence's steps against alone, the tokens both ways
     [ -n "$DIFF" ] || timeout $(($(left) / 3)) python3 -m tools.path_check --mixed --presets $P 2>&1 | grep -v Warn | tail -4
     for v in $vs; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 5)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-1,4,8,16} --decode 32 --mixed ${MIX:-256} \
         --json "$OUT/mixed_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -16)
     done ;;
  205) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT the staged routed GEMM's copy offsets once a tile (H = experiments/experts-staged-offsets.diff: each
     # thread's x record and weight row offsets computed before the K loop, a step adding its own; tools.sass_mix: the
     # gate_up's K loop 698 -> 635 instructions, the down's 357 -> 361; the journal, 2026-12-08: the staged kernel is
     # issue-bound): bench_gemm --tokens 8 of DeepSeek-V2-Lite's routed products in the tree and H, then gpu_bench --batch 8
     # of deepseek-v2-lite (its step of 8 is the only decode step on these tiles), $VARIANTS (default A H H A)
     P=deepseek-v2-lite; (synth $P) > "$OUT/synth.log" 2>&1 &
     tree /tmp/H experts-staged-offsets.diff || exit 1
     for d in . /tmp/H; do echo "-- bench_gemm $d"
       (cd $d && timeout 60 python3 -m tools.bench_gemm --tokens 8 --models dsv2 --only gate_up_exps,down_exps --iters 50 2>&1 | grep -v "^device\|^model")
     done
     wait; echo "synthesized $(date +%T)"
     PRESETS=$P BATCH=8 VARIANTS=${VARIANTS:-A H H A} batch_ab offsets H:experts-staged-offsets.diff ;;
  204) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT a Q6_K output head of 9-16 tokens in 16 x 64 tiles of 4 sub-steps at 4 workgroups an SM (B =
     # experiments/output-q6k-16x64.diff; call202: DeepSeek-V2-Lite's head of 16 rows 202 -> 159 us alone): bench_gemm --tokens
     # 16 --only output of dsv2,glm in the tree and B, then gpu_bench --batch 16 of the MoE models (their heads are Q6_K), A B B A
     P=deepseek-v2-lite,glm-4.7-flash; (for m in ${P//,/ }; do synth $m & done; wait) > "$OUT/synth.log" 2>&1 &
     tree /tmp/B output-q6k-16x64.diff || exit 1
     for d in . /tmp/B; do echo "-- bench_gemm $d"
       (cd $d && timeout 60 python3 -m tools.bench_gemm --tokens 16 --models dsv2,glm --only output --iters 30 2>&1 | grep -v "^device\|^model")
     done
     wait; echo "synthesized $(date +%T)"
     PRESETS=$P BATCH=16 VARIANTS=${VARIANTS:-A B B A} batch_ab q6head B:output-q6k-16x64.diff ;;
  203) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the step of $B (default 8) rows of $M (default deepseek-v2-lite) under Nsight Compute: each kernel's own time and DRAM
     # bytes (rows of distinct tokens), the table in $OUT/ncu_b$B.txt; what the step spends inside its graph, where
     # tools.profile's one-by-one times carry each kernel's launch
     M=${M:-deepseek-v2-lite} B=${B:-8}; synth $M; echo "synthesized $(date +%T)"
     timeout $(($(left) - 10)) ncu --profile-from-start off --clock-control none --cache-control none \
       --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv --log-file "$OUT/ncu_b$B.csv" \
       python3 -m tools.profile --model $M --target decode --batch $B --pos 32 --repeat 3 --count 20 --ncu --json > "$OUT/rows_b$B.json" 2> "$OUT/ncu_b$B.err"
     python3 -m tools.profile --ncu-csv "$OUT/ncu_b$B.csv" --rows "$OUT/rows_b$B.json" --top 60 > "$OUT/ncu_b$B.txt" 2>&1; head -40 "$OUT/ncu_b$B.txt"
     [ -s "$OUT/ncu_b$B.err" ] || rm -f "$OUT/ncu_b$B.err" ;;
  202) # the output heads of a batched step (call200: DeepSeek-V2-Lite's Q6_K head of 32 rows 308 us one by one, 0.56 TB/s;
     # Youtu-LLM-2B's Q4_0 head of 16 rows 120 us) alone, bench_gemm --sweep steps over tiles x sub-steps x workgroups an SM at
     # $TOKENS (default 16 32) of $MODELS (default youtu,dsv2), in $OUT/sweep_output_<tokens>.txt
     for tk in ${TOKENS:-16 32}; do echo "-- output $tk tokens $(date +%T)"
       timeout $(($(left) - 3)) python3 -m tools.bench_gemm --tokens $tk --models ${MODELS:-youtu,dsv2} --only output --sweep steps \
         --tiles 8x128,16x128,32x128,8x64,16x64,32x64 --steps 4,2 --mbs 2,3,4 --iters 20 2>&1 | grep -v "^device" > "$OUT/sweep_output_$tk.txt"
       head -3 "$OUT/sweep_output_$tk.txt"
     done ;;
  200) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call200: rejected, the step unchanged) the staged routed gate_up of <= 8 tokens in two stages and two K slices (T = experiments/experts-gate-up-st2.diff;
     # call198's sweep: DeepSeek-V2-Lite's gate_up of 8 tokens 61.3 us at 3 stages in 4 slices, 59.2 at 2 in 2; its down keeps
     # 3 stages): bench_gemm --tokens 8 of DeepSeek-V2-Lite's gate_up in the tree and T, then gpu_bench --batch 8 of
     # deepseek-v2-lite, $VARIANTS (default A T T A); then the steps nearest 2x llama.cpp kernel by kernel (rows of distinct
     # tokens): $PROF (default deepseek-v2-lite:32 youtu-llm-2b:16), in $OUT/prof_<model>_b<rows>.txt
     P=deepseek-v2-lite; (synth $P youtu-llm-2b) > "$OUT/synth.log" 2>&1 &
     tree /tmp/T experts-gate-up-st2.diff || exit 1
     for d in . /tmp/T; do echo "-- bench_gemm $d"
       (cd $d && timeout 60 python3 -m tools.bench_gemm --tokens 8 --models dsv2 --only gate_up_exps --iters 50 2>&1 | grep -v "^device\|^model")
     done
     wait; echo "synthesized $(date +%T)"
     PRESETS=$P BATCH=8 VARIANTS=${VARIANTS:-A T T A} batch_ab gu2 T:experts-gate-up-st2.diff
     for c in ${PROF:-deepseek-v2-lite:32 youtu-llm-2b:16}; do m=${c%:*} b=${c#*:}; [ $(left) -gt 60 ] || break
       timeout $(($(left) - 3)) python3 -m tools.profile --model $m --target decode --batch $b --pos 32 --repeat 3 --count 20 \
         --top 40 > "$OUT/prof_${m}_b$b.txt" 2>&1; sed -n 4,5p "$OUT/prof_${m}_b$b.txt"
     done ;;
  199) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call199: S landed, the diff removed) three stages in flight for the staged routed GEMM of <= 8 tokens (S = experiments/experts-stages-3.diff:
     # gemm.STAGES 4 -> 3; call198: DeepSeek-V2-Lite's gate_up of 8 tokens 63.8 -> 61.3 us alone, its down 35.2 -> 32.2, and
     # Nsight Compute: the staged gate_up at 3 workgroups an SM by workgroup memory, 18.75% occupancy): bench_gemm --tokens 8 of
     # DeepSeek-V2-Lite's routed products in the tree and S, then gpu_bench --batch $BATCH (default 8) of $P (default
     # deepseek-v2-lite: its step of 8 is the only decode step on these tiles), $VARIANTS (default A S S A)
     P=${PRESETS:-deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait) > "$OUT/synth.log" 2>&1 &
     tree /tmp/S experts-stages-3.diff || exit 1
     for d in . /tmp/S; do echo "-- bench_gemm $d"
       (cd $d && timeout 60 python3 -m tools.bench_gemm --tokens 8 --models dsv2 --only gate_up_exps,down_exps --iters 50 2>&1 | grep -v "^device\|^model")
     done
     wait; echo "synthesized $(date +%T)"
     PRESETS=$P BATCH=${BATCH:-8} VARIANTS=${VARIANTS:-A S S A} batch_ab stages S:experts-stages-3.diff
     # then the tree's step of 8 of the first preset kernel by kernel (rows of distinct tokens), in $OUT/prof_b8.txt
     [ $(left) -gt 90 ] && timeout $(($(left) - 3)) python3 -m tools.profile --model ${P%%,*} --target decode --batch 8 --pos 32 \
       --repeat 3 --count 20 --top 60 > "$OUT/prof_b8.txt" 2>&1; head -12 "$OUT/prof_b8.txt" ;;
  198) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the batched table beside llama.cpp (as 147: gpu_bench --batch $BATCH, default 1,8,16,32, --llama of $M, default the
     # MoE models); while llama.cpp builds and the models synthesize, Nsight Compute's full set on the routed gate_up alone
     # (bench_gemm, uniform routing): GLM-4.7-Flash's of 16 tokens (the 8 x 256 register tile in 4 slices) and
     # DeepSeek-V2-Lite's of 8 (the staged 8 x 128 tile), in $OUT/ncu_<model>_<tokens>.txt
     [ -x .cache/llama/build/bin/llama-bench ] || (python3 -m tools.llama_bench build --time-limit 370 > "$OUT/llama_build.log" 2>&1) &
     M=${M:-deepseek-v2-lite glm-4.7-flash}; (for m in $M; do synth $m & done; wait) > "$OUT/synth.log" 2>&1 &
     for c in glm:16:1536 dsv2:8:1408; do IFS=: read -r m tk n <<< "$c"; echo "-- ncu $m $tk $(date +%T)"
       timeout 100 ncu --set full --clock-control none --launch-skip 3 --launch-count 1 --kernel-name regex:"gemm_mma_q4_0_${tk}_${n}_2048_e64" \
         python3 -m tools.bench_gemm --tokens $tk --models $m --only gate_up_exps --iters 2 > "$OUT/ncu_${m}_$tk.txt" 2>&1
       grep -E "^  [a-z_0-9]+\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|DRAM Throughput|L1/TEX Cache Throughput|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Compute \(SM\) Throughput|Memory Throughput|Block Limit (Reg|Shared)|L1/TEX Hit|L2 Hit|Eligible Warps" \
         "$OUT/ncu_${m}_$tk.txt" | head -24
     done
     wait; tail -1 "$OUT/llama_build.log" 2>/dev/null; echo "built and synthesized $(date +%T)"
     for m in $M; do
       timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $m --batch ${BATCH:-1,8,16,32} --decode 32 --llama \
         --json "$OUT/batch_llama_$m.json" 2>&1 | grep -v '^{' | tail -7
     done ;;
  197) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call197, against 1003e53: H landed in 65f6d01, the diff removed) a tile's x records of its entries only (H = experiments/experts-entries-records.diff: build_mma's cp.async of
     # x skips the tile's columns past its entries, which it never stores; a step of 16's routed expert has ~1.5 of its 8 x
     # 256 tile's 8 columns, and the records are ~14% of a workgroup's bytes a step, read from L2): bench_gemm --tokens 16 of
     # the MoE models' routed products in the tree and in H, then gpu_bench --batch $BATCH (default 8,16,32) of $P (default
     # the MoE models), $VARIANTS (default A H H A)
     P=${PRESETS:-deepseek-v2-lite,glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait) > "$OUT/synth.log" 2>&1 &
     tree /tmp/H experts-entries-records.diff || exit 1
     for d in . /tmp/H; do echo "-- bench_gemm $d"
       (cd $d && timeout 60 python3 -m tools.bench_gemm --tokens 16 --models dsv2,glm --only gate_up_exps,down_exps --iters 50 2>&1 | grep -v "^device\|^model")
     done
     wait; echo "synthesized $(date +%T)"
     PRESETS=$P BATCH=${BATCH:-8,16,32} VARIANTS=${VARIANTS:-A H H A} batch_ab records H:experts-entries-records.diff ;;
  196) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call196 with NOSWEEP=1, against 1003e53: F and G rejected, their diffs apply to 1003e53) the routed experts of 5-8 tokens on the 8 x 256 register tiles in K slices that 9-32 tokens took in 414a71e
     # (DeepSeek-V2-Lite's step of 8, 48 picks on the staged 8 x 128 GEMM, is 1.27x llama.cpp in call195; GLM-4.7-Flash's 32
     # picks stay on the matvecs under gemm.SPLIT_EXPERT_PICKS). While the models synthesize, bench_gemm --tokens 8 (uniform
     # routing): tiles 8 x 128 / 8 x 256 x steps 2 / 4 x K slices 1 / 2 / 4 x staged or not; then gpu_bench --batch $BATCH
     # (default 6,8) of $P (default the MoE models), $VARIANTS (default A F G G F A): F = experiments/experts-8-tokens-8x256.diff,
     # G = -picks32.diff (F, and the GEMM from 32 picks: GLM-4.7-Flash's 8 rows, DeepSeek-V2-Lite's 6); between them tools.path_check
     # of a 24-token window
     P=${PRESETS:-deepseek-v2-lite,glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait) > "$OUT/synth.log" 2>&1 &
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     [ -n "$NOSWEEP" ] || timeout $(( $(left) - 330 )) python3 -m tools.bench_gemm --tokens 8 --models dsv2,glm --only gate_up_exps,down_exps \
       --sweep steps --tiles 8x128,8x256 --steps 2,4 --mbs 3 --splits 1,2,4 --stages 0,4 --iters 30 2>&1 | grep -v "^device" | tee "$OUT/sweep_8.txt"
     wait; echo "synthesized $(date +%T)"
     # the full-size check of a 24-token prompt's products on 414a71e's split 8 x 256 expert tiles (prefill against generated)
     timeout 150 python3 -m tools.path_check --presets $P --tokens 24 --skip 4 2>&1 | grep -v Warn | tail -6
     PRESETS=$P BATCH=${BATCH:-6,8} VARIANTS=${VARIANTS:-A F G G F A} batch_ab few F:experts-8-tokens-8x256.diff G:experts-8-tokens-8x256-picks32.diff ;;
  194) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call194, against 90b61bd: E landed, the diff removed; D rejected, experiments/experts-split-32-d.diff applies
     # to 90b61bd) the routed experts' GEMMs of a step of 16 and 32 sequences on K slices in register tiles (call193: the rule's unsplit
     # 16 x 256 tile takes 168 registers and spills (sm_90: 24 bytes of stack), three workgroups an SM, Nsight Compute 18.8%
     # occupancy and 60% of cycles with no eligible warp; the staged split (16 x 128) lost in the model; the 16 x 256
     # register tile in 2 or 4 slices ran GLM-4.7-Flash's and DeepSeek-V2-Lite's gate_up 18-20% faster alone, and a SwiGLU
     # product's slices go to the next x quantization, no sum kernel). While the models synthesize, bench_gemm --tokens 16 and
     # 32 (uniform routing): tiles 8 x 256 (142-146 registers, no stack) / 16 x 256 x workgroups an SM 3 / 4 x K slices 1 / 2
     # / 4; then in the model (gpu_bench --batch $BATCH, default 16,32, of $P, default the MoE models, $VARIANTS, default A D
     # E E D A): D = experiments/experts-split-32-d.diff (9-32 tokens: 16 x 256 tiles, K split as split_k splits <= 8's), E
     # = -e.diff (the same on 8 x 256 tiles)
     P=${PRESETS:-deepseek-v2-lite,glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait) > "$OUT/synth.log" 2>&1 &
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     for tk in 16 32; do
       timeout $(( ($(left) - 360) / 2 )) python3 -m tools.bench_gemm --tokens $tk --models dsv2,glm --only gate_up_exps,down_exps --sweep steps \
         --tiles 8x256,16x256 --steps 2 --mbs 3,4 --splits 1,2,4 --stages 0 --iters 30 2>&1 | grep -v "^device" | tee "$OUT/sweep_$tk.txt"
     done
     wait; echo "synthesized $(date +%T)"
     PRESETS=$P BATCH=${BATCH:-16,32} VARIANTS=${VARIANTS:-A D E E D A} batch_ab split D:experts-split-32-d.diff E:experts-split-32-e.diff ;;
  193) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call193, against 90b61bd: B and C rejected) the routed experts' GEMMs of a step of 16 and 32 sequences (call192: GLM-4.7-Flash's step of 16 reads 9.9 GB in them at
     # 1.0-1.2 TB/s, gate_up 143 us a layer; unsplit 16 x 256 tiles, the weights one step ahead in registers). While the
     # models synthesize, the products alone (bench_gemm --tokens 16 and 32, uniform routing, GB/s the chosen experts'
     # bytes): tiles 16 x 128 / 16 x 256 x K slices 1 / 2 / 4 x weights in registers or staged (4 steps); then in the model
     # (gpu_bench --batch $BATCH, default 16,32, of $P, default the MoE models, $VARIANTS, default A B C C B A): B =
     # experiments/experts-staged-split-16.diff (the staged split rule of <= 8 tokens up to 16), C = -32.diff (up to 32);
     # then, while the time lasts, Nsight Compute's full set on GLM-4.7-Flash's gate_up of 16 tokens, the tree's kernel and B's
     P=${PRESETS:-deepseek-v2-lite,glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait) > "$OUT/synth.log" 2>&1 &
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     for tk in 16 32; do
       timeout $(( ($(left) - 400) / 2 )) python3 -m tools.bench_gemm --tokens $tk --models dsv2,glm --only gate_up_exps,down_exps --sweep steps \
         --tiles 16x128,16x256 --steps 2 --mbs 3 --splits 1,2,4 --stages 0,4 --iters 30 2>&1 | grep -v "^device" | tee "$OUT/sweep_$tk.txt"
     done
     wait; echo "synthesized $(date +%T)"
     PRESETS=$P BATCH=${BATCH:-16,32} VARIANTS=${VARIANTS:-A B C C B A} DEADLINE=$((DEADLINE - 90)) \
       batch_ab staged B:experts-staged-split-16.diff C:experts-staged-split-32.diff
     for d in . /tmp/B; do [ $(left) -gt 45 ] || break; n=A; [ $d = . ] || n=B; echo "-- ncu $n $(date +%T)"
       (cd $d && timeout $(( $(left) - 5 )) ncu --set full --clock-control none --launch-skip 3 --launch-count 1 \
         --kernel-name regex:"gemm_mma_q4_0_16_1536_2048_e64" python3 -m tools.bench_gemm --tokens 16 --models glm --only gate_up_exps \
         --iters 2 > "$OUT/ncu_gate_up_16_$n.txt" 2>&1)
       grep -E "^  [a-z_0-9]+\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Warp Cycles Per Issued|Issue Slots Busy|Stall|No Eligible|Compute \(SM\) Throughput|Memory Throughput|Block Limit|Mem Busy|Max Bandwidth|L1/TEX Hit|L2 Hit|Active Warps|Eligible|Waves Per SM" \
         "$OUT/ncu_gate_up_16_$n.txt" | head -45
     done ;;
  189) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call188: landed in 8b15aec for steps of 2+ rows, the diff removed) rows on half a warp where a row's last lane chunk is at most 16 steps (B = experiments/mv-half-warp-rows.diff:
     # 16 lanes a row, each half its own R / 2 rows, where the warp has an even number of rows): DeepSeek-V2-Lite's routed
     # down (K = 1408, 44 Q4_0 blocks: 48 lane slots a row against 64, the last chunk idling 20 of 32 lanes; call182 saw
     # 25.3 active threads a warp) and GLM-4.7-Flash's (48 blocks: 48 against 64), k_b's 4 steps and v_b's 16 at two rows
     # a warp; sm_90 PTX of DeepSeek-V2-Lite's mix at 4 tokens 6,693 -> 5,324 instructions a thread, no spill. A row's sum
     # order changes where it takes half warps (a batched row against the same row alone: the agree column); gpu_bench
     # --batch $BATCH (default 1,2,4,8) of $P (default all three), $VARIANTS (default A B B A)
     PRESETS=${PRESETS:-deepseek-v2-lite,glm-4.7-flash,youtu-llm-2b} BATCH=${BATCH:-1,2,4,8} VARIANTS=${VARIANTS:-A B B A} \
       batch_ab half B:mv-half-warp-rows.diff ;;
  188) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call190, and call191 on the half-warp rows: the mix's part landed in 4e14026, the diff removed) the four-rows plan of a batched step's routed experts at fewer waves (B = experiments/mv-rows4-fewer-waves.diff:
     # the gate_up from 2 waves of two workgroups an SM, not 4; the mix from 1, not 1.5): GLM-4.7-Flash's gate_up at 2
     # tokens (384 workgroups), both models' mix at 3 (192); gpu_bench --batch $BATCH (default 2,3) of $P (default the MoE
     # models), $VARIANTS (default A B B A)
     PRESETS=${PRESETS:-deepseek-v2-lite,glm-4.7-flash} BATCH=${BATCH:-2,3} VARIANTS=${VARIANTS:-A B B A} batch_ab waves B:mv-rows4-fewer-waves.diff ;;
  187) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call190: landed in e674ba0, the diff removed) k_b's decode matvec reading each token's heads of q in place (B = experiments/kb-rows-in-place.diff:
     # MatvecShape.x_row, the rows of the stacked [q; kv_a] output L apart): DeepSeek-V2-Lite (no q_lora) copies q out of
     # those rows with a generated kernel in each of its 27 blocks at 2-4 rows (E_48_4_16_4 in call172's step of 4, 8.6 us
     # a block one by one); the GEMMs of 5+ rows keep the copy. gpu_bench --batch $BATCH (default 2,4) of $P (default
     # deepseek-v2-lite), $VARIANTS (default A B B A)
     PRESETS=${PRESETS:-deepseek-v2-lite} BATCH=${BATCH:-2,4} VARIANTS=${VARIANTS:-A B B A} batch_ab kbrows B:kb-rows-in-place.diff ;;
  186) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call189: rejected, +8% to +18%) the routed experts of a batched step on the staged split GEMM from fewer (token, expert) picks: the rule
     # (gemm.SPLIT_EXPERT_PICKS = 48) was set on the unstaged split GEMM (GLM-4.7-Flash's 32 picks -8.6% there, H200); the
     # staged kernel (cp.async, <= 8 tokens) came after, and gemm.few_tokens kept every product of <= 4 tokens on the
     # matvecs. B = experiments/experts-gemm-picks24.diff (from 24 picks, also at <= 4 tokens: DeepSeek-V2-Lite from 4
     # tokens, GLM-4.7-Flash from 6), C = experts-gemm-picks32.diff (from 32: DeepSeek-V2-Lite from 6, GLM-4.7-Flash at
     # 8); gpu_bench --batch $BATCH (default 4,6,8) of $P (default the MoE models), $VARIANTS (default A B C C B A)
     PRESETS=${PRESETS:-deepseek-v2-lite,glm-4.7-flash} BATCH=${BATCH:-4,6,8} VARIANTS=${VARIANTS:-A B C C B A} \
       batch_ab picks B:experts-gemm-picks24.diff C:experts-gemm-picks32.diff ;;
  185) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call185: landed in 2d12f2c, the diff removed) the four-rows plan of a batched step's routed experts (2978aa4, measured at 2-4 tokens) from 5 tokens too
     # (B = experiments/mv-rows4-to-8.diff): GLM-4.7-Flash's routed gate_up and mix of 5-8 tokens (4 experts a token: under
     # gemm.SPLIT_EXPERT_PICKS, so on the matvecs), DeepSeek-V2-Lite's of 5-7; gpu_bench --batch $BATCH (default 5,8) of $P
     # (default the MoE models), $VARIANTS (default A B B A)
     PRESETS=${PRESETS:-glm-4.7-flash,deepseek-v2-lite} BATCH=${BATCH:-5,8} VARIANTS=${VARIANTS:-A B B A} \
       batch_ab rows8 B:mv-rows4-to-8.diff ;;
  184) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call183: C landed in 2978aa4 at 2-4 tokens, the diffs removed) the routed experts' matvecs of a batched step at four rows a warp and eight warps (32 rows a workgroup: half
     # the workgroups, each staging x once for twice the rows). Nsight Compute (call182, DeepSeek-V2-Lite's step of 4): the
     # routed gate_up 36.8 us at 1.83 TB/s, 15.9M instructions (0.2 a weight byte; issue slots 42% busy), the down with its mix
     # and the shared down 40.4 us at 0.98 TB/s, 17.5M; sm_90's PTX a thread per weight: gate_up 0.82x at 8 x 4. B =
     # experiments/mv-rows4-gate-up.diff (the gate_up at >= 4 waves of 8 x 4), C = mv-rows4-experts.diff (also the mix at
     # >= 198 workgroups, its loads in batches of 24 registers); gpu_bench --batch $BATCH (default 2,4) of $P (default the
     # MoE models), $VARIANTS (default A B C C B A)
     PRESETS=${PRESETS:-deepseek-v2-lite,glm-4.7-flash} BATCH=${BATCH:-2,4} VARIANTS=${VARIANTS:-A B C C B A} \
       batch_ab rows4 B:mv-rows4-gate-up.diff C:mv-rows4-experts.diff ;;
  183) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call181, BATCH=2,4 of the MoE models) the three batched-step rules landed in bc23595 together (the expert mix of 2-8 rows at two workgroups an SM,
     # gemm.LARGE 10M, four sub-steps for a step of 5-8 rows) against the tree before them (A: experiments/mix-large-steps.diff
     # reversed): gpu_bench --batch $BATCH (default 1,2,4,8) of $P (default all three), $VARIANTS (default A B)
     PRESETS=${PRESETS:-youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash} BATCH=${BATCH:-1,2,4,8} VARIANTS=${VARIANTS:-A B} \
       batch_ab rules A:mix-large-steps.diff:-R ;;
  182) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call179: landed, the diff removed) experiments/mix-two-blocks.diff (B): an expert mix of 2-8 rows (the routed down with its mix, summed with
     # the shared Q6_K down: DeepSeek-V2-Lite's steps of 2-4, GLM-4.7-Flash's of 2-8) at two workgroups an SM: its loads in
     # batches of 32 registers and __launch_bounds__(256, 2), 128 registers a thread where hoisting every load took 246 /
     # 160 (sm_90: one workgroup an SM, a grid of 2-8 waves whose loads, x staging and math ran one after another; call172's
     # profile: DeepSeek-V2-Lite's at 4 rows 58 us a block for 38.6 MB, 0.66 TB/s). First the step of 4 kernel by kernel
     # (tools.profile) in A and B, the MoE FFN's lines; then gpu_bench --batch $BATCH (default 1,2,4,8) of $P (default
     # deepseek-v2-lite,glm-4.7-flash), A B B A
     M=${M:-deepseek-v2-lite}; synth $M; tree /tmp/B mix-two-blocks.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null
       (cd $d && timeout 120 python3 -m tools.profile --model $M --target decode --batch 4 --top 4 2>&1 | grep -E "^decode|experts|shared_expert|mv_q" | head -8)
     done
     PRESETS=${PRESETS:-deepseek-v2-lite,glm-4.7-flash} BATCH=${BATCH:-1,2,4,8} batch_ab mix B:mix-two-blocks.diff ;;
  181) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # what bounds the decode matvecs of the MoE FFN (the step of 4's profile, call172: DeepSeek-V2-Lite's routed down with
     # its mix and the shared Q6_K down, one sum kernel, 58 us a block for 38.6 MB, 0.66 TB/s; its gate_up with the shared
     # Q5_K's 59 us for 75.7 MB, 1.28 TB/s; at one row the down 17 us for 14.5 MB): Nsight Compute's full set on one launch of
     # each in a step of $BATCHES rows (default "1 4") of $M (default deepseek-v2-lite); the reports in $OUT/ncu_mv_<rows>.txt
     M=${M:-deepseek-v2-lite}; synth $M; python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     for b in ${BATCHES:-1 4}; do echo "-- $b rows $(date +%T)"
       timeout $(( $(left) - 5 )) ncu --set full --clock-control none --profile-from-start off --launch-count 2 \
         --kernel-name regex:"${KERNELS:-mv_q4_0_experts|norm_glu}" python3 -m tools.profile --model $M --target decode --batch $b \
         --repeat 1 --count 1 --ncu > "$OUT/ncu_mv_$b.txt" 2>&1
       grep -E "^  [a-z_0-9+]+|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Warp Cycles Per Issued|Issue Slots Busy|Stall|No Eligible|Compute \(SM\) Throughput|Memory Throughput|Block Limit|Mem Busy|Max Bandwidth|L1/TEX Hit|L2 Hit|Active Warps|Eligible|Grid Size|Block Size|Shared Memory Config|Dynamic Shared|Static Shared|Waves Per SM" \
         "$OUT/ncu_mv_$b.txt" | head -90
     done ;;
  180) # the first server ever of $M (default glm-4.7-flash), $SLOTS (default 32) slots, empty caches (a fresh CACHEDB and
     # capture directory; the model file from the project's cache): seconds to /health answering (its one-request steps
     # captured; the tree before this case captured every batch size's, 66 steps in more than 400 s on GLM-4.7-Flash in
     # call174), a 32-token reply's time right after, and /health's "warming" (batched steps left) every 20 s; a later
     # server's answer if the first got warm in time
     M=${M:-glm-4.7-flash}; synth $M; python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     d=$(mktemp -d); mkdir $d/serve; ln -s $PWD/.cache/models $d/serve/models; ln -s $PWD/.cache/vocab $d/serve/vocab
     for run in first later; do
       (CACHEDB=$d/cache.db TINYGRAD_MLA_CACHE=$d/serve exec python3 apps/llm.py --model $M --serve 8080 --parallel ${SLOTS:-32} \
         --max-context 2048 > "$OUT/server_$run.log" 2>&1) &
       pid=$!
       timeout $(($(left) - 5)) python3 - $run <<'PY'
import json, sys, time, urllib.request
t0, run = time.time(), sys.argv[1]
def get(path, body=None):
  with urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:8080" + path, json.dumps(body).encode() if body else None,
                                                    {"Content-Type": "application/json"}), timeout=600) as r: return json.loads(r.read())
while True:
  try: h = get("/health"); break
  except OSError: time.sleep(0.1)
print(f"{run} server: /health at {time.time() - t0:.1f} s: {h}", flush=True)
t = time.time(); r = get("/v1/completions", {"prompt": "Hello", "max_tokens": 32, "temperature": 0})
print(f"  a {r['usage']['completion_tokens']}-token reply: {time.time() - t:.2f} s", flush=True)
shown = 0
while (h := get("/health"))["warming"]:
  if time.time() - shown >= 20:
    print(f"  {time.time() - t0:.0f} s: warming {h['warming']}, device memory {h['device_memory_bytes'] / 1e9:.2f} GB", flush=True)
    shown = time.time()
  time.sleep(0.5)
print(f"{run} server: warm at {time.time() - t0:.1f} s: {h}", flush=True)
PY
       rc=$?; kill $pid; wait $pid 2>/dev/null
       [ $rc = 0 ] || break
     done ;;
  179) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call178: every target met, the journal) the fast-start issue's targets at the tree in one call (carry .cache/llama/llama-cpp-src.tar.xz): llama.cpp built beside
     # the synthesis of $P (default all three), then tools.start_time --repeat 3 --llama --calls: the first process ever, the
     # median second process, its load's phases (weights GB/s: Youtu-LLM-2B's 4.3-4.8 in call127-128; its servers' own load
     # lines in call173 read 6.53 / 7.33) and llama.cpp's first token, per model
     [ -x .cache/llama/build/bin/llama-bench ] || (python3 -m tools.llama_bench build --time-limit 370 > "$OUT/llama_build.log" 2>&1) &
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     wait; echo "built $(date +%T)"
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     timeout $(($(left) - 3)) python3 -m tools.start_time --presets $P --repeat 3 --llama --calls --json "$OUT/start.json" 2>&1 | tail -60 ;;
  177) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call180: landed, the diff removed) experiments/large-10m.diff (B): gemm.LARGE 12M -> 10M weights, so a step of 3-4 sequences puts
     # GLM-4.7-Flash's attn_output (2,048 x 5,120, 10.5M; 19.5 us a block on the 4-row matvecs in call172's profile) and
     # DeepSeek-V2-Lite's shared experts' gate_up (2 x 2,816 x 2,048, 11.5M) on the tensor-core GEMM. gpu_bench --batch $BATCH
     # (default 4) of $P (default glm-4.7-flash,deepseek-v2-lite), A B B A
     PRESETS=${PRESETS:-glm-4.7-flash,deepseek-v2-lite} BATCH=${BATCH:-4} batch_ab large B:large-10m.diff ;;
  172) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call172: rejected, the journal) experiments/experts-picks-24.diff (B): a step's routed experts on the split (staged) GEMM from 24 picks and 3
     # tokens, not 48 and 5 (the staged kernel made those products ~10% faster alone since SPLIT_EXPERT_PICKS was set):
     # DeepSeek-V2-Lite's step of 4 (24 picks) and GLM-4.7-Flash's of 8 (32) leave the matvecs. gpu_bench --batch $BATCH
     # (default 4,8) of $P (default deepseek-v2-lite,glm-4.7-flash), A B B A
     PRESETS=${PRESETS:-deepseek-v2-lite,glm-4.7-flash} BATCH=${BATCH:-4,8} batch_ab picks B:experts-picks-24.diff ;;
  171) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call168; landed in b05fa2b, the diff removed): experiments/few-tokens-large.diff (B): a linear product of 3-4 tokens with at least 12M weights (the dense
     # FFNs, the output heads) on the tensor-core GEMM, the rest on the matvecs (call145: every product of 3-4 tokens on the
     # GEMM: Youtu-LLM-2B's step of 4 -10%, DeepSeek-V2-Lite's +8%). gpu_bench --batch $BATCH (default 4) of $P (default
     # youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash), A B B A
     PRESETS=${PRESETS:-youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash} BATCH=${BATCH:-4} batch_ab few B:few-tokens-large.diff ;;
  170) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call170; landed in b05fa2b, the diff removed): experiments/batching-queued-chunks.diff (B): a prompt beside running streams in chunks of up to 128 tokens
     # while another prompt waits behind it (the tree: 32 always; at 1.6 prompt tokens a generated one, 32-token chunks feed
     # ~20 streams, so 32 clients queue for their prompts: TTFT p50 0.5 / 1.1 / 1.8 s in calls 160-162). The server under
     # load on $M (default youtu-llm-2b), 32 slots, $CLIENTS (default 8,16,32), $VARIANTS (default B A; each server captures
     # its steps first, WAIT seconds, default 300: B captures 56 steps, A 42)
     M=${M:-youtu-llm-2b}; synth $M; tree /tmp/B batching-queued-chunks.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     for v in ${VARIANTS:-B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && exec python3 apps/llm.py --model $M --serve 8080 --parallel 32 --max-context 2048 --queue 64 > "$OUT/server_$v.log" 2>&1) &
       pid=$!
       timeout $(( $(left) - 5 )) python3 -m tools.load --port 8080 --clients ${CLIENTS:-8,16,32} --requests 16 --seconds ${SECS:-12} \
         --wait ${WAIT:-300} --json "$OUT/load_$v.json" 2>&1 | tail -5
       kill $pid; wait $pid 2>/dev/null
     done ;;
  169) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call201: rejected, prefill -23% / -25%, the journal) experiments/x-slots.diff (B): the tensor-core kernel's x records in 8 uint4 slots a token, uint4 j in slot
     # j ^ SWZ(token), so a fragment's loads of them take the fewest wavefronts (16-byte h / m words 8 -> 4, 8-byte l words 4
     # -> 2; call164: 3.1-way conflicts, 40% of the shared loads' wavefronts). Every build_mma kernel: a chunk's products too
     # (these were L1 / shared-memory bound, the journal). bench_gemm at 512 and 8 tokens of $MODELS (default dsv2) in the
     # tree and in /tmp/B, then gpu_bench --decode 32 --prefill 512 and --batch 8,16 of $P (default
     # youtu-llm-2b,deepseek-v2-lite) in the order $VARIANTS (default A B B A)
     tree /tmp/B x-slots.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     for tk in 512 8; do for d in . /tmp/B; do echo "-- $d $tk tokens"
       (cd $d && timeout 60 python3 -m tools.bench_gemm --tokens $tk --models ${MODELS:-dsv2} --iters 30 2>&1 | grep -v "^device\|^model")
     done; done
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --decode 32 --prefill 512 --json "$OUT/xslots_$v.$RANDOM.json" 2>&1 \
         | grep -v '^{' | grep -E "^(youtu|deepseek|glm|model)")
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-8,16} --decode 32 2>&1 | grep -v '^{' | tail -5)
     done ;;
  168) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call169; landed in b05fa2b, the diff removed): experiments/argmax-pad.diff (B): each row of logits padded with -inf to a multiple of 4096 for its argmax:
     # Youtu-LLM-2B's and GLM-4.7-Flash's vocabularies (2^8 x 501, 2^8 x 605) gave tinygrad's argmax 64 threads a row of ~2,000
     # logits each (r_2_32_4_501 49 us of a decode step, r_4_8_16_4_605 77 us of a step of 8, profiles of call123 / call157),
     # DeepSeek-V2-Lite's 2^12 x 25 4,096 threads a row (9-10 us). gpu_bench --batch $BATCH (default 1,8) of $P (default
     # youtu-llm-2b,glm-4.7-flash), A B B A
     PRESETS=${PRESETS:-youtu-llm-2b,glm-4.7-flash} BATCH=${BATCH:-1,8} batch_ab argmax B:argmax-pad.diff ;;
  167) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the staged tensor-core kernel's rule (gemm.mma_stages: a batched step's routed experts of at most 8 tokens) against the
     # registers everywhere (B: experiments/gemm-registers.diff). Measured before it landed (call165) with the broader rule
     # (any Q4_0 product of up to 16 tokens): DeepSeek-V2-Lite's step of 8 -5.8%, the steps of 16 and Youtu-LLM-2B's slower;
     # this is the landed rule's own A/B. First bench_gemm --stages 0,4 at 8 tokens of $MODELS' (default dsv2) routed
     # products, then gpu_bench --batch $BATCH (default 4,8,16) of $P (default deepseek-v2-lite,glm-4.7-flash), A B B A
     (timeout $(( $(left) / 4 )) python3 -m tools.bench_gemm --tokens 8 --models ${MODELS:-dsv2} --only gate_up_exps,down_exps \
       --sweep steps --steps 2,4 --mbs 3,4 --stages 0,4 --iters 30 2>&1 | tee "$OUT/staged_8.txt" | grep -v "^device")
     PRESETS=${PRESETS:-deepseek-v2-lite,glm-4.7-flash} BATCH=${BATCH:-4,8,16} batch_ab staged B:gemm-registers.diff ;;
  166) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # MEASURED (call180: landed for the step of 5-8 only, the diff removed) experiments/few-token-steps.diff (B): a tile of at most 16 tokens and 2 row blocks a warp takes 4 sub-steps a
     # step (a batched step's products; call164: the output head 159 -> 124 us alone, DeepSeek-V2-Lite's routed down 45 -> 40;
     # slices follow: the routed down unsplit, the Q6_K shared down in 2). gpu_bench --batch 8,16 of $P (default
     # youtu-llm-2b,deepseek-v2-lite), A B B A
     PRESETS=${PRESETS:-youtu-llm-2b,deepseek-v2-lite} batch_ab steps B:few-token-steps.diff ;;
  165) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/few-token-tile.diff (B): a product of few tokens with K whole (a batched step's output head,
     # split 1) takes a tile of its tokens rounded to 8, not 32 (the x records of 24 padding tokens staged each step). The
     # output head alone at 8 tokens in the tile sweep, then gpu_bench --batch 8,16 of $P (default youtu-llm-2b,deepseek-v2-lite)
     # A B B A; then (NCU=1) Nsight Compute on the routed gate_up as in 164 while time is left
     timeout 60 python3 -m tools.bench_gemm --tokens 8 --models dsv2 --only output --sweep tiles --steps 2,4 --mbs 3 --iters 30 2>&1 | grep -v "^device"
     PRESETS=${PRESETS:-youtu-llm-2b,deepseek-v2-lite} batch_ab tile B:few-token-tile.diff
     [ -z "$NCU" ] || { echo "-- ncu $(date +%T)"; DEADLINE=$(left) bash runs/2026-12-01-gen/run.sh 164; } ;;
  164) # what bounds the products of a batched step of 8 (call158-159: the routed experts at ~1.4-1.6 TB/s at any steps /
     # workgroups an SM / slices, the streaming kernel no better; the Q6_K output head at 0.78 TB/s where one token's matvec
     # makes 1.8): Nsight Compute's full set on one launch of DeepSeek-V2-Lite's routed gate_up at 8 tokens (bench_gemm:
     # uniform routing, the rule's slices), then 8 sub-steps a step (a row's 128 bytes at once) beside the rule, then the full
     # set on the output head; the reports in $OUT/ncu_<product>.txt
     nc() {
       timeout $(( $(left) - ${2:-5} )) ncu --set full --clock-control none --launch-skip 3 --launch-count 1 --kernel-name regex:"${1#*:}" \
         python3 -m tools.bench_gemm --tokens 8 --models dsv2 --only ${1%:*} --iters 2 > "$OUT/ncu_${1%:*}.txt" 2>&1
       grep -E "^  [a-z_0-9]+\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Warp Cycles Per Issued|Issue Slots Busy|Stall|No Eligible|Compute \(SM\) Throughput|Memory Throughput|Block Limit|Mem Busy|Max Bandwidth|L1/TEX Hit|L2 Hit|Active Warps|Eligible" \
         "$OUT/ncu_${1%:*}.txt" | head -45
     }
     nc gate_up_exps:gemm_mma_q4_0_8_1408 150
     timeout $(( $(left) - 75 )) python3 -m tools.bench_gemm --tokens 8 --models dsv2 --only gate_up_exps,down_exps,output --sweep steps \
       --steps 8,4 --mbs 3 --splits 1,2 --iters 30 2>&1 | grep -v "^device"
     timeout $(( $(left) - 60 )) python3 -m tools.bench_gemm --tokens 8 --models dsv2 --only output --sweep tiles --steps 2,4 --mbs 3 \
       --iters 30 2>&1 | grep -v "^device\|^model"   # the rule's 32-token tile for 8 tokens (x records 4x the tokens) against 8 and 16
     nc output:gemm_mma_q6_k_8_102400 ;;
  163) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/experts-stream.diff (B) in the model: the routed experts of a step of up to 16 sequences on the
     # streaming kernel (gemm.build_mma_stream, K in 2 slices), and from 32 picks (GLM-4.7-Flash's 8 x 4 too), against the
     # tree (A: build_mma's expert x band x slice workgroups from 48 picks, the matvecs below); first (unless NOSWEEP) 162 at
     # 8 tokens. gpu_bench --batch $BATCH (default 1,8,16) --decode 32 of $P (default deepseek-v2-lite,glm-4.7-flash), in the
     # order $VARIANTS (A B B A); the rows' tokens against each prompt alone ("agree")
     [ -n "$NOSWEEP" ] || TOKENS=8 DEADLINE=$((SECONDS + ${SWEEP_S:-100})) bash runs/2026-12-01-gen/run.sh 162
     PRESETS=${PRESETS:-deepseek-v2-lite,glm-4.7-flash} BATCH=${BATCH:-1,8,16} batch_ab stream B:experts-stream.diff ;;
  162) # EXPERIMENT experiments/experts-stream.diff's kernel (gemm.build_mma_stream: persistent workgroups, each running its
     # units of chosen expert x band x slice back to back) against the rule's build_mma (call158: DeepSeek-V2-Lite's step-of-8
     # gate_up 75 us, any steps / occupancy / slices of build_mma 72-75), alone: `bench_gemm --stream` in /tmp/B at $TOKENS
     # (default 8 16) of $MODELS (default dsv2,glm), steps ($STEPS) x workgroups an SM ($MBS) x slices ($SPLITS): the tree's
     # rule's row, B's, and B's fastest 6 a product
     tree /tmp/B experts-stream.diff || exit 1
     for tk in ${TOKENS:-8 16}; do
       echo "-- the tree's rule, $tk tokens"   # (B's own rule row below splits as the diff splits)
       timeout $(($(left) - 3)) python3 -m tools.bench_gemm --tokens $tk --models ${MODELS:-dsv2,glm} --only gate_up_exps,down_exps --iters 50 \
         2>&1 | grep -v "^model\\|^device"
       echo "-- B, $tk tokens"
       (cd /tmp/B && timeout $(($(left) - 3)) python3 -m tools.bench_gemm --tokens $tk --models ${MODELS:-dsv2,glm} --only gate_up_exps,down_exps \
         --stream --steps ${STEPS:-4,2,1} --mbs ${MBS:-2,3,4,6,8} --splits ${SPLITS:-1,2,4} --iters 50 > "$OUT/stream_$tk.txt" 2>&1)
       grep -v "^model\\|^device\\| stream " "$OUT/stream_$tk.txt"
       grep " stream " "$OUT/stream_$tk.txt" | sort -k1,2 -k11,11n | awk 'c[$1 $2]++ < 6'
     done ;;
  161) # the routed experts' products of a batched step of 8 sequences alone (bench_gemm --tokens 8: uniform routing, the
     # rule's K slices) and every steps x workgroups-per-SM x slices variant of their tile (call157: DeepSeek-V2-Lite's
     # gate_up 83 us for 113 MB, 1.4 TB/s; 103 registers, four workgroups an SM), of $MODELS (default dsv2,glm)
     timeout $(($(left) - 3)) python3 -m tools.bench_gemm --tokens ${TOKENS:-8} --models ${MODELS:-dsv2,glm} --only gate_up_exps,down_exps \
       --sweep steps --steps 4,2,1 --mbs ${MBS:-1,3,4,6,8} --splits ${SPLITS:-1,2,4,8} --iters 50 2>&1 | tee "$OUT/sweep.txt" | grep -v "^model" | sort -k1,2 -k12,12n | awk 'c[$1 $2]++ < 8' ;;
  160) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # where a step of 8 sequences and a mixed turn go, kernel by kernel, with each row continuing a token of its own
     # (Bench.distinct_tokens: the profiles before it repeated one token in every row, which a MoE model routes to the same
     # 6 or 4 experts: DeepSeek-V2-Lite's step of 8 3.24 ms there, 5.36 in gpu_bench's generate): tools.profile --target
     # decode --batch $BATCH (default 8) and --target mixed --batch $BATCH --chunk 32 of $P (default
     # deepseek-v2-lite,glm-4.7-flash; KINDS=rows: the step alone), tables in $OUT/prof_<model>_<rows or 32>_b<B>.txt (the routed
     # products' bytes: the experts the step's tokens reach, WeightRef.share). The step of 4 of all three models:
     # BATCH=4 KINDS=rows PRESETS=youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash
     P=${PRESETS:-deepseek-v2-lite,glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     for m in ${P//,/ }; do for c in ${KINDS:-rows 32}; do
       a="--target mixed --chunk $c"; [ $c = rows ] && a="--target decode"
       f="$OUT/prof_${m}_${c}_b${BATCH:-8}.txt"
       timeout $(($(left) - 3)) python3 -m tools.profile --model $m $a --batch ${BATCH:-8} --pos 256 --top 8 > "$f" 2>&1
       grep -E "^(decode|mixed):|critical path|\(all\)" "$f"
     done; done ;;
  159) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/sampler-two-stage.diff (B): each radix pass of the sampler's top-k / top-p select counts per
     # 1,024 keys and then over the blocks (two reductions), where the tree counts each of the 16 candidates in one (call146:
     # DeepSeek-V2-Lite's sampled step 2.42 ms against 1.60 with 1 bit a pass; Youtu-LLM-2B's 2.81). gpu_bench --decode 64
     # ("sampled ms": the CLI's and the server's default chain) of $P (default youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash), in
     # the order $VARIANTS (A B B A)
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     tree /tmp/B sampler-two-stage.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --decode 64 --json "$OUT/sampler_$v.$RANDOM.json" 2>&1 \
         | grep -v '^{' | grep -E "^(youtu|deepseek|glm|model)")
     done ;;
  158) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/router-matvec-64.diff (B): an f32 product (the MoE router) of 9-64 tokens on the decode matvec,
     # its norm in x's staging, where the tree runs the norm's two generated kernels and the portable product (call149:
     # DeepSeek-V2-Lite's mixed step 35 us a block one by one, 1.36 of its 17.2 ms summed). gpu_bench --batch $BATCH (default
     # 8) --decode 32 --mixed 512 --mixed-chunk 32 of $P (default deepseek-v2-lite,glm-4.7-flash), in the order $VARIANTS
     # (A B B A)
     P=${PRESETS:-deepseek-v2-lite,glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     tree /tmp/B router-matvec-64.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-8} --decode 32 --mixed 512 \
         --mixed-chunk 32 --json "$OUT/router_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -3)
     done ;;
  157) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/prefill-mma-split.diff (B): a chunk of fewer than 64 tokens of a model whose heads fill 16-row
     # tiles (Youtu-LLM-2B, DeepSeek-V2-Lite: 16) attends on the tensor cores with its keys split over grid y (prefill_splits,
     # the combine's partials), where the tree takes the CUDA-core split kernel (call150: 34 us a block for 32 tokens at ~290
     # keys, and the unsplit tensor-core kernel 64). gpu_bench --batch $BATCH (default 8) --decode 32 --mixed 512
     # --mixed-chunk 32 of $P (default youtu-llm-2b,deepseek-v2-lite), in the order $VARIANTS (A B B A); then B's paths with
     # every chunk 32 tokens (path_check --no-generated --chunks 32 --depth 0,600) and --mixed
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     tree /tmp/B prefill-mma-split.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-8} --decode 32 --mixed 512 \
         --mixed-chunk 32 --json "$OUT/mmasplit_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -3)
     done
     (cd /tmp/B && timeout $(($(left) - 3)) python3 -m tools.path_check --presets $P --depth 0,600 --no-generated --chunks 32 2>&1 | tail -6
      timeout $(($(left) - 3)) python3 -m tools.path_check --presets $P --mixed 2>&1 | grep -v "^device" | tail -3) ;;
  156) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/prefill-min-chunk-32.diff (B) and -16.diff (C): the split prefill kernel's splits of at least 32
     # / 16 keys, where the tree takes 64 (call150: a 32-token chunk's split attend 34 us a block at ~290 keys: 5 splits of 64,
     # 160 workgroups). gpu_bench --batch $BATCH (default 8) --decode 32 --mixed 512 --mixed-chunk 32 of $P (default
     # youtu-llm-2b,deepseek-v2-lite), in the order $VARIANTS (A B C C B A); then, where time is left, path_check
     # --no-generated --chunks 32 --depth 0,600 of C
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     tree /tmp/B prefill-min-chunk-32.diff && tree /tmp/C prefill-min-chunk-16.diff || exit 1
     for d in . /tmp/B /tmp/C; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     for v in ${VARIANTS:-A B C C B A}; do
       d=.; [ $v != A ] && d=/tmp/$v; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-8} --decode 32 --mixed 512 \
         --mixed-chunk 32 --json "$OUT/minc_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -3)
     done
     (cd /tmp/C && timeout $(($(left) - 3)) python3 -m tools.path_check --presets $P --depth 0,600 --no-generated --chunks 32 2>&1 | tail -6) ;;
  155) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # experiments/prefill-split-short.diff (B = the tree since call150; A = the tree with it reversed): a chunk of fewer than
     # 64 tokens attends in the split CUDA-core prefill kernel and its combine, not the tensor cores' (call149: a mixed turn's
     # 32-token chunk's mla_prefill_mma_32 2.05 ms of Youtu-LLM-2B's 5.83, 64 us a block: 32 workgroups each walking every
     # key). gpu_bench --batch $BATCH (1,8) --mixed 512 --mixed-chunk 32 of $P (default youtu-llm-2b,deepseek-v2-lite) in the
     # order $VARIANTS (A B), then tools.profile --target mixed --batch 8 --chunk 32 of B on ${P%%,*}
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     tree /tmp/A prefill-split-short.diff -R || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     for v in ${VARIANTS:-A B}; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-1,8} --decode 32 --mixed 512 \
         --mixed-chunk 32 --json "$OUT/short_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -6)
     done
     (timeout $(($(left) - 3)) python3 -m tools.profile --model ${P%%,*} --target mixed --batch 8 --chunk 32 --pos 256 --top 8 \
       > "$OUT/prof_B_${P%%,*}.txt" 2>&1); grep -E "^mixed:|prefill|combine" "$OUT/prof_B_${P%%,*}.txt" ;;
  154) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # where a mixed turn goes, kernel by kernel: tools.profile --target decode --batch 8 (the step of 8 rows) and --target
     # mixed --batch 8 --chunk C (with a prompt's chunk of C tokens as further rows) for each C of $CHUNKS (default 32 8), each
     # model of $P (default youtu-llm-2b,deepseek-v2-lite), tables in $OUT/prof_<model>_<C or rows>.txt; first, with A_PATHS,
     # path_check --no-generated at depth 600 of the tree with experiments/chunk-rows.diff reversed (153's paths before it), then the tree's
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     if [ -n "$A_PATHS" ]; then
       tree /tmp/A chunk-rows.diff -R || exit 1
       for d in /tmp/A .; do echo "-- paths $d"
         (cd $d && timeout $(($(left) - 3)) python3 -m tools.path_check --presets $A_PATHS --depth 600 --no-generated 2>&1 | tail -3); done
     fi
     for m in ${P//,/ }; do for c in rows ${CHUNKS:-32 8}; do
       a="--target mixed --chunk $c"; [ $c = rows ] && a="--target decode"
       timeout $(($(left) - 3)) python3 -m tools.profile --model $m $a --batch 8 --pos 256 --top 8 > "$OUT/prof_${m}_$c.txt" 2>&1
       grep -E "^(decode|mixed):|critical path|\(all\)" "$OUT/prof_${m}_$c.txt"
     done; done ;;
  153) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # experiments/chunk-rows.diff (B = the tree, A = the tree with it reversed; it reverses on the tree of calls 147-149 only:
     # the split prefill, 155, changed its context): a prefill chunk's latent rows
     # (norm, rope, the store) and q_pe's rope in one hand-written kernel (mla_chunk_rows) where ~8 generated kernels a block
     # made them; the projections' outputs read in place at a symbolic chunk length; a mixed step's k_b one product for both
     # parts. Paths first (B, unless NOPATHS: path_check --no-generated at depths 0 and 600, then --mixed), then, in the
     # order $VARIANTS (A B), gpu_bench --batch $BATCH (1,8) --mixed 512 --mixed-chunk $CHUNK (32) and the single stream's
     # decode and 512-token prefill, of $P (default youtu-llm-2b,deepseek-v2-lite)
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     tree /tmp/A chunk-rows.diff -R || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     if [ -z "$NOPATHS" ]; then
       timeout $(($(left) - 60)) python3 -m tools.path_check --presets $P --depth 0,600 --no-generated 2>&1 | tail -8
       timeout $(($(left) - 60)) python3 -m tools.path_check --presets $P --mixed 2>&1 | tail -8
     fi
     for v in ${VARIANTS:-A B}; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-1,8} --decode 32 --mixed 512 \
         --mixed-chunk ${CHUNK:-32} --json "$OUT/rows_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -6)
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --decode 64 --json "$OUT/single_$v.$RANDOM.json" 2>&1 \
         | grep -v '^{' | grep -E "^(youtu|deepseek|glm|model)" | head -4)
     done ;;
  152) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/few-tokens-2.diff (B) and few-tokens-1.diff (C): a batched step of 3-4 (B) or 2-4 (C) sequences
     # on the split tensor-core GEMM where the tree keeps up to 4 on the matvecs (gemm.FEW_TOKENS); call140: Youtu-LLM-2B's
     # step of 4 took 2.62 ms against 2.38 for 8. gpu_bench --batch $BATCH (default 2,4,8) of $PRESETS (default
     # youtu-llm-2b,deepseek-v2-lite), in the order $VARIANTS (A B C C B A)
     BATCH=${BATCH:-2,4,8} VARIANTS=${VARIANTS:-A B C C B A} batch_ab few B:few-tokens-2.diff C:few-tokens-1.diff ;;
  151) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/mixed-one-form.diff: one capture of a mixed step for a prompt's chunks, its last or not (the
     # chunk's last row always sampled, as row B; its slot -1 before the last chunk: no sampler state moves), where the tree
     # captures two: a server's warmup a quarter fewer captures, one more head and sampler row on every mixed turn. gpu_bench
     # --batch $BATCH (default 1,8,16) --mixed 512 of $P (default deepseek-v2-lite,youtu-llm-2b), A = the tree, B = the diff,
     # $VARIANTS (A B B A); then, where time is left, tools.start_time --serve 8 --presets ${P%%,*} B then A
     P=${PRESETS:-deepseek-v2-lite,youtu-llm-2b}; (for m in ${P//,/ }; do synth $m & done; wait)
     tree /tmp/B mixed-one-form.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-1,8,16} --decode 32 --mixed 512 \
         --json "$OUT/mixed1_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -8)
     done
     for v in B A; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- start $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.start_time --presets ${P%%,*} --serve 8 --json "$OUT/start1_$v.json" 2>&1 | tail -3)
     done ;;
  150) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # decode with llama.cpp's default sampling (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8: the CLI's and the server's
     # default), gpu_bench's "sampled ms" beside the greedy step: B = the tree (the radix select 4 bits a pass, 57 sampler
     # kernels a step), A = the tree with experiments/sampler-radix4.diff reversed (1 bit a pass, 153); $P (default
     # youtu-llm-2b,deepseek-v2-lite; PRESETS=glm-4.7-flash alone) in the order $VARIANTS (A B B A), --decode 64 --prefill 512
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait)
     tree /tmp/A sampler-radix4.diff -R || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --decode 64 --json "$OUT/sampled_$v.$RANDOM.json" 2>&1 \
         | grep -v '^{' | tail -6)
     done ;;
  149) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # SUPERSEDED by 180 (a server answers after one request's steps since 2026-12-07; tools.start_time --serve times both):
     # a server's first start (every batch size's steps captured, greedy and llama.cpp's default sampling) with the sampler's
     # radix select as it is (B = the tree: 4 bits a pass from (16,) buffers, its passes one AST) against f555886's (A = the
     # tree with experiments/sampler-f555886.diff, f555886's apps/sampling.py: 32 passes of 1 bit a constant, ~130 kernels
     # lowered and compiled a distinct row count): tools.start_time --serve $PAR (default 8) --sampled (the first tokens with the
     # default sampling) of $M (default deepseek-v2-lite), each variant in scratch caches of its own, in the order $VARIANTS (A B)
     M=${M:-deepseek-v2-lite}; synth $M; tree /tmp/A sampler-f555886.diff || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     for v in ${VARIANTS:-A B}; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.start_time --presets $M --serve ${PAR:-8} --sampled --json "$OUT/start_$v.json" 2>&1 | tail -3)
     done ;;
  148) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/batching-chunks-always.diff (B): a prompt beside running requests always in chunks of up to
     # batching.QUEUED_CHUNK (128), where the tree takes the shortest (32) unless another prompt waits behind it. MEASURED on
     # Youtu-LLM-2B (call173: rejected, the journal; dense, a chunk's products grow with it). On the MoE models
     # (M=deepseek-v2-lite CLIENTS=1,8 WAIT=400, then M=glm-4.7-flash) a 32-token chunk's 128-240 picks reach nearly every
     # routed expert (DeepSeek-V2-Lite: ~311 MB a block in call149; a turn of 8 rows and the chunk 10.1 ms, 8 rows 5.4), so a
     # longer chunk reads those weights once for 4x the prompt tokens. The server under load on $M (default youtu-llm-2b), $SLOTS
     # (default 32) slots (8: a server that captures the steps of 1-8 rows only), $CLIENTS (default 1,8,32), $VARIANTS (default B A). Each variant keeps its captures in a cache of its own (B:
     # .cache/b, the models, vocabulary and compiled kernels shared; one cache would drop the other code's captures as it
     # writes), so a second call on a warm machine loads both; a first call may spend its time capturing (WAIT, default 260)
     M=${M:-youtu-llm-2b}; synth $M; tree /tmp/B batching-chunks-always.diff || exit 1
     mkdir -p .cache/b; for x in models vocab tinygrad; do [ -e .cache/b/$x ] || ln -s ../$x .cache/b/$x; done
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     for v in ${VARIANTS:-B A}; do
       d=.; c=$PWD/.cache; [ $v = B ] && d=/tmp/B && c=$PWD/.cache/b; echo "-- $v $(date +%T)"
       (cd $d && TINYGRAD_MLA_CACHE=$c exec python3 apps/llm.py --model $M --serve 8080 --parallel ${SLOTS:-32} --max-context 2048 --queue 64 \
         > "$OUT/server_$v.log" 2>&1) &
       pid=$!
       timeout $(( $(left) - 5 )) python3 -m tools.load --port 8080 --clients ${CLIENTS:-1,8,32} --requests 16 --seconds ${SECS:-10} \
         --wait ${WAIT:-260} --json "$OUT/load_$v.json" 2>&1 | tail -5
       kill $pid; wait $pid 2>/dev/null
     done ;;
  147) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # batched decode beside llama.cpp in one run (carry .cache/llama/llama-cpp-src.tar.xz): llama.cpp built while the
     # models of $M (default youtu-llm-2b; several: space-separated) are synthesized, then for each gpu_bench --batch $BATCH
     # (default 1,4,8,16,32) --llama: our aggregate tok/s against llama-batched-bench's best S_TG (flash attention off and
     # on) at each number of sequences
     [ -x .cache/llama/build/bin/llama-bench ] || (python3 -m tools.llama_bench build --time-limit 370 > "$OUT/llama_build.log" 2>&1) &
     M=${M:-youtu-llm-2b}; synth $M; echo "synthesized $(date +%T)"
     wait; tail -2 "$OUT/llama_build.log" 2>/dev/null; echo "built $(date +%T)"
     for m in $M; do
       timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $m --batch ${BATCH:-1,4,8,16,32} --decode 32 --llama \
         --json "$OUT/batch_llama_$m.json" 2>&1 | grep -v '^{' | tail -9
     done ;;
  146) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the server under the issue's load on $M (default youtu-llm-2b): 32 slots, $CLIENTS (default 1,4,8,16,32) streaming
     # clients, $REQ (default 4) requests each, its load json in $OUT; then 300 requests with faults mixed in and the idle check
     M=${M:-youtu-llm-2b}; synth $M
     (exec python3 apps/llm.py --model $M --serve 8080 --parallel 32 --max-context 2048 --queue 64 > "$OUT/server_$M.log" 2>&1) &
     pid=$!
     timeout $(($(left) - 70)) python3 -m tools.load --port 8080 --clients ${CLIENTS:-1,4,8,16,32} --requests ${REQ:-16} --seconds ${SECS:-12} \
       --wait 400 --json "$OUT/load_$M.json" 2>&1 | tail -8
     timeout $(($(left) - 5)) python3 -m tools.load --port 8080 --faults 300 --wait 10 2>&1 | tail -3
     kill $pid; wait $pid 2>/dev/null ;;
  145) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # what a prompt token costs the running streams as rows of their steps, by chunk length: gpu_bench --batch $BATCH
     # (default 1,8,16) --mixed 512 of $P (default deepseek-v2-lite,youtu-llm-2b) with the prompt in chunks of each of $CHUNKS
     # (default 8 32 128; a length the model lacks, such as 8, gpu_bench adds): ms a turn and turns (512 / chunk), the chunk
     # between the steps beside it
     P=${PRESETS:-deepseek-v2-lite,youtu-llm-2b}; synth ${P//,/ }; echo "synthesized $(date +%T)"
     for c in ${CHUNKS:-8 32 128}; do
       echo "-- chunk $c $(date +%T)"
       timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-1,8,16} --decode 32 --mixed 512 \
         --mixed-chunk $c --json "$OUT/chunk$c.$RANDOM.json" 2>&1 | grep -v '^{' | tail -8
     done ;;
  141) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # a split product's slices and residual added by the next norm's x quantization (B = experiments/xq-residual-sums.diff:
     # o's and down's sums, a workgroup a row, the sum written for the later readers; Youtu-LLM-2B's step of 8 618 -> 554
     # kernels), one x quantization for products that read the same x in the same form (C = experiments/xq-shared-forms.diff:
     # a MoE block's shared and routed gate_up; DeepSeek-V2-Lite's step of 8 650 -> 624), D = both
     # (xq-residual-sums-shared-forms.diff), A = the tree; gpu_bench --batch $BATCH (default 8,16) of $P (default
     # youtu-llm-2b,deepseek-v2-lite), in the order $VARIANTS (A B C D D C B A); then, where time is left, tools.path_check
     # --mixed on D (a prompt as rows of another sequence's steps against alone). Ran at a356ae3 (call141); C landed after, so
     # today B and D are a356ae3's tree with those diffs (xq-residual-sums-shared-forms.diff is in its history)
     VARIANTS=${VARIANTS:-A B C D D C B A} batch_ab ressum B:xq-residual-sums.diff C:xq-shared-forms.diff D:xq-residual-sums-shared-forms.diff
     (cd /tmp/D && timeout $(($(left) - 3)) python3 -m tools.path_check --presets ${P%%,*} --mixed 2>&1 | tail -8) ;;
  139) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # a split SwiGLU product's sum left to the next product's x quantization (silu(gate) * up made from the slices): A = the
     # tree with experiments/xq-glu-slices.diff reversed, B = the tree; gpu_bench --batch $BATCH (default 8,16) of $P (default
     # youtu-llm-2b,deepseek-v2-lite), in the order $VARIANTS (A B B A)
     batch_ab glu A:xq-glu-slices.diff:-R ;;
  135) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # a step of 5-8 sequences, the two prepared changes apart and together: A = the tree, B = experiments/gemm-strided-x.diff
     # (q_b and k_b on the tensor-core GEMM, x read in place), C = experiments/xq-norm-registers.diff (the normed xq loads its
     # row once), D = both (experiments/gemm-strided-x-norm-registers.diff); gpu_bench --batch $BATCH (default 1,8) of $P
     # (default youtu-llm-2b,deepseek-v2-lite), in the order $VARIANTS
     tree /tmp/B gemm-strided-x.diff && tree /tmp/C xq-norm-registers.diff && tree /tmp/D gemm-strided-x-norm-registers.diff || exit 1
     for d in . /tmp/B /tmp/C /tmp/D; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     for v in ${VARIANTS:-A D B C C B D A}; do
       d=.; [ $v = A ] || d=/tmp/$v; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-1,8} --decode 32 \
         --json "$OUT/b8_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -6)
     done ;;
  131) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # a batched step's kernels fewer: A = the tree, B = experiments/split-sums-in-gemm.diff (a split product's slices added
     # up by its last workgroup, tickets zeroed by the xq kernel), C = B with experiments/vb-matvec.diff (v_b of up to 8
     # sequences on the batched matvec: no x quantization kernel before it), D = experiments/xq-in-gemm.diff (B with x read
     # and rounded by the split GEMM itself, its norm too, tickets set back by the last workgroup) with vb-matvec.diff
     # (Youtu-LLM-2B's step of 8 rendered: 586 / 458 / 426 / 298 kernels); gpu_bench of $P (default
     # youtu-llm-2b,deepseek-v2-lite) at $BATCH sequences, in the order $VARIANTS
     tree /tmp/B split-sums-in-gemm.diff && tree /tmp/C split-sums-in-gemm.diff && tree /tmp/D xq-in-gemm.diff || exit 1
     for d in C D; do patch -s -p1 -d /tmp/$d < runs/2026-12-01-gen/experiments/vb-matvec.diff || exit 1; done
     for d in . /tmp/B /tmp/C /tmp/D; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     for v in ${VARIANTS:-A D D A B C}; do
       d=.; [ $v = A ] || d=/tmp/$v; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-1,8,16} --decode 32 \
         --json "$OUT/fewer_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -8)
     done ;;
  129) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the mixed step's products of 33-64 tokens split in K (B = the tree, which has it since 2026-12-05; A = the tree with
     # experiments/mixed-split-k.diff reversed), gpu_bench --mixed of $P (default youtu-llm-2b,deepseek-v2-lite) in the order
     # $VARIANTS (B A); SERVE=1 instead: the server under load on $M (default deepseek-v2-lite), C = the tree (its new prompts'
     # chunks as rows of the running steps, since 2026-12-05), A = the tree with batching-mixed.diff reversed (the chunks
     # between the steps), $VARIANTS (A C); PAR slots (32), CLIENTS
     # (1,8,16), WAIT seconds for the warmup (150), LEVEL_S seconds for a variant's warmup and load (240)
     if [ -n "$SERVE" ]; then
       M=${M:-deepseek-v2-lite}; synth $M; tree /tmp/A batching-mixed.diff -R || exit 1
       for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
       for v in ${VARIANTS:-A C}; do
         d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $(date +%T)"
         (cd $d && exec python3 apps/llm.py --model $M --serve 8080 --parallel ${PAR:-32} --max-context 2048 --queue 64 > "$OUT/server_$v.log" 2>&1) &
         pid=$!
         timeout $(( $(left) > ${LEVEL_S:-240} ? ${LEVEL_S:-240} : $(left) - 5 )) python3 -m tools.load --port 8080 --clients ${CLIENTS:-1,8,16} \
           --requests 3 --seconds 30 --wait ${WAIT:-150} 2>&1 | tail -5
         kill $pid; wait $pid 2>/dev/null
       done; exit
     fi
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; tree /tmp/A mixed-split-k.diff -R || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     synth ${P//,/ }; echo "synthesized $(date +%T)"
     for v in ${VARIANTS:-B A}; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 5)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-1,4,8,16} --decode 32 --mixed ${MIX:-256} \
         --json "$OUT/mixedk_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -12)
     done ;;
  128) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the fast-start issue's one missed target in one call: Youtu-LLM-2B's second process beside llama.cpp (LLAMA=1 builds it
     # first, beside the synthesis, ~300 s), A = the tree (patches/0075: planned views without a rewrite; the vocabulary in
     # one map), B = experiments/host-register.diff, C = experiments/early-cuinit.diff, D = both; a second process's start and
     # its load phases in the order $VARIANTS (the first token must match in all)
     tree /tmp/B host-register.diff && tree /tmp/C early-cuinit.diff && tree /tmp/D host-register.diff || exit 1
     patch -s -p1 -d /tmp/D < runs/2026-12-01-gen/experiments/early-cuinit.diff || exit 1
     for d in . /tmp/B /tmp/C /tmp/D; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     [ -z "$LLAMA" ] || [ -x .cache/llama/build/bin/llama-bench ] || (python3 -m tools.llama_bench build --time-limit 370 \
       > "$OUT/llama_build.log" 2>&1) &
     P=${PRESETS:-youtu-llm-2b}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     wait; echo "built $(date +%T)"
     extra=; [ -x .cache/llama/build/bin/llama-bench ] && extra=--llama
     start_ab st4 "${VARIANTS:-A B C D D C B A}" A ;;
  121) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # (LLAMA=1: llama.cpp built first, beside the synthesis, ~300 s: then VARIANTS=B alone fits the call)
     # a second process's start with the imports' bytecode written first (tools.start_time's deps_bytecode: the image's numpy,
     # regex and jinja2 come without it, call11's -X importtime put numpy at 0.30 s and regex's core at 0.06), the tokenizer's
     # tables by C-level iteration and device_empty without reshape's simplify: A = the tree with 8c45531's apps/ and
     # tools/start_time.py (none of the three), B = the tree; A B A (B writes the bytecode, so the second A has it too: A1 -> A2
     # is the bytecode, A2 -> B the two load changes); llama.cpp beside them where a build is on the machine
     tree /tmp/A && git -C /tmp/A checkout -q 8c45531 -- apps tools/start_time.py || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     [ -z "$LLAMA" ] || [ -x .cache/llama/build/bin/llama-bench ] || (python3 -m tools.llama_bench build --time-limit 370 \
       > "$OUT/llama_build.log" 2>&1) &
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     wait; echo "built $(date +%T)"
     extra=; [ -x .cache/llama/build/bin/llama-bench ] && extra=--llama
     start_ab st "${VARIANTS:-A B A}" B ;;
  125) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/decode-t-depth.diff: GLM-4.7-Flash's 20 heads over an fp16 cache on the CUDA cores below 2,048
     # keys and attend_mma_t_kernel from there, one depth kernel (its 10 warps cap ptxas at 168 registers: the transposed
     # branch spills 148 bytes, sm_90), where attend_mma_t_kernel alone serves every depth today (at 576 keys a step is 2.86
     # ms over fp16 against ~2.43 over f32, call123). The short context over f32 once (the tree), then over fp16 A B B A (A =
     # the tree, B = the diff), then decode at $DEPTHS over fp16, B A
     tree /tmp/B decode-t-depth.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     synth glm-4.7-flash; echo "synthesized $(date +%T)"
     echo "-- f32 $(date +%T)"
     timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets glm-4.7-flash --decode 64 --prefill 512 --json "$OUT/t_f32.json" 2>&1 \
       | grep -E '^glm.*[0-9]\.[0-9]+ +[0-9]'
     for v in A B B A; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v f16 $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets glm-4.7-flash --cache-type f16 --decode 64 --prefill 512 \
         --json "$OUT/t_short_$v.$RANDOM.json" 2>&1 | grep -E '^glm.*[0-9]\.[0-9]+ +[0-9]')
     done
     for v in B A; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v depths $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets glm-4.7-flash --cache-type f16 --decode 32 \
         --depths ${DEPTHS:-4096,16384,32768} --json "$OUT/t_depth_$v.json" 2>&1 | grep -v '^{' | tail -4)
     done ;;
  124) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/early-cuinit.diff: cuInit on a thread from apps/__init__ on, beside the imports (0.33-0.38 s a
     # process, call122) instead of after them on Opening's worker. First: the libcuda files the process maps with it (one
     # expected: the loader's libcuda.so.1 and tinygrad's search must be the same file). A = the tree, C = the diff: a second
     # process's start and its load phases in the order $VARIANTS
     tree /tmp/C early-cuinit.diff || exit 1
     for d in . /tmp/C; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     (cd /tmp/C && python3 -c "import apps, time; time.sleep(0.5); from tinygrad import Device; Device['CUDA']
print('libcuda files mapped:', sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libcuda' in l}))")
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     start_ab cuinit "${VARIANTS:-A C C A}" A ;;
  123) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/host-register.diff: the file's tensor bytes pinned for the device (cuMemHostRegister, read-only,
     # on Opening's worker beside the vocabulary's parse), so a tensor's blocks go to the device from the mapped file itself,
     # without the memmove into a pinned slot (~320 of Youtu-LLM-2B's ~450 ms of weights, 2.3-2.7 GB/s: call122). A = the
     # tree, B = the diff: a second process's start and its load phases in the order $VARIANTS (the first token must match)
     tree /tmp/B host-register.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     for m in ${P//,/ }; do   # whether the driver pins the file, and how long that takes (a failed pin leaves B as A)
       (cd /tmp/B && python3 -c "import time; from apps import synth, readback; from apps.gguf import GGUFFile
gf = GGUFFile(synth.generate('$m', 'release', progress=False)); o = readback.Opening(None); t = time.perf_counter(); o.reserve(0, gf.tensor_bytes()); o.wait()
st = readback._stagings.get(o.device); print('$m pinned', st is not None and st.pinned is not None, round(gf.tensor_bytes().nbytes / 1e9, 2), 'GB in', round(time.perf_counter() - t, 3), 's (with the device opening)'); st and st.unpin()")
     done
     start_ab pin "${VARIANTS:-A B B A}" A ;;
  122) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # GLM-4.7-Flash's decode token: 2.43 ms after a 512-token prompt over the f32 cache (gpu_bench), 2.83 at 4k over fp16, but
     # 2.86 / 2.97 at 576 / 4,096 over fp16 in tools.profile (call123): the short context over both cache types, in the order
     # $ORDER, decode 64 after a 512-token prompt and prefill 512, the tree alone
     P=${PRESETS:-glm-4.7-flash,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     for c in ${ORDER:-f32 f16 f16 f32}; do
       echo "-- $c $(date +%T)"
       timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --cache-type $c --decode 64 --prefill 512 \
         --json "$OUT/short_$c.$RANDOM.json" 2>&1 | grep -E '^(glm|deep|youtu).*[0-9]\.[0-9]+ +[0-9]'
     done ;;
  112) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # (measured: call112; landed in 229c6cf, so the diff applies to the tree before it only)
     # EXPERIMENT experiments/experts-dyn-steps.diff: an experts GEMM's x records in dynamic workgroup memory, so
     # DeepSeek-V2-Lite's routed products of a 2048-token chunk take two sub-steps a step (their 12,288-entry listing left
     # one under the 48 KB static limit: bench_gemm 113 int8 TOPS where GLM-4.7-Flash's, with two, run at 162; sm_90: 167
     # registers, no spills, 24.6 KB static + 28.7 KB dynamic). A = the tree, B = the diff: the routed products alone
     # (bench_gemm, 2048 tokens, uniform routing) A B B A, B's fp16 path on DeepSeek-V2-Lite at 2,600 (a chunk of 2048, then
     # 512; unless NOPATHS), then DeepSeek-V2-Lite's prompts of $DEPTHS over an fp16 cache in the order $VARIANTS
     tree /tmp/B experts-dyn-steps.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     (synth deepseek-v2-lite > /dev/null 2>&1) &
     for v in A B B A; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- gemm $v $(date +%T)"
       (cd $d && timeout 60 python3 -m tools.bench_gemm --tokens 2048 --models dsv2,glm --only gate_up_exps,down_exps 2>&1 | tail -4)
     done
     wait; echo "synthesized $(date +%T)"
     [ -n "$NOPATHS" ] || (cd /tmp/B && timeout 200 python3 -m tools.path_check --presets deepseek-v2-lite --depth 2600 --cache-type f16 \
       --no-generated 2>&1 | tee "$OUT/paths_dyn.txt" | grep -v Warn | tail -1)
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets deepseek-v2-lite --cache-type f16 --decode 8 \
         --depths ${DEPTHS:-4096} --json "$OUT/dyn_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -3)
     done ;;
  111) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # (measured: calls 113-114; its 20-head half landed in 229c6cf, so the diff applies to the tree before it only; the
     # 16-head half alone: experiments/decode-mma-16h-f16.diff)
     # EXPERIMENT experiments/decode-mma-f16.diff: the decode attend's tensor-core kernels on fp16 mma.sync m16n8k16 (the keys
     # exact in fp16, the queries and P x 2^14 fp16 hi + lo: half the mma count of the tf32 m16n8k8 pairs, no fp16 -> fp32
     # conversion of the keys, the values' fragments by ldmatrix .trans): attend_mma_t_kernel (GLM-4.7-Flash's 20 heads: 216
     # products a warp and stage where there were 408; sm_90 218 registers, was 235) and attend_mma_kernel (16 heads: 144
     # where there were 272; the depth kernel 168 registers, was 213); no spills; the emulated decode tests pass at 1e-5.
     # B = the tree with the diff: the kernels alone over fp16 caches (f16 = B's file, both shapes), B's fp16 path of $P
     # (default GLM-4.7-Flash; DeepSeek-V2-Lite / Youtu-LLM-2B take the 16-head kernel) at 10,300 (unless NOPATHS), then
     # their f16 decode at $DEPTHS in the order $VARIANTS
     tree /tmp/B decode-mma-f16.diff || exit 1
     mkdir -p /tmp/var && cp /tmp/B/apps/kernels/mla_attention.py /tmp/var/f16.py
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait) > /dev/null 2>&1 &
     timeout 120 python3 -m tools.bench_mla_attention --pos ${POS:-575,4095,16383,32767} --layers 8 --iters 20 --cache-type f16 \
       --variants /tmp/var/f16.py 2>&1 | tee "$OUT/attend_f16mma.txt" | grep -v '^$'
     wait; echo "synthesized $(date +%T)"
     [ -n "$NOPATHS" ] || (cd /tmp/B && timeout 200 python3 -m tools.path_check --presets $P --depth ${PATHD:-10300} \
       --cache-type f16 --no-generated 2>&1 | tee "$OUT/paths_f16mma.txt" | grep -v Warn | tail -3)
     for v in ${VARIANTS:-B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --cache-type f16 --decode 32 \
         --depths ${DEPTHS:-4096,16384,32768} --json "$OUT/f16mma_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -4)
     done ;;
  110) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT (DIFF, default combine-f2.diff: A = the tree with it reversed) the combine in ~50 registers (experiments/combine-f2.diff, in the tree: lane i holds split i's (max, sum),
     # shuffled, and two columns of each partial, all loaded at once; 48 registers where the tree's took 119, so a
     # workgroup fits beside a running f32 attend workgroup (153 registers x 320 threads); calls 108-109: the loop of one
     # split at a time (37-40 registers) +1.3% on GLM-4.7-Flash's short-context decode in the model, 2 us a block slower at
     # 16k-32k alone). A = the tree without the diff (HEAD), B = the tree. The kernels alone over f32 and f16 caches (a =
     # A's file), then gpu_bench's short context of $P (default GLM-4.7-Flash) in $VARIANTS, then (unless NODEPTH) its f16
     # decode at $DEPTHS (default 4096,16384) A B
     mkdir -p /tmp/var && f=apps/kernels/mla_attention.py
     tree /tmp/A ${DIFF:-combine-f2.diff} -R && cp /tmp/A/$f /tmp/var/a.py || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait) > /dev/null 2>&1 &
     timeout 150 python3 -m tools.bench_mla_attention --pos ${POS:-575,2047,4095,16383,32767} --layers 8 --iters 20 --cache-type f32,f16 \
       --variants /tmp/var/a.py 2>&1 | tee "$OUT/attend_f2.txt" | grep -v '^$'
     wait; echo "synthesized $(date +%T)"
     short_ab f2_short "${VARIANTS:-A B B A}" B
     [ -n "$NODEPTH" ] || for v in A B; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- depth $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --cache-type f16 --decode 32 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/f2_depth_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -3)
     done ;;
  109) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT the combine's loop of one split at a time (experiments/combine-old.diff, 37 registers: call108 GLM-4.7-
     # Flash's short-context decode +1.3% in the model, yet 5 us a block slower at 8,191 keys alone, where nvcc unrolls it by
     # 4) unrolled by 8 and 16 (old8 / old16: that many splits' loads in flight). The kernels alone over f32 and f16 caches
     # (old, old8, old16), then gpu_bench's short context of $P (default GLM-4.7-Flash) in the order $VARIANTS
     mkdir -p /tmp/var && f=apps/kernels/mla_attention.py
     cp $f /tmp/var/old.py && patch -s /tmp/var/old.py < runs/2026-12-01-gen/experiments/combine-old.diff || exit 1
     for n in 8 16; do sed "s|^  for (int sp = w; sp < ns; sp += CW) {{|  #pragma unroll $n\n&|" /tmp/var/old.py > /tmp/var/old$n.py
       grep -c "pragma unroll $n" /tmp/var/old$n.py; tree /tmp/old$n && cp /tmp/var/old$n.py /tmp/old$n/$f || exit 1; done
     tree /tmp/old && cp /tmp/var/old.py /tmp/old/$f || exit 1
     for d in . /tmp/old /tmp/old8 /tmp/old16; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait) > /dev/null 2>&1 &
     timeout 200 python3 -m tools.bench_mla_attention --pos ${POS:-575,2047,4095,8191,16383,32767} --layers 8 --iters 20 --cache-type f32,f16 \
       --variants /tmp/var/old.py,/tmp/var/old8.py,/tmp/var/old16.py 2>&1 | tee "$OUT/attend_old.txt" | grep -v '^$'
     wait; echo "synthesized $(date +%T)"
     short_ab old_short "${VARIANTS:-A old8 old16 old16 old8 A}" A ;;
  108) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the short context's combine in the model (call107: alone at 575 keys over f32 the tree's 16.8 us a block, pred 16.3,
     # old 17.8, yet call106 found the model's decode with the old combine +1.3%): gpu_bench's short context of $P (default
     # GLM-4.7-Flash) with the tree (A), experiments/combine-old.diff (old) and combine-pred.diff (pred) in the order
     # $VARIANTS; first (unless NOGEMM) a 2048-token chunk's routed products alone (bench_gemm, uniform routing) with the
     # tree and with experiments/experts-list.diff at 1, 2 and 4 tile slots (step 104's B, C, D), while the files synthesize
     for v in pred old; do tree /tmp/$v combine-$v.diff || exit 1; done
     if [ -z "$NOGEMM" ]; then
       tree /tmp/B experts-list.diff && tree /tmp/C experts-list.diff && tree /tmp/D experts-list.diff || exit 1
       sed -i 's/^EXPERT_TILE_SLOTS = 1 /EXPERT_TILE_SLOTS = 2 /' /tmp/C/apps/kernels/gemm.py
       sed -i 's/^EXPERT_TILE_SLOTS = 1 /EXPERT_TILE_SLOTS = 4 /' /tmp/D/apps/kernels/gemm.py
       grep -c '^EXPERT_TILE_SLOTS = [24] ' /tmp/C/apps/kernels/gemm.py /tmp/D/apps/kernels/gemm.py
     fi
     for d in . /tmp/pred /tmp/old $([ -z "$NOGEMM" ] && echo /tmp/B /tmp/C /tmp/D); do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait) > /dev/null 2>&1 &
     [ -n "$NOGEMM" ] || for v in A B C D B A; do
       d=.; [ $v != A ] && d=/tmp/$v; echo "-- gemm $v $(date +%T)"
       (cd $d && timeout 60 python3 -m tools.bench_gemm --tokens 2048 --models dsv2,glm --only gate_up_exps,down_exps 2>&1 | tail -6)
     done
     wait; echo "synthesized $(date +%T)"
     short_ab combine_short "${VARIANTS:-A old pred pred old A}" A ;;
  107) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT the decode split and combine at short context and at 4k-16k in one call (steps 103 and 106 together): the
     # kernels alone over f32 and f16 caches, both shapes, with each variant's mla_attention.py: pred / old (experiments/
     # combine-pred.diff / combine-old.diff), mc32 / mc64 (MIN_CHUNK 32 / 64: fewer, fuller splits below 4,096 / 8,192
     # keys, attend_mma_t_kernel's 64-key stages full), predmc64 (both), s64 (SPLITS 64: half the partials at depth);
     # the files are synthesized meanwhile. Then gpu_bench's short context (f32, decode 64 after 512, prefill 512) of $P
     # (default GLM-4.7-Flash) in the order $VARIANTS (A = the tree, else a variant's name)
     mkdir -p /tmp/var && f=apps/kernels/mla_attention.py
     for v in pred old; do cp $f /tmp/var/$v.py && patch -s /tmp/var/$v.py < runs/2026-12-01-gen/experiments/combine-$v.diff || exit 1; done
     for m in 32 64; do sed "s/^MIN_CHUNK = 8 /MIN_CHUNK = $m /" $f > /tmp/var/mc$m.py; done
     sed "s/^MIN_CHUNK = 8 /MIN_CHUNK = 64 /" /tmp/var/pred.py > /tmp/var/predmc64.py
     sed "s/^SPLITS = 128 /SPLITS = 64 /" $f > /tmp/var/s64.py
     grep -c "^MIN_CHUNK = [36]\|^SPLITS = 64 " /tmp/var/mc32.py /tmp/var/mc64.py /tmp/var/predmc64.py /tmp/var/s64.py
     VS="pred old mc32 mc64 predmc64 s64"
     for v in $VS; do tree /tmp/$v && cp /tmp/var/$v.py /tmp/$v/$f || exit 1; done
     for d in . $(for v in $VS; do echo /tmp/$v; done); do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait) > /dev/null 2>&1 &
     timeout 240 python3 -m tools.bench_mla_attention --pos ${POS:-32,575,2047,4095,8191,16383} --layers 8 --iters 20 --cache-type f32,f16 \
       --variants $(for v in $VS; do printf /tmp/var/$v.py,; done | sed 's/,$//') 2>&1 | tee "$OUT/attend_split.txt" | grep -v '^$'
     wait; echo "synthesized $(date +%T)"
     short_ab split_short "${VARIANTS:-A pred mc64 predmc64 A}" A ;;
  106) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT keys a decode split takes at least (MIN_CHUNK, 8: every split of a context below 1,024 keys holds 8 keys, so
     # after 576 keys 72 workgroups each attend 8 keys and write 20 heads x 512 floats of partials (2.9 MB, the f32 cache's
     # rows 1.3 MB) that the combine reads back; attend_mma_t_kernel's 64-key stages run part full below 8,192 keys).
     # mc32 / mc64: MIN_CHUNK 32 / 64 (attend and combine share it). The kernels alone over f32 and f16 caches (both shapes),
     # then the short context (f32, decode 64 after 512) of $PRESETS in the order $VARIANTS (A = the tree, B = mc32, C = mc64),
     # then their decode at 4,096 over an fp16 cache, A C C A
     mkdir -p /tmp/var && f=apps/kernels/mla_attention.py
     for m in 32 64; do sed "s/^MIN_CHUNK = 8 /MIN_CHUNK = $m /" $f > /tmp/var/mc$m.py; grep -c "^MIN_CHUNK = $m " /tmp/var/mc$m.py; done
     tree /tmp/B && cp /tmp/var/mc32.py /tmp/B/$f && tree /tmp/C && cp /tmp/var/mc64.py /tmp/C/$f || exit 1
     for d in . /tmp/B /tmp/C; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-glm-4.7-flash,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait) > /dev/null 2>&1; echo "synthesized $(date +%T)"
     timeout 150 python3 -m tools.bench_mla_attention --pos ${POS:-32,575,2047,4095,8191} --layers 8 --iters 20 --cache-type f32,f16 \
       --variants /tmp/var/mc32.py,/tmp/var/mc64.py 2>&1 | tee "$OUT/attend_mc.txt" | grep -v '^$'
     short_ab mc_short "${VARIANTS:-A B C C B A}" A
     for v in A C C A; do
       d=.; [ $v != A ] && d=/tmp/$v; echo "-- 4k $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --cache-type f16 --decode 32 --depths 4096 \
         --json "$OUT/mc_4k_$v.$RANDOM.json" 2>&1 | grep -E '^(glm|deep|youtu).*[0-9]\.[0-9]+ +[0-9]')
     done ;;
  105) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # inside GLM-4.7-Flash's decode attend over an fp16 cache (attend_mma_t_kernel: 37.6 us a block at 32k with the combine
     # where 16 heads take 29; 2x llama.cpp at 32k needs ~3.6 ms a token against 3.97) and the combine over an f32 cache at a
     # short context (call106: -1.3%), the kernels alone: step 98's Nsight Compute full set and per-instruction stall samples;
     # then the routed and a dense GEMM of a 2048-token chunk the same way
     for t in "4095 mla_attend_mmat_h20 --cache-type f16" "32767 mla_attend_mmat_h20 --cache-type f16" "575 mla_combine_h20 --cache-type f32"; do
       set -- $t; pos=$1 k=$2; shift 2; tag=${k#mla_}_$pos
       timeout $(( ($(left) - 5) / 2 )) ncu --set full --import-source yes --clock-control none --cache-control none --launch-skip 2 \
         --launch-count 1 --kernel-name regex:"$k" -o /tmp/rep_$tag python3 -m tools.bench_mla_attention --pos $pos --layers 1 --iters 1 \
         "$@" > /tmp/ncu_$tag.log 2>&1
       ncu -i /tmp/rep_$tag.ncu-rep --page details > "$OUT/ncu_$tag.txt" 2>&1
       ncu -i /tmp/rep_$tag.ncu-rep --page source --csv --print-source sass > /tmp/src_$tag.csv 2>&1
       echo "-- $tag $(date +%T)"; grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|Eligible Warps|Registers Per" "$OUT/ncu_$tag.txt" | head -6
       python3 -m tools.ncu_source /tmp/src_$tag.csv --top 30 2>&1 | tee "$OUT/hot_$tag.txt" | head -40
     done
     # and a 2048-token chunk's routed gate_up (DeepSeek-V2-Lite's: ~3.2 us a step of a tile, call104) beside a dense one's
     # (Youtu-LLM-2B's: the same tile, ~1.9 us a step in DeepSeek-V2-Lite's dense block), bench_gemm's uniform routing
     for t in "dsv2 gate_up_exps gemm_mma_q4_0_2048_1408_2048_e64_j6_glu" "youtu gate_up gemm_mma_q4_0_2048_6144_2048_glu"; do
       set -- $t; tag=gemm_$1_$2
       timeout $(( ($(left) - 5) / 2 )) ncu --set full --import-source yes --clock-control none --cache-control none --launch-skip 2 \
         --launch-count 1 --kernel-name regex:"$3" -o /tmp/rep_$tag python3 -m tools.bench_gemm --tokens 2048 --models $1 --only $2 \
         --iters 2 > /tmp/ncu_$tag.log 2>&1
       ncu -i /tmp/rep_$tag.ncu-rep --page details > "$OUT/ncu_$tag.txt" 2>&1
       ncu -i /tmp/rep_$tag.ncu-rep --page source --csv --print-source sass > /tmp/src_$tag.csv 2>&1
       echo "-- $tag $(date +%T)"; grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|Eligible Warps|Registers Per|L2 Hit|DRAM Through" "$OUT/ncu_$tag.txt" | head -8
       python3 -m tools.ncu_source /tmp/src_$tag.csv --top 20 2>&1 | tee "$OUT/hot_$tag.txt" | head -25
     done ;;
  104) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT a chunk's routed-expert GEMM (DeepSeek-V2-Lite's pp4096, call104: its gate_up 2.5-2.8 ms a layer at 2048
     # tokens, ~1.7x the dense block's time a tile): experiments/experts-list.diff lists an expert's entries a thread a run
     # of them (sel's loads in flight at once, one barrier; the scan took 96 rounds of a load and two barriers at 12,288
     # entries) and spreads an expert band's tiles over EXPERT_TILE_SLOTS workgroups. A = the tree, B = the diff (1 slot),
     # C = 2 slots, D = 4. The routed products alone (bench_gemm, 2048 tokens, uniform routing), then the 4k prompts of
     # DeepSeek-V2-Lite and GLM-4.7-Flash over an fp16 cache in the order $VARIANTS
     tree /tmp/B experts-list.diff && tree /tmp/C experts-list.diff && tree /tmp/D experts-list.diff || exit 1
     sed -i 's/^EXPERT_TILE_SLOTS = 1 /EXPERT_TILE_SLOTS = 2 /' /tmp/C/apps/kernels/gemm.py
     sed -i 's/^EXPERT_TILE_SLOTS = 1 /EXPERT_TILE_SLOTS = 4 /' /tmp/D/apps/kernels/gemm.py
     grep -c '^EXPERT_TILE_SLOTS = [24] ' /tmp/C/apps/kernels/gemm.py /tmp/D/apps/kernels/gemm.py
     for d in . /tmp/B /tmp/C /tmp/D; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     (synth deepseek-v2-lite & synth glm-4.7-flash & wait) > /dev/null 2>&1; echo "synthesized $(date +%T)"
     for v in A B C D; do
       d=.; [ $v != A ] && d=/tmp/$v; echo "-- gemm $v $(date +%T)"
       (cd $d && timeout 60 python3 -m tools.bench_gemm --tokens 2048 --models dsv2,glm --only gate_up_exps,down_exps 2>&1 | tail -6)
     done
     for v in ${VARIANTS:-A B C C B A}; do
       d=.; [ $v != A ] && d=/tmp/$v; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets deepseek-v2-lite,glm-4.7-flash --cache-type f16 --decode 8 \
         --depths 4096 --json "$OUT/experts_$v.$RANDOM.json" 2>&1 | grep -E '^(glm|deep).*[0-9]\.[0-9]+ +[0-9]')
     done ;;
  103) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT the combine at short context: call106 measured GLM-4.7-Flash's default (f32 cache) decode after a 512-token
     # prompt -1.3% with the combine that loads all of its splits' partials at once (16 a warp, clamped), DeepSeek-V2-Lite
     # -0.3%. B = experiments/combine-pred.diff (the loads predicated on the splits that hold tokens), C =
     # experiments/combine-old.diff (the loop of one split at a time). The kernels alone over an f32 cache (pred, old), then
     # gpu_bench's short context (decode 64 after 512, prefill 512) of GLM-4.7-Flash and DeepSeek-V2-Lite in the order $VARIANTS
     mkdir -p /tmp/var && f=apps/kernels/mla_attention.py
     for v in pred old; do cp $f /tmp/var/$v.py && patch -s /tmp/var/$v.py < runs/2026-12-01-gen/experiments/combine-$v.diff || exit 1; done
     tree /tmp/B combine-pred.diff && tree /tmp/C combine-old.diff || exit 1
     for d in . /tmp/B /tmp/C; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     (synth glm-4.7-flash & synth deepseek-v2-lite & wait) > /dev/null 2>&1; echo "synthesized $(date +%T)"
     timeout 100 python3 -m tools.bench_mla_attention --pos ${POS:-32,575,1023,2047,4095} --layers 8 --iters 20 --cache-type f32 \
       --variants /tmp/var/pred.py,/tmp/var/old.py 2>&1 | tee "$OUT/attend_f32.txt" | grep -v '^$'
     for v in ${VARIANTS:-A B C C B A}; do
       d=.; [ $v = B ] && d=/tmp/B; [ $v = C ] && d=/tmp/C; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets glm-4.7-flash,deepseek-v2-lite --decode 64 --prefill 512 \
         --json "$OUT/short_$v.$RANDOM.json" 2>&1 | grep -E '^(glm|deep).*[0-9]\.[0-9]+ +[0-9]')
     done ;;
  102) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # where a 4096-token prompt's time goes (DeepSeek-V2-Lite's pp4096, 1.14x llama.cpp): its two chunks of 2048 at 0 and
     # 2048 kernel by kernel over an fp16 cache (tools.profile --target fill), $M (default deepseek-v2-lite)
     M=${M:-deepseek-v2-lite}; synth $M; echo "synthesized $(date +%T)"
     for pos in ${POS:-0 2048}; do
       timeout $(($(left) - 3)) python3 -m tools.profile --model $M --target fill --chunk 2048 --pos $pos --max-context 4160 \
         --cache-type f16 --repeat 3 --count 3 --top 12 > "$OUT/prof_${M%%-*}_$pos.txt" 2>&1
       grep -E '\(all\)|^fill|^critical' "$OUT/prof_${M%%-*}_$pos.txt"
     done ;;
  100) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # (call102; the diff landed, so this step no longer applies: history) EXPERIMENT experiments/decode-mma-t.diff: GLM-4.7-Flash's 20 heads on the tensor cores in one workgroup a split at every
     # depth (attend_mma_t_kernel: the keys the mma's M, the heads its N, 3 n8 tiles; 8 warps, 235 registers, 206 KB), where
     # the tree's depth kernel streams every key twice from 6,144 keys (two m16 tiles of heads, 256 workgroups) and runs the
     # CUDA cores below. A = the tree, B = the diff: the kernels alone over fp16 caches in one process (mmat = B's file; the
     # 20-head rows), B's fp16 paths on GLM-4.7-Flash at 3,000 and 10,300 (unless NOPATHS), then its decode at depth in A B B A
     tree /tmp/B decode-mma-t.diff || exit 1
     mkdir -p /tmp/var && cp /tmp/B/apps/kernels/mla_attention.py /tmp/var/mmat.py
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     synth glm-4.7-flash; echo "synthesized $(date +%T)"
     timeout 120 python3 -m tools.bench_mla_attention --pos ${POS:-32,2047,4095,8191,16383,32767} --layers 8 --iters 20 --cache-type f16 \
       --variants /tmp/var/mmat.py 2>&1 | tee "$OUT/attend_f16.txt" | grep -v '^$'
     [ -n "$NOPATHS" ] || for dp in ${PATHD:-3000 10300}; do (cd /tmp/B && timeout 150 python3 -m tools.path_check --presets glm-4.7-flash --depth $dp \
       --cache-type f16 --no-generated 2>&1 | tee "$OUT/paths_B_$dp.txt" | grep -v Warn | tail -1); done
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets glm-4.7-flash --cache-type f16 --decode 32 \
         --depths ${DEPTHS:-4096,16384,32768} --json "$OUT/mmat_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -4)
     done ;;
  99) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the decode attention's fixed costs (B, the tree): the combine loads every partial of its splits before it uses any; the
     # tensor-core attend starts its first stage's copies before its queries load, the new token's row from warp 0's
     # registers into the stage (rows past the split zeros). A = the tree with experiments/decode-start.diff reversed (HEAD),
     # C = B with DECODE_MMA_FROM = $MMA_FROM (default 2048). Unless NOBENCH: the kernels alone over fp16 caches in one
     # process (both shapes; head = A's, mma0 = B's tensor cores at every depth); unless NOPATHS: B's fp16 paths on
     # GLM-4.7-Flash and DeepSeek-V2-Lite at 10,300; then gpu_bench decode at depth in the order $VARIANTS (C at $DEPTHS_C)
     mkdir -p /tmp/var && f=apps/kernels/mla_attention.py
     cp $f /tmp/var/head.py && patch -s -R /tmp/var/head.py < runs/2026-12-01-gen/experiments/decode-start.diff || exit 1
     sed 's/^DECODE_MMA_FROM = [0-9]*/DECODE_MMA_FROM = 0/' $f > /tmp/var/mma0.py
     tree /tmp/A decode-start.diff -R && tree /tmp/C || exit 1
     sed -i "s/^DECODE_MMA_FROM = [0-9]*/DECODE_MMA_FROM = ${MMA_FROM:-2048}/" /tmp/C/$f; grep -c "^DECODE_MMA_FROM = ${MMA_FROM:-2048}" /tmp/C/$f
     for d in . /tmp/A /tmp/C; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait) > /dev/null 2>&1
     echo "synthesized $(date +%T)"
     [ -n "$NOBENCH" ] || timeout 150 python3 -m tools.bench_mla_attention --pos ${POS:-32,2047,4095,6143,8191,16383,32767} --layers 8 --iters 20 \
       --cache-type f16 --variants /tmp/var/head.py,/tmp/var/mma0.py 2>&1 | tee "$OUT/attend_f16.txt" | grep -v '^$'
     [ -n "$NOPATHS" ] || timeout 200 python3 -m tools.path_check --presets glm-4.7-flash,deepseek-v2-lite --depth 10300 --cache-type f16 --no-generated 2>&1 \
       | tee "$OUT/paths_f16.txt" | grep -v Warn | tail -4
     for v in ${VARIANTS:-B C}; do
       d=.; dp=${DEPTHS:-4096,16384,32768}; [ $v = A ] && d=/tmp/A; [ $v = C ] && d=/tmp/C dp=${DEPTHS_C:-4096}; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --cache-type f16 --decode 32 --depths $dp \
         --json "$OUT/start_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -10)
     done ;;
  98) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # inside the decode attend and combine over an fp16 cache, 16 heads, the kernels alone (bench_mla_attention, one block):
     # Nsight Compute's full set with per-instruction stall samples (clocks and L2 as they run), the hottest SASS lines:
     # the CUDA-core branch at 32 and 4,095 keys, the tensor cores at 4,095 (mma0: from 0 keys) and 8,191, the combine at 4,095
     mkdir -p /tmp/var && sed 's/^DECODE_MMA_FROM = [0-9]*/DECODE_MMA_FROM = 0/' apps/kernels/mla_attention.py > /tmp/var/mma0.py
     for t in "32 mla_attend_h16_kv512_r64_f16_mma6144" "4095 mla_attend_h16_kv512_r64_f16_mma6144" "4095 mla_combine_h16" \
              "4095 mla_attend_h16_kv512_r64_f16_mma0 --variants /tmp/var/mma0.py" "8191 mla_attend_h16_kv512_r64_f16_mma6144"; do
       set -- $t; pos=$1 k=$2; shift 2; tag=${k#mla_}_$pos
       timeout $(( ($(left) - 5) / 2 )) ncu --set full --import-source yes --clock-control none --cache-control none --launch-skip 2 \
         --launch-count 1 --kernel-name regex:"$k" -o /tmp/rep_$tag python3 -m tools.bench_mla_attention --pos $pos --layers 1 --iters 1 \
         --cache-type f16 "$@" > /tmp/ncu_$tag.log 2>&1
       ncu -i /tmp/rep_$tag.ncu-rep --page details > "$OUT/ncu_$tag.txt" 2>&1
       ncu -i /tmp/rep_$tag.ncu-rep --page source --csv --print-source sass > /tmp/src_$tag.csv 2>&1
       echo "-- $tag $(date +%T)"; grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|Eligible Warps|Registers Per" "$OUT/ncu_$tag.txt" | head -6
       head -c 600 /tmp/src_$tag.csv | head -2; python3 -m tools.ncu_source /tmp/src_$tag.csv --top 30 2>&1 | tee "$OUT/hot_$tag.txt" | head -40
     done ;;
  97) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # where a decode token's time goes at depth over an fp16 cache (hand-written kernels): $M's step kernel by kernel
     # (tools.profile: events, graphs off; the step as run in its graphs) at each of $POS, then Nsight Compute's device
     # times of the step at $NCU_POS (L2 and clocks as they run)
     M=${M:-youtu-llm-2b}; synth $M; echo "synthesized $(date +%T)"
     for pos in ${POS:-32 4096 16384}; do
       timeout $(($(left) - 3)) python3 -m tools.profile --model $M --cache-type f16 --pos $pos --max-context 32768 --top 6 --repeat 5 \
         > "$OUT/prof_$pos.txt" 2>&1; echo "-- pos $pos $(date +%T)"; grep -iE "step|attention|total" "$OUT/prof_$pos.txt" | head -12
     done
     for pos in ${NCU_POS:-4096}; do
       timeout $(($(left) - 3)) ncu --profile-from-start off --clock-control none --cache-control none \
         --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv --log-file "$OUT/ncu_$pos.csv" \
         python3 -m tools.profile --model $M --cache-type f16 --pos $pos --max-context 32768 --repeat 3 --count 20 --ncu --json \
         > "$OUT/rows_$pos.json" 2> "$OUT/ncu_$pos.err"
       python3 -m tools.profile --ncu-csv "$OUT/ncu_$pos.csv" --rows "$OUT/rows_$pos.json" --top 40 > "$OUT/ncu_$pos.txt" 2>&1
       [ -s "$OUT/ncu_$pos.err" ] || rm -f "$OUT/ncu_$pos.err"; rm -f "$OUT/ncu_$pos.csv" "$OUT/rows_$pos.json"
       echo "-- ncu pos $pos $(date +%T)"; head -4 "$OUT/ncu_$pos.txt"; grep -iE "attention|\(all\)" "$OUT/ncu_$pos.txt" | head -20
     done ;;
  95) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the decode attend over an fp16 cache in one launch, attend_depth_kernel: the CUDA cores below DECODE_MMA_FROM (6,144)
     # keys, the tensor cores' 64-key stages from there (its queries' loads issued together: call95's kernel), GLM-4.7-Flash's
     # 20 heads too (two tiles; the launch 10 warps). The kernels alone over fp16 caches in one process (both shapes; mma0:
     # the tensor cores at every depth, cc: the CUDA cores at every depth, head: 89a652d's), GLM-4.7-Flash's fp16 paths at
     # $PATH_DEPTH (the tensor cores' two tiles; unless NOPATHS), then the decode at depth of $PRESETS, B (the tree) first,
     # then A (experiments/decode-mma-16keys.diff: 89a652d's kernels) on $PRESETS_A
     mkdir -p /tmp/var && f=apps/kernels/mla_attention.py
     cp $f /tmp/var/head.py && patch -s /tmp/var/head.py < runs/2026-12-01-gen/experiments/decode-mma-16keys.diff || exit 1
     sed 's/^DECODE_MMA_FROM = [0-9]*/DECODE_MMA_FROM = 0/' $f > /tmp/var/mma0.py
     sed 's/^DECODE_MMA_FROM = [0-9]*/DECODE_MMA_FROM = 1000000000/' $f > /tmp/var/cc.py
     grep -c '^DECODE_MMA_FROM = 0' /tmp/var/mma0.py
     tree /tmp/A decode-mma-16keys.diff || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-glm-4.7-flash,youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait) > /dev/null 2>&1
     echo "synthesized $(date +%T)"
     timeout 120 python3 -m tools.bench_mla_attention --pos ${POS:-4095,6143,8191,16383,32767} --layers 8 --iters 20 --cache-type f16 \
       --variants /tmp/var/mma0.py,/tmp/var/cc.py,/tmp/var/head.py 2>&1 | tee "$OUT/attend_f16.txt" | grep -v '^$'
     [ -n "$NOPATHS" ] || timeout 150 python3 -m tools.path_check --presets glm-4.7-flash --depth ${PATH_DEPTH:-10300} --cache-type f16 --no-generated 2>&1 \
       | tee "$OUT/paths_glm_f16.txt" | grep -v Warn | tail -3
     for v in B A; do
       d=.; q=$P; [ $v = A ] && d=/tmp/A q=${PRESETS_A:-glm-4.7-flash,youtu-llm-2b,deepseek-v2-lite}; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $q --cache-type f16 --decode 32 --depths ${DEPTHS:-4096,16384,32768} \
         --json "$OUT/depth_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -10)
     done ;;
  94) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # where the tensor-core decode attend in stages of 64 keys spends its time (call93: 16 heads 29.1 us a block at 4,095
     # keys against the CUDA cores' 25.0, 45.9 at 32,767 where two stages of rows would stream in ~10): Nsight Compute's
     # full set on it at 4,095 and 32,767 keys (16 heads, the kernels alone, the third launch)
     for pos in 4095 32767; do
       timeout $(( ($(left) - 5) / 2 )) ncu --set full --launch-skip 2 --launch-count 1 --kernel-name regex:"mla_attend_mma_h16" \
         python3 -m tools.bench_mla_attention --pos $pos --layers 1 --iters 1 --cache-type f16 > "$OUT/ncu_mma64_$pos.txt" 2>&1
       grep -E "^  [a-z_0-9]+\(|Duration|Registers Per|Achieved Occupancy|Dynamic Shared|Block Limit|DRAM Throughput|L2 Cache Throughput|Warp Cycles Per Issued|Issue Slots Busy|Stall|No Eligible|Compute \(SM\) Throughput|Memory Throughput|Tensor|Pipe|Barrier|Long Scoreboard|Elapsed Cycles|Active Warps|Eligible" \
         "$OUT/ncu_mma64_$pos.txt" | head -60
     done ;;
  93) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the tensor-core decode attend in stages of 64 keys (attend_mma_kernel: three barriers a stage, the softmax's rows split
     # over the warps, 195.6 KB of dynamic workgroup memory through patches/0074) at every depth, against A = the tree with
     # experiments/decode-mma-16keys.diff (the kernels of 89a652d: the CUDA cores below 10,240 keys, the 16-key-stage
     # tensor-core kernel from there). The kernels alone over fp16 caches in one process (both shapes; glm2: the new kernel on
     # GLM-4.7-Flash's 20 heads too, two tiles a split; unroll: the values' k-steps unrolled), B's fp16 paths on $PRESETS at
     # $PATH_DEPTH (unless NOPATHS), then their decode at depth in $VARIANTS
     mkdir -p /tmp/var && f=apps/kernels/mla_attention.py
     cp $f /tmp/var/head.py && patch -s /tmp/var/head.py < runs/2026-12-01-gen/experiments/decode-mma-16keys.diff || exit 1
     sed 's/has_mma(device) and s.n_head <= 16 and/has_mma(device) and s.n_head <= 32 and/' $f > /tmp/var/glm2.py
     sed 's/^    for (int j = 0; j < {NJ}; j++) {{$/    _Pragma("unroll") for (int j = 0; j < {NJ}; j++) {{/' $f > /tmp/var/unroll.py
     grep -c 'n_head <= 32' /tmp/var/glm2.py; grep -c 'Pragma' /tmp/var/unroll.py
     tree /tmp/A decode-mma-16keys.diff || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b,deepseek-v2-lite}; (for m in ${P//,/ }; do synth $m & done; wait) > /dev/null 2>&1
     echo "synthesized $(date +%T)"   # before the kernels' bench: its short steps slow down beside the synthesis (call93)
     timeout 150 python3 -m tools.bench_mla_attention --pos ${POS:-32,4095,8191,16383,32767} --layers 8 --iters 30 --cache-type f16 \
       --variants /tmp/var/head.py,/tmp/var/glm2.py,/tmp/var/unroll.py 2>&1 | tee "$OUT/attend_f16.txt" | grep -v '^$'
     [ -n "$NOPATHS" ] || timeout 250 python3 -m tools.path_check --presets $P --depth ${PATH_DEPTH:-10300} --cache-type f16 --no-generated 2>&1 \
       | tee "$OUT/paths_mma_f16.txt" | grep -v Warn | tail -4
     for v in ${VARIANTS:-A B}; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --cache-type f16 --decode 32 --depths ${DEPTHS:-4096,16384,32768} \
         --json "$OUT/mma64_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -7)
     done ;;
  92) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/decode-mma-qstage.diff: the tensor-core decode attend's 16 queries staged through shared memory
     # by coalesced loads, then read as fragments (call90: 40% of its stalls at 4,095 keys on L1TEX, the scattered query loads
     # 49% excess sectors; sm_90 128 registers where it had 170). The kernels alone over fp16 caches in one process: the tree
     # (the CUDA cores below 10,240 keys), mma0 (the tree's tensor-core kernel at every depth) and qstage0 (the diff's), to
     # find the crossover again; then, where qstage0 wins at 4,095 against the tree, Youtu-LLM-2B's decode at depth with the
     # diff and DECODE_MMA_FROM = $FROM (default 4096), A B B A
     mkdir -p /tmp/var && f=apps/kernels/mla_attention.py
     cp $f /tmp/var/mma0.py && cp $f /tmp/var/qstage0.py && patch -s /tmp/var/qstage0.py < runs/2026-12-01-gen/experiments/decode-mma-qstage.diff || exit 1
     sed -i 's/^DECODE_MMA_FROM = [0-9]*/DECODE_MMA_FROM = 0/' /tmp/var/mma0.py /tmp/var/qstage0.py
     synth youtu-llm-2b > /dev/null 2>&1 & spid=$!
     timeout 150 python3 -m tools.bench_mla_attention --pos 32,4095,8191,12287,16383,32767 --layers 8 --iters 30 --cache-type f16 \
       --variants /tmp/var/mma0.py,/tmp/var/qstage0.py 2>&1 | tee "$OUT/attend_qstage.txt" | grep -v '^$'
     win=$(python3 -c "
rows = [l.split() for l in open('$OUT/attend_qstage.txt').read().split('deepseek-v2-lite')[-1].splitlines()]
t = {r[1]: float(r[2]) for r in rows if len(r) > 3 and r[0] == '4095'}; print('1' if t['qstage0'] < 0.97 * t['kernel'] else '')")
     echo "qstage0 wins at 4,095: ${win:-no}"; [ -n "$win" ] || exit 0
     wait $spid; tree /tmp/B decode-mma-qstage.diff || exit 1
     sed -i "s/^DECODE_MMA_FROM = [0-9]*/DECODE_MMA_FROM = ${FROM:-4096}/" /tmp/B/$f; python3 -m compileall -q /tmp/B/apps > /dev/null
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets youtu-llm-2b --cache-type f16 --decode 32 --depths ${DEPTHS:-4096,8192,16384} \
         --json "$OUT/qstage_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -4)
     done ;;
  91) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # where the tensor-core decode attend's time goes where it loses (call89: 16 heads at 4,095 keys 29.9 us a block
     # against the CUDA cores' 22.9, at 32 keys 20.5 against 14.6): the kernels alone over fp16 caches, the tree beside the
     # CUDA-core kernel (experiments/decode-mma-off.diff) and experiments/decode-mma-early.diff (the first stage's copies
     # before the queries' loads), 32..32k keys; then Nsight Compute's full set on the tensor-core kernel at 4,095 and
     # 32,767 keys and on the CUDA-core one at 4,095 (16 heads)
     mkdir -p /tmp/var && vs=
     for v in off early; do
       cp apps/kernels/mla_attention.py /tmp/var/mma-$v.py && patch -s /tmp/var/mma-$v.py < runs/2026-12-01-gen/experiments/decode-mma-$v.diff || exit 1
       vs=$vs${vs:+,}/tmp/var/mma-$v.py
     done
     timeout 150 python3 -m tools.bench_mla_attention --pos 32,4095,8191,12287,16383,32767 --layers 8 --iters 30 --cache-type f16 \
       --variants $vs 2>&1 | tee "$OUT/attend_f16.txt" | grep -v '^$'
     for t in "4095 mla_attend_mma_h16 " "32767 mla_attend_mma_h16 " "4095 mla_attend_h16 --variants /tmp/var/mma-off.py"; do
       set -- $t; pos=$1 k=$2; shift 2
       timeout $(( ($(left) - 5) / 2 )) ncu --set full --launch-skip 2 --launch-count 1 --kernel-name regex:"$k" \
         python3 -m tools.bench_mla_attention --pos $pos --layers 1 --iters 1 --cache-type f16 "$@" > "$OUT/ncu_${k}_$pos.txt" 2>&1
       grep -E "^  [a-z_0-9]+\(|Duration|Registers Per|Achieved Occupancy|DRAM Throughput|L2 Cache Throughput|Warp Cycles Per Issued|Issue Slots Busy|Stall|No Eligible|Compute \(SM\) Throughput|Memory Throughput|Tensor|Pipe|Barrier|Long Scoreboard|Elapsed Cycles" \
         "$OUT/ncu_${k}_$pos.txt" | head -45
     done ;;
  90) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the tensor-core decode attend over an fp16 cache from 10,240 keys on (apps/kernels/mla_attention.py
     # attend_depth_kernel: B, the tree) against the CUDA-core attend_kernel at every depth (A = the tree with
     # experiments/decode-mma-off.diff): the kernels alone in one process (bench_mla_attention --cache-type f16, both shapes,
     # $POS), B's fp16 paths on $PRESETS at $PATH_DEPTH ($PATH_ARGS; unless NOPATHS), then their decode at depth $VARIANTS
     mkdir -p /tmp/var && cp apps/kernels/mla_attention.py /tmp/var/cudacores.py && patch -s /tmp/var/cudacores.py < runs/2026-12-01-gen/experiments/decode-mma-off.diff || exit 1
     tree /tmp/A decode-mma-off.diff || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b}; (for m in ${P//,/ }; do synth $m & done; wait) > /dev/null 2>&1 & spid=$!
     timeout 150 python3 -m tools.bench_mla_attention --pos ${POS:-32,4095,16383,32767} --layers 8 --iters 30 --cache-type f16 \
       --variants /tmp/var/cudacores.py 2>&1 | tee "$OUT/attend_f16.txt" | grep -v '^$'
     wait $spid; echo "synthesized $(date +%T)"
     [ -n "$NOPATHS" ] || timeout 250 python3 -m tools.path_check --presets $P --depth ${PATH_DEPTH:-2600} --cache-type f16 $PATH_ARGS 2>&1 \
       | tee "$OUT/paths_mma_f16.txt" | grep -v Warn | tail -4
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --cache-type f16 --decode 32 --depths ${DEPTHS:-4096,16384,32768} \
         --json "$OUT/mma_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -7)
     done ;;
  89) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT the decode attend kernel's issue stalls (call80: short scoreboard 622 and wait 501 of ~2,000 not-issued
     # samples: shared-memory loads used at once, dependent chains): variants of apps/kernels/mla_attention.py beside the tree
     # in one process, experiments/attend-$V.diff for V in $ILP: warpsum (one WARP_SUM a score, as before the transposed
     # reduction), dual (each score's dot product in two chains), pipe (the next rows read from shared memory while this
     # step's are used) by default; splits256 (256 splits: two workgroups an SM, where registers allow), twosm (and 16 heads'
     # kernel capped at 128 registers: two an SM, four warps a scheduler), twosm8 (and stages of 8 rows: fewer staging
     # registers), kr2 (two key ranges a split in one workgroup: 16 warps at 128 registers); then the decode at depth of
     # Youtu-LLM-2B with the fastest at 16k (16 heads), A B B A
     mkdir -p /tmp/var && f=apps/kernels/mla_attention.py vs=
     for v in ${ILP:-warpsum dual pipe}; do
       cp $f /tmp/var/$v.py && patch -s /tmp/var/$v.py < runs/2026-12-01-gen/experiments/attend-$v.diff || exit 1
       vs=$vs${vs:+,}/tmp/var/$v.py
     done
     synth youtu-llm-2b > /dev/null 2>&1 & spid=$!
     timeout 200 python3 -m tools.bench_mla_attention --pos 32,4095,16383,32767 --layers 8 --iters 30 --variants $vs 2>&1 \
       | tee "$OUT/attend_ilp.txt" | grep -v '^$'
     best=$(python3 -c "
import sys; rows = [l.split() for l in open('$OUT/attend_ilp.txt').read().split('deepseek-v2-lite')[-1].splitlines()]
t = {r[1]: float(r[2]) for r in rows if len(r) > 3 and r[0] == '16383'}; b = min(t, key=t.get); print(b if t[b] < 0.97 * t['kernel'] else '')")
     echo "best at 16k: ${best:-none}"; [ -n "$best" ] || exit 0
     wait $spid; tree /tmp/B && cp /tmp/var/$best.py /tmp/B/$f
     python3 -m compileall -q /tmp/B/apps > /dev/null
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets youtu-llm-2b --decode 32 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/ilp_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -3)
     done ;;
  88) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # decode at depth: what bounds the attend kernel (16k: 1.6 TB/s, the journal). Alone (bench_mla_attention, both shapes,
     # 32..32k), A = the tree, B = experiments/attend-prefetch.diff; $VARIANTS_FILES (other mla_attention.py files) beside A in
     # one process; then Nsight Compute's full set on A's attend kernel at 16,383 (16 heads) and on the expansion GEMM
     tree /tmp/B attend-prefetch.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     timeout 150 python3 -m tools.bench_mla_attention --pos 32,4095,16383,32767 --layers 8 --iters 30 --variants "$VARIANTS_FILES" 2>&1 | tee "$OUT/attend_A.txt" | grep -v '^$'
     (cd /tmp/B && timeout 100 python3 -m tools.bench_mla_attention --pos 32,4095,16383,32767 --layers 8 --iters 30 2>&1 | tee "$OUT/attend_B.txt" | grep -v '^$')
     for t in "--pos 16383 --layers 2 --iters 3:mla_attend_h16" "--prefill 2048 --pos 14336 --layers 1 --iters 1:mla_expand_2048_h16"; do
       args=${t%:*} k=${t#*:}
       timeout $(( ($(left) - 10) / 2 )) ncu --set full --launch-skip 2 --launch-count 1 --kernel-name regex:"$k" \
         python3 -m tools.bench_mla_attention $args > "$OUT/ncu_$k.txt" 2>&1
       grep -E "^  [a-z_0-9]+\(|Duration|Registers Per|Achieved Occupancy|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Warp Cycles Per Issued|Issue Slots Busy|Stall|No Eligible|Compute \(SM\) Throughput|Memory Throughput|Tensor|Shared|Bank|MIO|LSU|FMA|Pipe" \
         "$OUT/ncu_$k.txt" | head -70
     done ;;
  87) export TINYGRAD_MLA_CACHE=$PWD/.cache; synth youtu-llm-2b; echo "synthesized $(date +%T)"
     # what bounds the expansion GEMM (~150 TFLOPS of fp16 mma, call73) and the decode attend kernel at 16k (1.6 TB/s, the
     # journal): Nsight Compute's full set on two launches of each (stalls, issue slots, the tensor pipe, L2 and DRAM
     # throughput), Youtu-LLM-2B's last chunk of a 16k prompt (2048 at 14,336) and a decode token at 16,383
     for t in "fill --chunk 2048 --pos 14336:mla_expand" "decode --pos 16383:mla_attend"; do
       args=${t%:*} k=${t#*:}
       timeout $(( ($(left) - 10) / 2 )) ncu --profile-from-start off --set full --launch-count 2 --kernel-name regex:"$k" \
         python3 -m tools.profile --model youtu-llm-2b --target $args --max-context 16448 --repeat 1 --count 1 --ncu > "$OUT/ncu_$k.txt" 2>&1
       grep -E "^  [a-z_0-9]+\(|Duration|Registers Per|Achieved Occupancy|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Warp Cycles Per Issued|Issue Slots Busy|Stall|No Eligible|Compute \(SM\) Throughput|Memory Throughput|Tensor" \
         "$OUT/ncu_$k.txt" | head -60
     done ;;
  86) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/attend-prefetch.diff: the attend kernels (decode, and the CUDA-core prefill) ask the L2 for the
     # rows PREFETCH = 4 stages ahead (prefetch.global.L2, a line a thread, no registers): at 16k a split's 9 stages each wait
     # for memory with about one stage in flight (1.6 TB/s of the H200's ~4.8, the journal). B = the tree with it: the kernel
     # alone (bench_mla_attention --pos 32,4095,16383,32767, A then B), then $PRESETS' decode at depth, $VARIANTS
     tree /tmp/B attend-prefetch.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     for v in A B; do d=.; [ $v = B ] && d=/tmp/B
       (cd $d && timeout 120 python3 -m tools.bench_mla_attention --pos 32,4095,16383,32767 --layers 8 --iters 30 2>&1 | tee "$OUT/attend_$v.txt" | grep -v '^$')
     done
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --decode 64 --depths ${DEPTHS:-4096,16384,32768} \
         --json "$OUT/prefetch_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -4)
     done ;;
  85) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT a long prompt in chunks of 4096 (gpu_bench --chunks 4096,2048,512,128,32): its context's rows expanded about
     # half as often as in chunks of 2048 (a 16k prompt: 40,960 rows against 73,728; 32k: 147,456 against 278,528); A = the
     # default, B = 4096 first; $PRESETS' prompts of $DEPTHS, $VARIANTS over $CACHES (a 4096-token chunk's expert lists may not
     # fit the GEMM's shared memory: DeepSeek-V2-Lite's 6 a token would fall back to the matvecs)
     P=${PRESETS:-youtu-llm-2b}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     for v in ${VARIANTS:-A B B A}; do for c in ${CACHES:-f32}; do
       ch=""; [ $v = B ] && ch="--chunks 4096,2048,512,128,32"; echo "-- $v $c $(date +%T)"
       timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --cache-type $c --decode 8 --depths ${DEPTHS:-16384,32768} $ch \
         --json "$OUT/chunks_${v}_$c.$RANDOM.json" 2>&1 | grep -v "^{" | tail -3
     done; done ;;
  84) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the flash prefill's expansions as one GEMM on the tensor cores (apps/kernels/mla_attention.py expand_kernel: B, the
     # tree), A = the tree with experiments/expand-gemm.diff reversed (Block.flash_attention's tensor ops: fp32 products,
     # then their pairs; the diff of calls 73-77 held the kernel too, now only the model's use of it): the
     # expansions alone (bench_mla_attention, 2048 at 14,336, both shapes), B's paths at 2,600 on $PRESETS ($PATHS), then
     # their prompts $VARIANTS over $CACHES
     tree /tmp/A expand-gemm.diff -R || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     [ -n "$NOBENCH" ] || timeout 150 python3 -m tools.bench_mla_attention --prefill 2048 --pos 14336 --layers 2 --iters 5 2>&1 | tee "$OUT/expand_bench.txt" | grep -E "expand|split|f16 "
     for c in ${PATHS:-f32 f16}; do
       timeout 250 python3 -m tools.path_check --presets $P --depth 2600 --cache-type $c 2>&1 | tee "$OUT/paths_gemm_$c.txt" | grep -v Warn | tail -4
     done
     prompts_ab gemm ;;
  70) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/flash-one-pass.diff: over an fp16 cache the flash prefill's products take one tf32 pass, not three
     tree /tmp/B flash-one-pass.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b}; synth ${P//,/ }; echo "synthesized $(date +%T)"
     (cd /tmp/B && timeout 120 python3 -m tools.bench_mla_attention --prefill 2048 --pos 14336 --layers 2 --iters 5 2>&1 | tee "$OUT/flash_1pass.txt" | grep -v '^$')
     for v in A B; do d=.; [ $v = B ] && d=/tmp/B
       (cd $d && timeout 150 python3 -m tools.path_check --presets $P --depth 2600 --cache-type f16 2>&1 | tee "$OUT/paths_f16_$v.txt" | grep -v Warn | tail -3)
     done
     for v in A B B A; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --cache-type f16 --decode 32 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/onepass_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -4)
     done ;;
  71) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # beside llama.cpp in one run: GLM-4.7-Flash's default (now chunks of 2048, the flash form) over our f32 cache, then the
     # three over an fp16 cache (llama-bench's default; the flash products one tf32 pass), llama.cpp built while they synthesize
     # (the models of $RUNS only; with PATHS71, the fp16 paths of those presets at $PATH_DEPTH while llama.cpp builds)
     # (the build takes 270-370 s beside the synthesis, llama-bench's depths of one model ~100 s with decode at depth on flash
     # attention only, ours ~95 s: one model a call; a build left for the next call did not survive: the machine went back
     # before it, call116-117. NOLLAMA: ours alone, no build)
     [ -n "$NOLLAMA" ] || [ -x .cache/llama/build/bin/llama-bench ] || (python3 -m tools.llama_bench build --time-limit 370 \
       > "$OUT/llama_build.log" 2>&1) &
     RUNS=${RUNS:-glm-4.7-flash:f32 youtu-llm-2b:f16 deepseek-v2-lite:f16 glm-4.7-flash:f16}
     (for m in $(for r in $RUNS; do echo ${r%:*}; done | sort -u); do synth $m & done; wait); echo "synthesized $(date +%T)"
     [ -z "$PATHS71" ] || timeout 200 python3 -m tools.path_check --presets $PATHS71 --depth ${PATH_DEPTH:-3000} --cache-type f16 --no-generated 2>&1 \
       | tee "$OUT/paths_f16.txt" | grep -v Warn | tail -4
     wait; tail -2 "$OUT/llama_build.log" 2>/dev/null; echo "built $(date +%T)"
     for run in $RUNS; do
       m=${run%:*} c=${run#*:}; echo "-- $m $c $(date +%T)"
       timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $m $([ -n "$NOLLAMA" ] || echo --llama) --cache-type $c --decode ${DECODE:-64} --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/llama_${m%%-*}_$c.json" 2>&1 | grep -v '^{' | tail -3
     done ;;
  83) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # an fp32 cache's flash expansions: C = the tree (fp32 products realized, then split_halves), B = the tree with
     # experiments/expand-tc-products.diff (step 82's B: the products as fp16 ones on tinygrad's tensor cores, K 3 x 512);
     # Youtu-LLM-2B's prompts, C B
     tree /tmp/B expand-tc-products.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     synth youtu-llm-2b; echo "synthesized $(date +%T)"
     for v in ${VARIANTS:-C B}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets youtu-llm-2b --decode 8 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/exp_$v.json" 2>&1 | grep -v '^{' | tail -3)
     done ;;
  82) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the tree (B): flash-split.diff with one warp a tile at 16 heads, and the flash prefill's expansions as fp16 products on
     # tinygrad's tensor cores (apps/mla.py latent_product); A = the tree with experiments/expand-tc.diff reversed (HEAD).
     # B's paths at 2,600 (f32, f16), then the prompts of $PRESETS f32 and f16, A B B A
     tree /tmp/A expand-tc.diff -R || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     for c in ${PATHS:-f32 f16}; do
       timeout 200 python3 -m tools.path_check --presets $P --depth 2600 --cache-type $c 2>&1 | tee "$OUT/paths_B_$c.txt" | grep -v Warn | tail -2
     done
     prompts_ab tc ;;
  81) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # where the last chunk of a 16k prompt goes (2048 tokens at 14,336, kernel by kernel, tools.profile --target fill):
     # Youtu-LLM-2B over an fp32 cache (tf32 flash), the same with experiments/flash-split.diff (fp16 pairs: +6.5% on the
     # 16k prompt where the kernel alone went 8.4 -> 5.5 ms, call68), and over an fp16 cache
     tree /tmp/B flash-split.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     M=${M:-youtu-llm-2b}; synth $M; echo "synthesized $(date +%T)"
     for run in A:f32 B:f32 A:f16; do
       v=${run%:*} c=${run#*:}; d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $c $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.profile --model $M --target fill --chunk 2048 --pos 14336 --max-context 16448 \
         --cache-type $c --repeat 3 --count 3 --top 8 > "$OUT/prof_${M%%-*}_${v}_$c.txt" 2>&1; grep -E '\(all\)|^step|^total|graph' "$OUT/prof_${M%%-*}_${v}_$c.txt" | head -20)
     done ;;
  80) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the fp16 cache's paths at full size with the landed fp16 flash kernel (one warp a tile): prefill against decode and
     # the generated path at depth 2,600 (chunks of 2048 flash), the three models
     (for m in youtu-llm-2b deepseek-v2-lite glm-4.7-flash; do synth $m & done; wait); echo "synthesized $(date +%T)"
     timeout $(($(left) - 3)) python3 -m tools.path_check --presets youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash --depth 2600 --cache-type f16 2>&1 \
       | tee "$OUT/paths_f16_all.txt" | grep -v Warn | tail -6 ;;
  78) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/flash-split.diff: over an fp32 cache the flash kernel's rows are fp16 (hi, lo) pairs and every
     # product three fp16 m16n8k16 (not three tf32 m16n8k8 with the splits in registers); GLM-4.7-Flash's in one stage. The
     # kernel's bench (flash = tf32, flash split, split w1), Youtu-LLM-2B's paths at 2,600, then its prompts A B B A (f32)
     tree /tmp/B flash-split.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     (cd /tmp/B && timeout 150 python3 -m tools.bench_mla_attention --prefill 2048 --pos 14336 --layers 2 --iters 5 2>&1 | tee "$OUT/flash_split.txt" | grep -v '^$')
     (cd /tmp/B && timeout 200 python3 -m tools.path_check --presets $P --depth 2600 2>&1 | tee "$OUT/paths_split_B.txt" | grep -v Warn | tail -4)
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --decode 32 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/split_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -4)
     done ;;
  79) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the fp32 cache's flash rows as pairs (the tree, B) on $PRESETS (default GLM-4.7-Flash, its pairs in one stage, two
     # warps): the paths at 2,600, then the prompts A B B A, A = the tree with experiments/flash-pairs.diff reversed (tf32 rows)
     tree /tmp/A flash-pairs.diff -R || exit 1
     for d in . /tmp/A; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-glm-4.7-flash}; (for m in ${P//,/ }; do synth $m & done; wait); echo "synthesized $(date +%T)"
     timeout 250 python3 -m tools.path_check --presets $P --depth 2600 2>&1 | tee "$OUT/paths_pairs.txt" | grep -v Warn | tail -4
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = A ] && d=/tmp/A; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --decode 32 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/pairs_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -4)
     done ;;
  77) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # step 76's rows that ran out of its call: ours alone with an fp16 cache (GLM-4.7-Flash, then Youtu-LLM-2B), then
     # Youtu-LLM-2B's paths at depth 2,600 with one warp a tile
     (for m in youtu-llm-2b glm-4.7-flash; do synth $m & done; wait); echo "synthesized $(date +%T)"
     for m in glm-4.7-flash youtu-llm-2b; do
       echo "-- $m f16 $(date +%T)"
       timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $m --cache-type f16 --decode 64 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/ours_${m%%-*}_f16.json" 2>&1 | grep -v '^{' | tail -3
     done
     timeout $(($(left) - 3)) python3 -m tools.path_check --presets youtu-llm-2b --depth 2600 --cache-type f16 2>&1 | tee "$OUT/paths_f16.txt" | grep -v Warn | tail -3 ;;
  76) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # the fp16 mma flash kernel landed (one warp a tile): the three models' f16 rows beside llama.cpp (its default f16 cache),
     # the MoE models first (their pairs not measured in one run yet), llama.cpp building while the files are synthesized
     [ -x .cache/llama/build/bin/llama-bench ] || (python3 -m tools.llama_bench build --time-limit 330 > /tmp/llama_build.log 2>&1) &
     (for m in youtu-llm-2b deepseek-v2-lite glm-4.7-flash; do synth $m & done; wait); echo "synthesized $(date +%T)"
     wait; tail -1 /tmp/llama_build.log 2>/dev/null; echo "built $(date +%T)"
     for m in ${PRESETS_LLAMA:-deepseek-v2-lite glm-4.7-flash youtu-llm-2b}; do
       echo "-- $m f16 $(date +%T)"
       timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $m --llama --cache-type f16 --decode 64 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/llama_${m%%-*}_f16.json" 2>&1 | grep -v '^{' | tail -3
     done ;;
  75) export TINYGRAD_MLA_CACHE=$PWD/.cache; synth deepseek-v2-lite; echo "synthesized $(date +%T)"
     # what bounds the routed experts' matvecs of a batched decode step (half of DeepSeek-V2-Lite's step at 8 sequences,
     # call40): Nsight Compute's full set on the gate_up and down of 8 sequences (stalls, issue slots, L2 and DRAM
     # throughput, achieved occupancy), the first two calls of each; whether grouping a step's rows by expert (each expert's
     # rows loaded once for the tokens that picked it) would pay: an L2 / load bound says yes, an issue bound no
     timeout $(($(left) - 5)) ncu --profile-from-start off --set full --launch-count 4 --kernel-name regex:"mv_q4_0_experts_8_" \
       python3 -m tools.profile --model deepseek-v2-lite --target decode --batch 8 --pos 32 --repeat 1 --count 2 --ncu > "$OUT/ncu_experts_b8.txt" 2>&1
     grep -E "^  [a-z_0-9]+\(|Duration|Registers Per|Achieved Occupancy|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Warp Cycles Per Issued|Issue Slots Busy|Stall|No Eligible|Compute \(SM\) Throughput|Memory Throughput" \
       "$OUT/ncu_experts_b8.txt" | head -80 ;;
  74) export TINYGRAD_MLA_CACHE=$PWD/.cache; M=${M:-youtu-llm-2b}
     # the server under load: A = the tree with experiments/batching-longest-chunks.diff (a prompt beside running streams in the longest
     # chunks), B = the tree (the shortest); Youtu-LLM-2B, 32 slots, 1 / 8 / 16 clients, A B B A (TTFT and ITL p50 / p99)
     synth $M; echo "synthesized $(date +%T)"
     serve_ab A batching-longest-chunks.diff ;;
  73) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # step 72's checks while llama.cpp builds (its kernel bench and path check), its A B once the build is done (the build's
     # 16 jobs would slow A alone; the tables in the log), then the diff's tree beside llama.cpp on the MoE models' f16 rows (none measured yet)
     [ -x .cache/llama/build/bin/llama-bench ] || (python3 -m tools.llama_bench build --time-limit 330 > /tmp/llama_build.log 2>&1) &
     tree /tmp/B flash-f16.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     (for m in youtu-llm-2b deepseek-v2-lite glm-4.7-flash; do synth $m & done; wait); echo "synthesized $(date +%T)"
     (cd /tmp/B && timeout 120 python3 -m tools.bench_mla_attention --prefill 2048 --pos 14336 --layers 2 --iters 5 2>&1 | tee "$OUT/flash_f16.txt" | grep -v '^$')
     (cd /tmp/B && timeout 150 python3 -m tools.path_check --presets youtu-llm-2b --depth 2600 --cache-type f16 2>&1 | tee "$OUT/paths_f16_B.txt" | grep -v Warn | tail -3)
     wait; tail -1 /tmp/llama_build.log 2>/dev/null; echo "built $(date +%T)"
     for v in A B; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v youtu-llm-2b f16 $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets youtu-llm-2b --cache-type f16 --decode 32 --depths ${DEPTHS:-4096,16384} \
         --json /tmp/f16mma_$v.json 2>&1 | grep -v '^{' | tail -3)
     done
     for m in ${PRESETS_LLAMA:-glm-4.7-flash deepseek-v2-lite}; do
       echo "-- B $m f16 $(date +%T)"
       (cd /tmp/B && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $m --llama --cache-type f16 --decode 64 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/llama_B_${m%%-*}_f16.json" 2>&1 | grep -v '^{' | tail -3)
     done ;;
  72) export TINYGRAD_MLA_CACHE=$PWD/.cache
     # EXPERIMENT experiments/flash-f16.diff: over an fp16 cache the expansions stay fp16 and the flash kernel's products are
     # fp16 mma.sync m16n8k16 (ldmatrix .trans for the values), not one tf32 pass over fp32 expansions
     tree /tmp/B flash-f16.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-youtu-llm-2b}; synth ${P//,/ }; echo "synthesized $(date +%T)"
     (cd /tmp/B && timeout 120 python3 -m tools.bench_mla_attention --prefill 2048 --pos 14336 --layers 2 --iters 5 2>&1 | tee "$OUT/flash_f16.txt" | grep -v '^$')
     (cd /tmp/B && timeout 150 python3 -m tools.path_check --presets $P --depth 2600 --cache-type f16 2>&1 | tee "$OUT/paths_f16_B.txt" | grep -v Warn | tail -3)
     for v in ${VARIANTS:-A B B A}; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --cache-type f16 --decode 32 --depths ${DEPTHS:-4096,16384} \
         --json "$OUT/f16mma_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -4)
     done ;;
  58) patch -s -p1 < runs/2026-12-01-gen/experiments/decode-mma.diff || exit 1
     python3 -m compileall -q apps tools > /dev/null
     timeout $(($(left) - 3)) python3 -m tools.bench_mla_attention --pos 32,4095,16383,32767 --layers 8 --iters 30 2>&1 \
       | tee "$OUT/decode_mma.txt" | grep -v '^$' ;;
  48) export TINYGRAD_MLA_CACHE=$PWD/.cache; synth youtu-llm-2b deepseek-v2-lite glm-4.7-flash
     timeout $(($(left) - 3)) python3 -m tools.path_check --depth 0,600 2>&1 | tee "$OUT/paths.txt" | tail -14 ;;
  47) export TINYGRAD_MLA_CACHE=$PWD/.cache
     patch -s -p1 < runs/2026-12-01-gen/experiments/prefill-keys-stages.diff && python3 apply_patches.py > /dev/null || exit 1
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     mkdir -p /tmp/var && sed 's/^MMA_KEYS = 8 /MMA_KEYS = 16/' apps/kernels/mla_attention.py > /tmp/var/keys16.py
     timeout 150 python3 -m tools.bench_mla_attention --prefill 512 --pos 15872,4096,0 --layers 4 --iters 10 --variants /tmp/var/keys16.py \
       2>&1 | tee "$OUT/attn_keys16.txt" | grep -v '^$'
     tree /tmp/B && cp /tmp/var/keys16.py /tmp/B/apps/kernels/mla_attention.py
     python3 -m compileall -q /tmp/B/apps > /dev/null
     synth youtu-llm-2b; echo "synthesized $(date +%T)"
     for v in A B B A; do
       d=.; [ $v = B ] && d=/tmp/B; mkdir -p /tmp/k$v; echo "-- $v $(date +%T)"
       (cd $d && CACHEDB=/tmp/k$v/cache.db timeout $(($(left) - 3)) python3 -m tools.gpu_bench --kernels hand --presets youtu-llm-2b \
         --decode 32 --prefill 512 --depths 4096,16384 --json "$OUT/keys_$v.$RANDOM.json" 2>&1 | grep -v '^{' | tail -4)
     done ;;
  46) abdiff warps short-row-warps.diff glm-4.7-flash 32; abdiff u1024 matvec-unroll-1024.diff glm-4.7-flash,deepseek-v2-lite 32 ;;
  45) abdiff u1024 matvec-unroll-1024.diff ${PRESETS:-glm-4.7-flash,deepseek-v2-lite} 32 ;;
  43) abdiff unroll matvec-unroll-steps.diff ${PRESETS:-glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b} 32 ;;
  42) abdiff warps short-row-warps.diff ${PRESETS:-glm-4.7-flash} 32 ;;
  41) abdiff group short-row-group.diff ${PRESETS:-glm-4.7-flash} 32 ;;
  37) abdiff fewer decode-fewer-kernels.diff ${PRESETS:-glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b} 32 ;;
  38) export TINYGRAD_MLA_CACHE=$PWD/.cache; P=${PRESETS:-glm-4.7-flash,youtu-llm-2b}; synth ${P//,/ }
     for diff in decode-fewer-kernels norm-one-kernel decode-softmax-in-values routing-one-kernel; do
       tree /tmp/B $diff.diff || exit 1
       for m in ${P//,/ }; do
         echo "-- $diff $m $(date +%T)"; mkdir -p /tmp/c$diff
         if [ $diff = decode-fewer-kernels ]; then
           (cd /tmp/B && CACHEDB=/tmp/c$diff/cache.db timeout $(($(left) - 3)) python3 -m tools.profile --model $m --kernels generated \
             --target decode --pos 32 --repeat 3 --count 20 --top 25 > "$OUT/prof_$m.txt" 2>&1; head -32 "$OUT/prof_$m.txt")
         else
           (cd /tmp/B && CACHEDB=/tmp/c$diff/cache.db timeout $(($(left) - 3)) python3 bench_block.py 30 --rounds 3 --model $m \
             --kernels generated --only decode --pos 32 --json > /tmp/bb.json 2> /tmp/bb.err; tail -1 /tmp/bb.err; python3 bench_block.py --markdown /tmp/bb.json 2>&1 | tail -1)
         fi
       done
     done ;;
  39) synth ${PRESETS:-glm-4.7-flash}; for m in ${PRESETS:-glm-4.7-flash}; do ncu_decode $m 5 decode --pos 32; head -75 "$OUT/ncu_decode_$m.txt" | cut -c1-190; done ;;
  40) export TINYGRAD_MLA_CACHE=$PWD/.cache
     tree /tmp/B expert-picks-gemm.diff || exit 1
     for d in . /tmp/B; do python3 -m compileall -q $d/upstream/tinygrad $d/apps $d/tools > /dev/null; done
     P=${PRESETS:-deepseek-v2-lite}; synth ${P//,/ }; echo "synthesized $(date +%T)"
     for v in A B B A; do
       d=.; [ $v = B ] && d=/tmp/B; echo "-- $v $(date +%T)"
       (cd $d && timeout $(($(left) - 3)) python3 -m tools.gpu_bench --presets $P --batch ${BATCH:-8} --decode 32 --json "$OUT/picks_$v.$RANDOM.json" 2>&1 \
         | grep -v '^{' | tail -3)
     done ;;
  5) patch -s -p1 < runs/2026-12-01-gen/experiments/norm-fuse.diff || exit 1
     python3 -m compileall -q upstream/tinygrad apps tools > /dev/null
     P=${PRESETS:-deepseek-v2-lite,glm-4.7-flash}
     synth ${P//,/ }
     for nf in ${VARIANTS:-0 1 0}; do
       echo "-- NORM_FUSE=$nf $(date +%T)"; mkdir -p /tmp/nf$nf
       NORM_FUSE=$nf CACHEDB=/tmp/nf$nf/cache.db timeout $(($(left) - 40)) python3 -m tools.gpu_bench --kernels generated \
         --presets $P --decode 32 --prefill 512 --json "$OUT/nf_$nf.$RANDOM.json" 2>&1 | grep -v '^{' | tail -4
     done
     NORM_FUSE=1 timeout $(($(left) - 2)) python3 -m tools.gpu_check release --kernels generated 2>&1 | tail -4 ;;
esac
