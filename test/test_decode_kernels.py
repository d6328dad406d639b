"""Which kernels one decode token runs on a device with hand-written kernels: the TinyJit capture of the real decode step
(bench_block's `decode`) of each -tiny release preset, rendered and compiled for CUDA with nvcc, run on nothing
(DEV=NULL:NVCC:sm_90). Per block: [q_a or q; kv_a] stacked (one kernel), q_b, k_b reading q_nope in place, attend,
combine, v_b, attn_output; the router matvec, the routing, the routed gate_up and down, the shared expert's gate_up and
down (dense blocks: gate_up, down), the shared expert's gate_up in the routed gate_up's launch and its down in the routed
down's sum. And one prefill chunk (bench_block's `fill`): the attention kernels of a chunk, and every product of packed
weights (Q4_0 and the K-quant shared experts) a GEMM."""
import json, re
import pytest
from nvcc import needs_nvcc, run_nvcc_script

SCRIPT = r"""
import json, sys
import bench_block as bb
from tinygrad.uop.ops import Ops
from apps.kernels import Fusions, FUSIONS
out = {}
def capture(preset, max_context, target="decode", kernels="hand", fusions=Fusions(), chunk=None):
  m = bb.Transformer.from_gguf(bb.resolve_model(preset), max_context=max_context, split_mask=bb.DEFAULT_SPLIT_MASK, kernels=kernels,
                               fusions=fusions)
  if chunk: m.set_prefill_chunks(chunk)
  b = bb.Bench(m, 16, 8)
  st = b.step(target)
  bb.warm(st, None)
  progs = []
  for call in bb.jit_of(st).captured.linear.src:
    ast = call.src[0]
    if ast.op is Ops.CUSTOM_FUNCTION and ast.arg == "graph": progs += [c.src[0] for c in ast.src[0].src if c.src[0].op is Ops.PROGRAM]
    elif ast.op is Ops.PROGRAM: progs.append(ast)
  names = [p.arg.name for p in progs]
  sources = [next((u.arg for u in p.src if u.op is Ops.SOURCE), "") for p in progs]
  c = b.m.cfg
  return dict(names=names, n_layer=c.n_layer, n_moe=sum(bl.moe for bl in b.m.blocks), q_lora=c.q_lora_rank, shexp=c.n_expert_shared,
              waits=sum("GRID_WAIT();" in s for s in sources), triggers=sum("GRID_TRIGGER();" in s for s in sources),
              hand_written=sum("#define GID_X" in s for s in sources),     # the dialect's prelude (apps/kernels)
              tensor_cores=sum("mma.sync" in s and "#define GID_X" not in s for s in sources),  # tinygrad's WMMA, not ours
              planned=sum(p.src[0].arg.opts_to_apply is not None for p in progs))
if "%s" == "deepseek":
  out["deepseek-v2-lite-tiny"] = capture("deepseek-v2-lite-tiny", 256)
  out["off"] = capture("deepseek-v2-lite-tiny", 257, fusions=Fusions().without(*FUSIONS))  # `tools.ab fusions --off` all: its variant A
else:
  for preset in ("glm-4.7-flash-tiny", "youtu-llm-2b-tiny"): out[preset] = capture(preset, 256)
  out["fill"] = capture("glm-4.7-flash-tiny", 258, "fill")                          # a prefill chunk (32 tokens)
  out["fill128"] = capture("glm-4.7-flash-tiny", 260, "fill", chunk=128)            # one of 128
  for target in ("decode", "fill"): out["generated_" + target] = capture("glm-4.7-flash-tiny", 259, target, "generated")
print("RESULT " + json.dumps(out))
"""

@pytest.fixture(scope="module")
def captures():
  """The captures, in two processes at once (a core each; each preset in one of them: its file is generated once)."""
  from concurrent.futures import ThreadPoolExecutor
  def part(which: str) -> dict:
    out = run_nvcc_script("import os; os.environ['NULL_ALLOW_COPYOUT'] = '1'\n" + SCRIPT % which)
    return json.loads(next(l for l in out.splitlines() if l.startswith("RESULT "))[7:])
  with ThreadPoolExecutor(2) as pool: return {k: v for d in pool.map(part, ("deepseek", "others")) for k, v in d.items()}

@needs_nvcc
@pytest.mark.parametrize("preset", ["deepseek-v2-lite-tiny", "glm-4.7-flash-tiny", "youtu-llm-2b-tiny"])
def test_kernels_per_decode_token(captures, preset):
  r = captures[preset]
  names, L, moe = r["names"], r["n_layer"], r["n_moe"]
  count = lambda pat: sum(1 for n in names if re.search(pat, n))
  assert count(r"^mla_attend") == L and count(r"^mla_combine") == L
  assert count(r"^route_") == moe and count(r"^mv_f32_linear") == moe     # the portable routing (~5 kernels) is not used
  assert count(r"_xs\d+") == (2 if r["q_lora"] else 1) * L                 # q_b and k_b read their inputs in place
  attention = (6 if not r["q_lora"] else 7) * L                             # [q; kv_a] is one kernel
  # the shared expert's gate_up and the routed experts' gate_up are one launch (side by side)
  assert count(r"_norm_glu\+mv_q4_0_experts_.*_norm_glu$") == (moe if r["shexp"] else 0)
  # and the shared expert's down is a term of the routed down's sum
  assert count(r"_mix_plus_q\d_k_linear_") == (moe if r["shexp"] else 0)
  ffn = 4 * moe + 2 * (L - moe)
  head = len(names) - attention - ffn                                        # embedding row, output head, sampling
  assert 0 < head <= 8, (len(names), attention, ffn)

@needs_nvcc
def test_every_waiting_kernel_triggers_its_dependents(captures):
  """Every captured kernel of a decode step that waits on its grid (the hand-written ones) lets the next one launch at its
  start; in a prefill chunk only the router's product and the routing do (the GEMMs and the prefill attention are many
  waves); `tools.ab fusions` --off trigger (its variant A) takes the trigger out of all of them."""
  for key in ("deepseek-v2-lite-tiny", "glm-4.7-flash-tiny", "youtu-llm-2b-tiny"):
    r = captures[key]
    assert r["waits"] >= 6 * r["n_layer"] and r["triggers"] == r["waits"], (key, r["waits"], r["triggers"])
  fill = captures["fill"]
  assert fill["waits"] >= 6 * fill["n_layer"] and fill["triggers"] == 2 * fill["n_moe"], (fill["waits"], fill["triggers"])
  assert captures["off"]["waits"] > 0 and captures["off"]["triggers"] == 0

@needs_nvcc
def test_ab_fusions_variant_a_is_the_unfused_step(captures):
  """`tools.ab fusions` with every fusion off (DeepSeek-V2-Lite's direct attn_q): q and kv_a as two kernels per block, k_b
  reading q_nope from q's own output; the shared and the routed gate_up as two kernels, and their downs."""
  r, on = captures["off"], captures["deepseek-v2-lite-tiny"]
  assert len(r["names"]) - len(on["names"]) == r["n_layer"] + 2 * r["n_moe"]
  assert not any("+" in n or "_plus_" in n for n in r["names"])

@needs_nvcc
def test_kernels_per_prefill_chunk(captures):
  """A prefill chunk of GLM-4.7-Flash-tiny (its shortest, 32 tokens): per block its attention in the split prefill kernel and
  its combine (fewer than PREFILL_MMA_FROM tokens; a chunk of 128 on the tensor cores instead), not the portable scores,
  softmax and products, and the products of packed weights in tensor-core GEMMs (sm_90),
  the Q5_K / Q6_K shared experts' and the per-head k_b / v_b included, the routed experts' gate_up with its norm and SwiGLU.
  At 32 tokens the plain products split K (gemm.split_k): the residual and SwiGLU come after the slices' sum."""
  r, L = captures["fill"], captures["glm-4.7-flash-tiny"]["n_layer"]
  names, moe = r["names"], r["n_moe"]
  count = lambda pat: sum(1 for n in names if re.search(pat, n))
  assert count(r"^mla_prefill_attend_32_") == L and count(r"^mla_prefill_combine_32_") == L and not count(r"^mla_prefill_mma_")
  long = captures["fill128"]["names"]
  assert sum(1 for n in long if n.startswith("mla_prefill_mma_128_")) == L and not any(re.match(r"^mla_prefill_(attend|combine)_", n) for n in long)
  # the chunk's latent rows (norm, rope, the store) and q_pe's rope in one kernel a block, q and kv read in place: no
  # generated kernel between the projections and the attention
  assert count(r"^mla_chunk_rows_") == L and not count(r"^(E|r)_")
  assert count(r"^gemm_mma_q5_k_") == moe and count(r"^gemm_mma_q6_k_") == moe   # sm_90: the tensor-core GEMMs
  assert count(r"^gemm_mma_q4_0_.*_e\d+_j\d+") == 2 * moe              # the routed experts' gate_up and down
  assert count(r"^gemm_mma_.*_batched\d+$") == 2 * L                      # k_b and v_b, a product per head
  # [q_a; kv_a], q_b, attn_output, the dense or shared gate_up and down of every block: K split, the residual added after
  assert count(r"^gemm_mma_.*_split\d+$") == 5 * L and not count(r"_residual$")
  # each with its x quantized first; a MoE block's shared and routed gate_up share one quantization of the normed h
  assert count(r"^gemm_xq_") == count(r"^gemm_mma_") - moe and not count(r"^gemm_q")
  assert count(r"^route_") == moe                                          # the routing: one kernel per MoE block
  assert count(r"^mv_f32_linear") == moe                                   # the router's f32 product on the matvec (<= 64 rows)
  assert count(r"^gemm_mma_.*_glu(_split\d+)?$") == L + moe                # a dense or shared gate_up per block, a routed one per
                                                                           # MoE block: SwiGLU in the store or after the sum
  assert count(r"^gemm_xq_.*_norm$") == 3 * L                              # their norms (one for both gate_ups), [q_a; kv_a]'s and
                                                                           # q_b's in x's quantization
  assert count(r"^E_\(n_tokens") <= 1                                      # (the embedding's) no one-thread residual adds
  assert not any(re.match(r"^q\d_(k_linear|0_batched)", n) for n in names)  # no portable K-quant or per-head product

@needs_nvcc
def test_generated_kernels_are_tinygrads(captures):
  """kernels="generated" (--kernels generated): in a decode step and a prefill chunk no hand-written kernel runs and no
  kernel carries hand-picked opts, so tinygrad's heuristics (or BEAM) decide every one; the hand path has both."""
  for target in ("decode", "fill"):
    r = captures["generated_" + target]
    assert r["hand_written"] == 0 and r["planned"] == 0 and len(r["names"]) > 0, (target, r["hand_written"], r["planned"])
  assert captures["glm-4.7-flash-tiny"]["hand_written"] > 0 and captures["fill"]["hand_written"] > 0
  # a decode product's residual is added in its kernel: attn_output in every block, the dense down and the shared down
  r = captures["generated_decode"]
  dense = r["n_layer"] - r["n_moe"]
  assert sum(n.endswith("_residual") for n in r["names"]) == r["n_layer"] + dense + (r["n_moe"] if r["shexp"] else 0)
  assert not any(n.endswith("_residual") for n in captures["generated_fill"]["names"])   # a chunk's products: added apart
  # a chunk's attention (its queries' scores over the symbolic key count, their probabilities times the values) on the tensor
  # cores, fp32 as three tf32 products (patches 0025, 0026); a decode step's thin products stay on the CUDA cores
  assert captures["generated_fill"]["tensor_cores"] >= 2 * captures["generated_fill"]["n_layer"], captures["generated_fill"]["tensor_cores"]
  assert captures["generated_decode"]["tensor_cores"] == 0

# the scripts below: a tiny model on DEV=NULL:NVCC, and the names of a captured step's kernels (inside its graphs too) in order
STEP_NAMES = r"""
import json, re
from apps import synth
from apps.model import Transformer
from tinygrad.uop.ops import Ops
def kernel_names(jit):
  out = []
  for call in jit.captured.linear.src:
    ast = call.src[0]
    if ast.op is Ops.CUSTOM_FUNCTION and ast.arg == "graph": out += [c.src[0].arg.name for c in ast.src[0].src if c.src[0].op is Ops.PROGRAM]
    elif ast.op is Ops.PROGRAM: out.append(ast.arg.name)
  return [re.sub(r"\x1b\[\d+m", "", n) for n in out]
"""

MIXED = STEP_NAMES + r"""
m = Transformer.from_gguf(synth.generate("glm-4.7-flash-tiny", "release", progress=False), max_context=256, slots=3, capture_dir=None)
for _ in m.start(0, [3, 4, 8, 1, 2, 6, 7]): pass
p = m.begin(1, [9] * 40)
while p.done < len(p.ids): m.collect(m.launch([0], p))
names = kernel_names(m.captures.jits[("mixed", 1, 32, False, (True, False, False, False, False))])
print("RESULT " + json.dumps({"names": names, "n_layer": m.cfg.n_layer, "n_moe": sum(b.moe for b in m.blocks)}))
"""

@needs_nvcc
def test_kernels_per_mixed_step():
  """A batched step with a prompt's chunk as further rows (Transformer.launch(slots, prompt)), GLM-4.7-Flash-tiny's: per
  block the rows' decode attention (attend, combine), the chunk's latent rows and its prefill attention (a chunk of 32: the
  split kernel and its combine), each once, and the products of both in the same tensor-core GEMMs (no decode matvec of the rows beside them),
  k_b's one product for both; the parts' kernels read the rows of q, kv and q_lat in place (no copies: one generated
  kernel a block, the join of the two parts' outputs before v_b)."""
  r = json.loads(next(l for l in run_nvcc_script("import os; os.environ['NULL_ALLOW_COPYOUT'] = '1'\n" + MIXED).splitlines()
                      if l.startswith("RESULT "))[7:])
  names, L = r["names"], r["n_layer"]
  count = lambda pat: sum(1 for n in names if re.search(pat, n))
  assert count(r"^mla_attend") == L and count(r"^mla_combine") == L and count(r"^mla_prefill_attend_32_") == L
  assert count(r"^mla_prefill_combine_32_") == L and not count(r"^mla_prefill_mma_")
  assert count(r"^mla_chunk_rows_") == L and count(r"^gemm_mma_.*_batched\d+$") == 2 * L
  # tinygrad's generated kernels: a block's one is the join after the chunk's prefill combine; beside the blocks only the
  # step's few-int bookkeeping (the rows' and the chunk's ids, the slots' next tokens)
  joins = [b for a, b in zip(names, names[1:]) if a.startswith("mla_prefill_combine_32_")]
  assert len(joins) == L and all(b.startswith("E_") for b in joins), joins
  assert count(r"^E_") <= L + 4, [n for n in names if n.startswith("E_")]
  assert count(r"^gemm_mma_") >= 5 * L and count(r"^gemm_xq_") == count(r"^gemm_mma_") - r["n_moe"]   # shared and routed gate_up: one
  assert count(r"^mv_q\d_\w+_linear_") == 1   # the block's products in the GEMMs; the head of the one sampled row a matvec
  assert count(r"^mv_f32_linear") == r["n_moe"]   # the router's f32 product of all 33 rows on the matvec (MAX_ROWS_F32)

ROWS = STEP_NAMES + r"""
m = Transformer.from_gguf(synth.generate("youtu-llm-2b-tiny", "release", progress=False), max_context=256, slots=8, capture_dir=None)
for s in range(8):
  for _ in m.start(s, [3 + s, 4, 8]): pass
for _ in range(2): m.step(list(range(8)))
print("RESULT " + json.dumps({"names": kernel_names(m.captures.jits[("rows", 8, (True, False, False, False, False))]), "n_layer": m.cfg.n_layer}))
"""

@needs_nvcc
def test_kernels_per_step_of_8():
  """A step of 8 sequences (Youtu-LLM-2B-tiny's): the products on the split tensor-core GEMM, each x quantized once (q_b's
  and k_b's read in place), a product's slices added by a generated kernel, but for gate_up's: down's x quantization makes
  silu(gate) * up from its slices itself, so that sum is never run."""
  r = json.loads(next(l for l in run_nvcc_script("import os; os.environ['NULL_ALLOW_COPYOUT'] = '1'\n" + ROWS).splitlines()
                      if l.startswith("RESULT "))[7:])
  names, L = r["names"], r["n_layer"]
  count = lambda pat: sum(1 for n in names if re.search(pat, n))
  assert count(r"^gemm_mma_.*_glu_split\d+$") == L and count(r"^gemm_xq_\d+_\d+_glu\d+$") == L, names
  assert count(r"^gemm_mma_.*_split\d+$") == 5 * L and count(r"_xs\d+") == 2 * L
  after = [(a, b) for a, b in zip(names, names[1:]) if re.search(r"^gemm_mma_.*_split\d+$", a)]   # what runs next
  assert all(b.startswith("r_") for a, b in after if "_glu_" not in a), after   # [q_a; kv_a], q_b, o and down: their sums
  assert all(re.search(r"^gemm_xq_\d+_\d+_glu\d+$", b) for a, b in after if "_glu_" in a), after   # gate_up: none

KB_ROWS = STEP_NAMES + r"""
m = Transformer.from_gguf(synth.generate("deepseek-v2-lite-tiny", "release", progress=False), max_context=256, slots=8, capture_dir=None)
for s in range(8):
  for _ in m.start(s, [3 + s, 4, 8]): pass
for B in (4, 8):
  for _ in range(2): m.step(list(range(B)))
names = lambda B: kernel_names(next(j for k, j in m.captures.jits.items() if k[:2] == ("rows", B)))
print("RESULT " + json.dumps({"names4": names(4), "names8": names(8), "n_layer": m.cfg.n_layer}))
"""

@needs_nvcc
def test_step_of_4_reads_the_heads_of_q_in_place():
  """DeepSeek-V2-Lite-tiny's step of 4 (no q_lora: q is the head of the stacked [q; kv_a] output): k_b's matvec reads each
  token's heads of q in place (x_row), so no kernel copies them out of the stacked rows first. A step of 8, whose k_b the
  GEMM takes, keeps the heads taken out (its x quantization reads them)."""
  r = json.loads(next(l for l in run_nvcc_script("import os; os.environ['NULL_ALLOW_COPYOUT'] = '1'\n" + KB_ROWS).splitlines()
                      if l.startswith("RESULT "))[7:])
  L = r["n_layer"]
  count = lambda names, pat: sum(1 for n in names if re.search(pat, n))
  assert count(r["names4"], r"^mv_q4_0_batched_4_\d+_\d+_\d+_xs\d+_xr\d+$") == L, r["names4"]
  assert count(r["names4"], r"^E_") < L, [n for n in r["names4"] if n.startswith("E_")]   # none a block (the step's own few)
  assert not count(r["names8"], r"_xr\d+") and count(r["names8"], r"^gemm_mma_q4_0_8_.*_batched\d+") >= L, r["names8"]
