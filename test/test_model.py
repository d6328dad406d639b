"""The three architectures against transformers and llama.cpp, through committed goldens (tools/make_model_goldens.py).

Logits are compared through a 64-column sketch of the full vocabulary (an unbiased estimate of ||ours - ref|| / ||ref||),
top-1 ids per position must agree, and greedy continuations must be identical token for token.
"""
import hashlib, json
import numpy as np
import pytest
from apps import synth
from apps.model import Transformer
from apps.readback import Readback, upload, upload_many
from tools.make_model_goldens import CASES, N_GREEDY, load_golden, rel_err, sketch_matrix

BOUND = 1e-3  # ||d|| / ||ref|| on the CPU fp32 path
# the engine's own mechanics (chunking, captures, the step ahead) do not depend on the architecture or the quant mix, which
# change only the kernels (the goldens' tests check those on every case): they run on one case, the MoE architecture with
# the low-rank query
MECHANICS_CASE = ("glm-4.7-flash-tiny", "release")
MECHANICS = "engine mechanics: checked on " + "/".join(MECHANICS_CASE)

@pytest.fixture(scope="module", params=CASES, ids=["/".join(c) for c in CASES])
def case(request):
  preset, mix = request.param
  meta, gold = load_golden(preset, mix)
  path = synth.generate(preset, mix, progress=False)
  assert hashlib.sha256(path.read_bytes()).hexdigest() == meta["sha256"], \
    f"{path.name} differs from the file the goldens were made from: regenerate them with python3 -m tools.make_model_goldens"
  model = Transformer.from_gguf(path, max_context=96, prefill_chunks=(16,))  # 33 tokens = 3 chunks: exercises chunked prefill
  return preset, mix, model, gold

def test_goldens_exist():
  assert {m for _, m in CASES} >= {"f32", "q8_0", "release"} and len({p for p, _ in CASES}) == 3

def test_prompt_logits(case):
  preset, mix, model, gold = case
  S = sketch_matrix(model.cfg.vocab_size)
  for name in ("prompt1", "prompt7", "prompt33"):
    ours = model.logits(gold[f"{name}/ids"].tolist())
    assert rel_err(ours, gold[f"{name}/hf_sketch"], S) < BOUND, name
    assert (ours.argmax(-1) == gold[f"{name}/hf_top8"][:, 0]).all(), name
    if f"{name}/llamacpp_sketch" in gold: assert rel_err(ours, gold[f"{name}/llamacpp_sketch"], S) < BOUND, name

def test_decode_after_chunked_prefill(case):
  preset, mix, model, gold = case
  S = sketch_matrix(model.cfg.vocab_size)
  ids = gold["continue/ids"].tolist()
  n_prompt = len(gold["prompt33/ids"])
  ours = [model.logits(ids[:n_prompt])] + [model.feed([t]) for t in ids[n_prompt:]]  # prefill in 3 chunks, then one token at a time
  ours = np.concatenate(ours)
  assert rel_err(ours, gold["continue/hf_sketch"], S) < BOUND
  assert rel_err(ours[n_prompt:], gold["continue/hf_sketch"][n_prompt:], S) < BOUND  # the decode steps alone
  assert all(model.captures.jits[("logits", L)].captured is not None for L in (0, 16))  # replayed, not scheduled again per token
  if "continue/llamacpp_sketch" in gold: assert rel_err(ours, gold["continue/llamacpp_sketch"], S) < BOUND

def test_greedy(case):
  preset, mix, model, gold = case
  ours = list(model.generate(gold["greedy/prompt"].tolist(), N_GREEDY))
  assert ours == gold["greedy/hf"].tolist()
  if "greedy/llamacpp" in gold: assert ours == gold["greedy/llamacpp"].tolist()

def test_greedy_generated_long_chunk(case):
  """The generated path (tinygrad's kernels alone) on the goldens with its prompt prefilled in one chunk of 80 (a symbolic
  length under TinyJit): its attention runs the chunk's queries at that bound, the rows past the prompt sliced off. The
  same greedy tokens."""
  preset, mix, model, gold = case
  if (preset, mix) != MECHANICS_CASE: pytest.skip("one model for the path")
  try:
    model.set_kernels("generated")
    model.set_prefill_chunks(80)
    assert list(model.generate(gold["greedy/prompt"].tolist(), N_GREEDY)) == gold["greedy/hf"].tolist()
  finally:
    model.set_kernels("hand")
    model.set_prefill_chunks(16)

class _QueueOrderRead(Readback):
  """On the CPU a read made at capture time is a read in queue order: generate() then takes its one-step-ahead path, as on
  CUDA (apps/readback.py). Logs captures and waits."""
  def __init__(self, t, log: list):
    super().__init__(t)
    self.in_queue_order, self.log = True, log
  def capture(self):
    self.v = int(self.t.item())
    self.log.append("capture")
  def value(self):
    self.log.append("value")
    return self.v

def test_generate_one_step_ahead(case, monkeypatch):
  """Each decode step is queued before the wait for the token it continues from; the outputs, a stop token's wasted step
  and the cached context are what the in-order loop gives."""
  preset, mix, model, gold = case
  if (preset, mix) != MECHANICS_CASE: pytest.skip(MECHANICS)
  log: list[str] = []
  monkeypatch.setattr(model, "_read", _QueueOrderRead(model.token, log))
  jit_of = model.decode_jit
  def logged(params=None, prefill=False):
    jit = jit_of(params, prefill)
    if prefill: return jit
    def decode(*a):
      log.append("decode")
      return jit(*a)
    return decode
  monkeypatch.setattr(model, "decode_jit", logged)
  prompt, want = gold["greedy/prompt"].tolist(), gold["greedy/hf"].tolist()
  assert list(model.generate(prompt, N_GREEDY)) == want
  assert log == ["capture"] + ["decode", "value", "capture"] * (N_GREEDY - 1) + ["value"]
  stop_at = want.index(want[N_GREEDY // 2])
  out = list(model.generate(prompt, N_GREEDY, stop=lambda t: t == want[stop_at]))
  assert out == want[:stop_at + 1]
  assert model.cached == prompt + out[:-1]  # the step queued after the stop token is not part of the context
  assert list(model.generate(prompt + out, 2)) == want[stop_at + 1:stop_at + 3]

def test_device_memory_of_a_loaded_model():
  """Loading keeps weights packed: device memory <= file tensor bytes + 10% + KV cache (and the small rope/sampler tables)."""
  from tinygrad import GlobalCounters
  from apps.gguf import GGUFFile
  path = synth.generate("glm-4.7-flash-tiny", "release", progress=False)
  with GGUFFile(path) as gf: tensor_bytes = sum(t.nbytes for t in gf.tensors.values())
  before = GlobalCounters.mem_used
  model = Transformer.from_gguf(path, max_context=64)
  used = GlobalCounters.mem_used - before
  state = sum(c.nbytes() for c in model.caches) + model.rope_cos.nbytes() + model.rope_sin.nbytes() + 4096  # + sampler state
  assert used <= 1.1 * tensor_bytes + state, (used, tensor_bytes, state)
  assert model.weight_bytes() <= 1.1 * tensor_bytes

def test_prefill_chunk_lengths(case):
  """A prompt goes in chunks of the longest length that the tokens left fill (under a bound, where given), and the rest as
  one chunk of the shortest (padded to it); logits the same within the bound whatever the chunks (only the kernels' batch
  changes); no length of no tokens; the fixture's single 16 is restored."""
  preset, mix, model, gold = case
  if (preset, mix) != MECHANICS_CASE: pytest.skip(MECHANICS)
  S = sketch_matrix(model.cfg.vocab_size)
  ids = gold["prompt33/ids"].tolist()
  try:
    model.set_prefill_chunks(8, 20, 200)   # 200 is clamped to the context (96)
    assert model.prefill_chunks == (96, 20, 8)
    assert list(model._chunks(33, 0)) == [(0, 20, 20), (20, 8, 8), (28, 5, 8)]
    assert list(model._chunks(150, 0)) == [(0, 96, 96), (96, 20, 20), (116, 20, 20), (136, 8, 8), (144, 6, 8)]
    # a bound asked before each chunk (the server's, while others decode): the longest length under it, else the shortest
    caps = iter([20, 4, None, 20, None])
    assert list(model._chunks(150, 0, lambda: next(caps))) == [(0, 20, 20), (20, 8, 8), (28, 96, 96), (124, 20, 20), (144, 6, 8)]
    assert rel_err(model.logits(ids), gold["prompt33/hf_sketch"], S) < BOUND
    assert len(list(model.generate(ids, 2))) == 2          # the prefill steps of lengths 20 and 8 captured and replayed
    assert list(model.generate(ids, 2)) == list(model.generate(ids, 2))
    with pytest.raises(ValueError, match="at least 1 token"): model.set_prefill_chunks(16, 0)
    with pytest.raises(ValueError, match="at least 1 token"): model.set_prefill_chunks()
  finally: model.set_prefill_chunks(16)
  assert list(model._chunks(len(ids), 0)) == [(0, 16, 16), (16, 16, 16), (32, 1, 16)]
  # by default a short prompt runs in a chunk of 32, not padded to 128 (on a CPU a third of the time for 16 tokens)
  default = Transformer.from_gguf(synth.generate(preset, mix, progress=False), max_context=1024)
  assert default.prefill_chunks == (512, 128, 32)   # the CPU: no tensor cores (test_long_chunks_on_the_tensor_cores)
  assert list(default._chunks(16, 0)) == [(0, 16, 32)]
  assert list(default._chunks(200, 0)) == [(0, 128, 128), (128, 32, 32), (160, 32, 32), (192, 8, 32)]

def test_upload_writes_in_place_and_checks():
  """apps.readback.upload: host values into a realized buffer (the same buffer: a captured step sees them), in queue order
  after the kernels before it; a wrong count or an unrealized tensor is a clear error."""
  from tinygrad import Tensor, dtypes
  t = Tensor.zeros(4, dtype=dtypes.int32).contiguous().realize()
  buf = t.uop.buffer
  doubled = (t * 2).realize()                 # queued before the upload: reads the old values
  upload(t, [1, 2, 3, 4])
  assert t.uop.buffer is buf and t.tolist() == [1, 2, 3, 4] and doubled.tolist() == [0, 0, 0, 0]
  with pytest.raises(ValueError, match="3 values for a buffer of 4"): upload(t, [1, 2, 3])
  with pytest.raises(ValueError, match="not a realized buffer"): upload(Tensor.zeros(4, dtype=dtypes.int32) + 1, [1, 2, 3, 4])
  # several at once (the sampler's parameters): every one written, a bad pair stops them all before any copy
  f = Tensor.zeros(2, dtype=dtypes.float32).contiguous().realize()
  upload_many([(t, [5, 6, 7, 8]), (f, [0.5, -1.5])])
  assert t.tolist() == [5, 6, 7, 8] and f.tolist() == [0.5, -1.5]
  with pytest.raises(ValueError, match="1 values for a buffer of 2"): upload_many([(t, [0, 0, 0, 0]), (f, [1.0])])
  assert t.tolist() == [5, 6, 7, 8]

def test_prefill_captures_take_the_token_buffer(case):
  """A prefill chunk's captures take the model's whole token buffer and slice the chunk out themselves: no input of a
  replay is a symbolic view, whose rewrites cost ~2 ms of host time per replay before its first kernel launched."""
  preset, mix, model, gold = case
  if (preset, mix) != MECHANICS_CASE: pytest.skip(MECHANICS)
  ids = gold["prompt33/ids"].tolist()
  outs = []
  for _ in range(3):   # capture, replay, replay: chunks 16, 16 (fill) and 1 (the prompt's last), none of them cached
    model.reset()
    outs.append(list(model.generate(ids, 1)))
  assert outs[0] == outs[1] == outs[2]
  L = model.prefill_chunks[-1]
  jits = [model.captures.jit(("fill", L), model._fill), model.decode_jit(prefill=L)]
  assert all(j.captured is not None for j in jits)
  for j in jits:
    assert [(vars_, dev) for _, vars_, _, dev in j.captured.expected_input_info] == [((), model.device)]

def test_path_check_agrees_on_cpu():
  """tools/path_check.py's three ways (prefill, captured decode steps, generated kernels; and the generated kernels with
  NOOPT=1, and the routing-pinned comparison) on GLM-4.7-Flash-tiny: on the CPU every path is fp32, so all agree to ~1e-6
  with the same argmax rows and routing, and the table has a row per depth with every column."""
  from tools import path_check
  rows = path_check.check(["glm-4.7-flash-tiny"], "release", [0], 40, 8, 7, floor=True, pin=True)
  r = rows[0]
  for a, b in path_check.PAIRS:
    assert r[f"{a}/{b}"] < 2e-5 and r[f"{a}/{b} argmax"] == 32, (a, b, r)
  assert r["pinned"] < 2e-5 and r["decisions that differ"] == 0 and r["largest margin where they differ"] == 0.0
  assert path_check.table(rows).count("\n") == 2 and " - " not in path_check.table(rows)
  # without the generated path (its slow one at depth), and with the model's chunk lengths given: prefill vs decode only
  rows = path_check.check(["glm-4.7-flash-tiny"], "release", [40], 40, 8, 7, generated=False, chunks=(16,))
  assert [k for k in rows[0] if "/" in k] == ["prefill/decode", "prefill/decode argmax"] and rows[0]["prefill/decode"] < 2e-5

def test_prefill_and_decode_agree_past_4096():
  """Correctness at depth: at positions past 4096 (filled in eight prefill chunks of 512, then chunks of 128) the prefill
  path's logits (the last rows, one chunk) and the decode step's, one token at a time, agree as the paths do at short
  context (fp32 on the CPU, summed in other orders), with the same argmax; and both match the references'
  (test/goldens/long_*.npz): llama.cpp to 1e-5 as at short context, transformers to the 1.5e-3 its own fp32 rope angles
  cost there (llama.cpp is as far from it: the golden says)."""
  from tools.path_check import rel
  from tools.make_model_goldens import LONG_CASE, LONG_ROWS, long_golden_path
  g = np.load(long_golden_path())
  path = synth.generate(*LONG_CASE, progress=False)
  assert hashlib.sha256(path.read_bytes()).hexdigest() == json.loads(bytes(g["meta"]).decode())["sha256"]
  m = Transformer.from_gguf(path, max_context=4352)
  ids, S = g["long/ids"].tolist(), sketch_matrix(m.cfg.vocab_size)
  m.fill(ids[:-LONG_ROWS])
  pre = m.feed(ids[-LONG_ROWS:])     # one prefill chunk at depth
  m.cached = ids[:-LONG_ROWS]        # back to before it: the decode steps write those rows again
  dec = np.concatenate([m.feed([t]) for t in ids[-LONG_ROWS:]])
  assert rel(dec, pre) < 2e-5 and (dec.argmax(-1) == pre.argmax(-1)).all(), rel(dec, pre)
  lc_hf = np.linalg.norm(g["long/llamacpp_sketch"] - g["long/hf_sketch"]) / np.linalg.norm(g["long/hf_sketch"])
  for x in (pre, dec):
    assert rel_err(x, g["long/llamacpp_sketch"], S) < 1e-5 and (x.argmax(-1) == g["long/hf_top8"][:, 0]).all()
    assert rel_err(x, g["long/hf_sketch"], S) < 1.2 * lc_hf and lc_hf < 2e-3, (rel_err(x, g["long/hf_sketch"], S), lc_hf)

def test_f16_cache_against_llama_cpp():
  """--cache-type f16 against llama.cpp's own fp16 cache on a 33-token prompt: as close as llama.cpp's two caches are to
  each other (its CPU attention also rounds the query to fp16, so the two f16 paths do not round alike)."""
  from tools.make_model_goldens import LONG_CASE, long_golden_path
  g = np.load(long_golden_path())
  m = Transformer.from_gguf(synth.generate(*LONG_CASE, progress=False), max_context=64, cache_type="f16")
  S = sketch_matrix(m.cfg.vocab_size)
  ours = m.logits(g["f16/ids"].tolist())
  spread = np.linalg.norm(g["f16/llamacpp_f16_sketch"] - g["f16/llamacpp_f32_sketch"]) / np.linalg.norm(g["f16/llamacpp_f32_sketch"])
  assert 1e-4 < spread < 3e-3 and rel_err(ours, g["f16/llamacpp_f16_sketch"], S) < spread, (rel_err(ours, g["f16/llamacpp_f16_sketch"], S), spread)

def test_f16_cache():
  """--cache-type f16: the latent cache is fp16 and holds the rows the fp32 model computes, rounded once (the first block's
  inputs are the same, so its rows are exactly those rounded); the logits move by the rounding only (measured on a
  700-token prompt: 6.8e-4 / 3.1e-3 / 3.7e-2 for Youtu-LLM-2B / GLM-4.7-Flash / DeepSeek-V2-Lite-tiny, 27 random blocks)
  and the decode steps agree with the prefill path over the same fp16 rows; an unknown type is a one-line error."""
  from tools.path_check import rel, window
  path = synth.generate("youtu-llm-2b-tiny", "release", progress=False)
  m32, m16 = (Transformer.from_gguf(path, max_context=160, prefill_chunks=(64, 16), cache_type=t) for t in ("f32", "f16"))
  ids = window(m32.cfg.vocab_size, 120, 3)
  l32, l16 = m32.logits(ids), m16.logits(ids)
  assert m16.caches[0].dtype.itemsize == 2 and m16.caches[0].nbytes() * 2 == m32.caches[0].nbytes()
  np.testing.assert_array_equal(m16.caches[0].numpy()[:120], m32.caches[0].numpy()[:120].astype(np.float16))
  assert 1e-6 < rel(l16, l32) < 5e-3 and (l16.argmax(-1) == l32.argmax(-1)).mean() > 0.9, rel(l16, l32)
  m16.reset()
  m16.fill(ids[:-8])
  dec = np.concatenate([m16.feed([t]) for t in ids[-8:]])
  assert rel(dec, l16[-8:]) < 2e-5 and (dec.argmax(-1) == l16[-8:].argmax(-1)).all(), rel(dec, l16[-8:])
  with pytest.raises(ValueError, match="cache type 'q8'"): Transformer.from_gguf(path, max_context=16, cache_type="q8")

def test_fit_context():
  """max_context="fit": the longest context the free memory holds after the weights (a tenth and FIT_RESERVE kept back),
  in steps of 256, at most the trained length; 4096 where the device does not say; a clear error where nothing fits."""
  from apps.model import fit_context, FIT_RESERVE, free_bytes, expands_latents
  path = synth.generate("youtu-llm-2b-tiny", "release", progress=False)
  m = Transformer.from_gguf(path, max_context="fit")
  assert m.max_context == m.cfg.context_length == 8192 and free_bytes("CPU") > 2**30   # this machine holds the trained length
  cfg = m.cfg
  per_token = cfg.n_layer * (cfg.kv_lora_rank + cfg.qk_rope) * 4 + 4 * cfg.qk_rope + 4 + 2 * 4 * 512 * cfg.n_head
  per_token += 4 * cfg.n_head * (cfg.qk_nope + cfg.qk_rope + cfg.v_head)   # a chunk of 512 expands the latent rows
  free = int((FIT_RESERVE + 1000 * per_token) / 0.9) + 1
  assert expands_latents(cfg, 512) and fit_context(cfg, 4, free, 512) == 768 and fit_context(cfg, 4, None, 512) == 4096
  assert fit_context(cfg, 2, free, 512) > 768 and fit_context(cfg, 4, 10 * 2**40, 512) == 8192
  with pytest.raises(ValueError, match="no room for a context"): fit_context(cfg, 4, 2**30, 512)
  # the tensor cores' kernels hold no scores, and their expansions only the buffers the GEMM writes, an element in the
  # cache's bytes (an fp32 cache's fp16 pairs, an fp16 cache's fp16 rows)
  for size in (4, 2):
    tc = cfg.n_layer * (cfg.kv_lora_rank + cfg.qk_rope) * size + 4 * cfg.qk_rope + 4 + size * cfg.n_head * (cfg.qk_nope + cfg.qk_rope + cfg.v_head)
    free = int((FIT_RESERVE + 1000 * tc) / 0.9) + 1
    assert fit_context(cfg, size, free, 512, scores=False) == 768 and fit_context(cfg, size, free - int(240 * tc / 0.9), 512, scores=False) == 512

def test_fit_context_counts_block_products(monkeypatch):
  """On a device with int8 tensor cores the generated path's chunk products make a block's quantized weights as int8 quants
  (the routed experts' only where they are Q4_0 / Q8_0, which their tiles take): "fit" keeps those bytes back there (the
  hand-written path and other devices make none)."""
  import apps.model as M
  from apps.gguf import GGUFFile
  from apps.quantized import block_product_bytes
  path = synth.generate("youtu-llm-2b-tiny", "release", progress=False)
  gf = GGUFFile(path)
  bpb = block_product_bytes(gf)
  q = [t for t in gf.tensors.values() if t.name.startswith("blk.0.") and t.type.name in ("Q4_0", "Q8_0")]
  assert q and bpb == sum(t.n_elements for t in q)       # the blocks are alike: block 0's quantized weights, a byte each
  # K-quants: every block's K-quant products are block products, but its Q4_K experts stay with the packed expert kernel
  kq = GGUFFile(synth.generate("deepseek-v2-lite-tiny", "kquant", progress=False))
  made = lambda t: t.type.name in ("Q4_0", "Q8_0") or (t.type.name in ("Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K") and "_exps." not in t.name)
  blocks = {t.name.split(".")[1] for t in kq.tensors.values() if t.name.startswith("blk.")}
  per = [sum(t.n_elements for t in kq.tensors.values() if t.name.startswith(f"blk.{b}.") and made(t)) for b in blocks]
  assert any(t.type.name == "Q4_K" and "_exps." in t.name for t in kq.tensors.values()) and block_product_bytes(kq) == max(per)
  cfg = M.Config.from_gguf(gf)
  per_token = cfg.n_layer * (cfg.kv_lora_rank + cfg.qk_rope) * 4 + 4 * cfg.qk_rope + 4 + 2 * 4 * 512 * cfg.n_head
  per_token += 4 * cfg.n_head * (cfg.qk_nope + cfg.qk_rope + cfg.v_head)   # a chunk of 512 expands the latent rows
  free = int((M.FIT_RESERVE + 768 * per_token) / 0.9) + 1  # exactly 768 tokens fit
  monkeypatch.setattr(M, "free_bytes", lambda device: free)
  monkeypatch.setattr(M, "int8_tensor_cores", lambda device: True)
  assert Transformer.from_gguf(path, max_context="fit").max_context == 768
  assert Transformer.from_gguf(path, max_context="fit", kernels="generated").max_context == 512
  monkeypatch.setattr(M, "int8_tensor_cores", lambda device: False)
  assert Transformer.from_gguf(path, max_context="fit", kernels="generated").max_context == 768

def test_rope_tables_in_spans():
  """The rope tables made in spans on threads are the float64 formula's, rounded once, across the spans' edges."""
  from apps.model import rope_tables
  from apps.gguf import GGUFFile
  from apps.mla import Config
  cfg = Config.from_gguf(GGUFFile(synth.generate("glm-4.7-flash-tiny", "release", progress=False)))
  cos, sin = rope_tables(cfg, 2 * 8192 + 5)
  ang = np.arange(2 * 8192 + 5, dtype=np.float64)[:, None] * cfg.rope_freqs()[None, :]
  np.testing.assert_array_equal(cos, (np.cos(ang) * cfg.rope_mag).astype(np.float32))
  np.testing.assert_array_equal(sin, (np.sin(ang) * cfg.rope_mag).astype(np.float32))

def chunk_rows_ops(q_raw, kv_raw, kv_norm_w, cache, rope_cos, rope_sin, pos, *, n_head, kv_lora, qk_nope, qk_rope, eps, kv_offset=0,
                   first=0, fusions=None):
  """mla_attention.mla_chunk_rows from tensor ops, for a stand-in module on a device without the kernel: the chunk's
  latent rows scattered into the cache by a one-hot product (the tokens past pos[2] write nothing), q_pe roped."""
  from tinygrad import Tensor, dtypes
  from apps.kernels import to_bound
  from apps.mla import apply_rope
  from apps.quantized import rms_norm
  (q_raw, kv_raw), rows, bound = to_bound(q_raw, kv_raw)
  T, L = rows - first, bound - first
  t = Tensor.arange(L)
  p = pos[0].cast(dtypes.int32) + t
  pc = p.minimum(rope_cos.shape[0] - 1)
  cos, sin = rope_cos[pc], rope_sin[pc]
  kv = kv_raw[first:, kv_offset:kv_offset + kv_lora + qk_rope]
  row = rms_norm(kv[:, :kv_lora], kv_norm_w, eps).cat(apply_rope(kv[:, kv_lora:], cos, sin), dim=-1).cast(cache.dtype)
  q_pe = apply_rope(q_raw[first:, :n_head * (qk_nope + qk_rope)].reshape(L, n_head, qk_nope + qk_rope)[..., qk_nope:], cos.unsqueeze(1),
                    sin.unsqueeze(1))
  hit = (Tensor.arange(cache.shape[0]).reshape(-1, 1) == (pos[1] + p).reshape(1, L)) & (t < pos[2]).reshape(1, L)
  new = hit.any(-1, keepdim=True).where(hit.float() @ row.float(), cache.float()).cast(cache.dtype).contiguous()
  return (q_pe if isinstance(T, int) else q_pe[:T]), Tensor(cache.uop.after(cache.uop.store(new.uop)))

@pytest.mark.parametrize("cache_type", ["f32", "f16"])
def test_flash_prefill_wiring(monkeypatch, cache_type):
  """The model's flash branch (apps/mla.py Block.flash_attention: a chunk's rows 0..start_pos + T - 1 expanded per head into
  Transformer.expanded by mla_expand, then mla_flash_prefill over them) gives the CPU path's logits, with the tensor cores'
  kernels stood in for by tensor ops (the expansion of the weights and cache it is given, causal attention over the buffers
  and positions it is given): two chunks of 256, the second 44 tokens
  under its bound (the padded queries reach zeroed rows past the prompt), over an fp32 cache (its rows as the fp16 pairs
  of split_halves) and an fp16 one. The buffers exist where a chunk length of the hand-written path takes the flash kernel."""
  import dataclasses, types
  import apps.mla as mla, apps.model as M
  from tinygrad import Tensor, dtypes
  from tools.path_check import rel, window
  path = synth.generate("youtu-llm-2b-tiny", "release", progress=False)
  ref, m = (Transformer.from_gguf(path, max_context=512, prefill_chunks=(256,), cache_type=cache_type) for _ in range(2))
  cfg = m.cfg
  assert mla.flash_prefills(cfg, 256) and m.expanded is None   # the CPU has no tensor cores: no buffers, no flash branch
  def flash(q, keys, values, pos, scale):
    T, rows = q.shape[0], keys.shape[0]
    if keys.shape[-1] == 2 * q.shape[-1]:   # fp16 (hi, lo) pairs of fp32 rows
      keys, values = ((x[..., :x.shape[-1] // 2].float() + x[..., x.shape[-1] // 2:].float() / 2048) for x in (keys, values))
    seen = Tensor.arange(rows).reshape(1, 1, rows) <= (Tensor.arange(T) + pos[0].cast(dtypes.int32)).reshape(1, T, 1)
    s = seen.where(q.permute(1, 0, 2) @ keys.float().permute(1, 2, 0) * scale, float("-inf"))     # (H, T, rows)
    return (s.softmax(-1) @ values.float().permute(1, 0, 2)).permute(1, 0, 2)                      # (T, H, v_head)
  calls = []
  stand_in = types.ModuleType(m.kernel_modules.mla_attention.__name__)
  stand_in.__dict__.update(vars(m.kernel_modules.mla_attention))
  stand_in.available, stand_in.decodes = (lambda device: True), (lambda *a: False)
  stand_in.mla_flash_prefill = lambda *a: (calls.append((*a[0].shape, a[1].dtype, a[2].dtype)), flash(*a))[1]
  stand_in.mla_chunk_rows = chunk_rows_ops
  def expand(cache, k_b, v_b, pos, keys, values, tokens):   # the expansion GEMM: every row of the buffers, in their form
    kk, vv = mla.expand_per_head(cache[:keys.shape[0]].float(), *mla.heads_side_by_side(k_b, v_b), cfg.n_head, cfg.qk_rope)
    if keys.shape[-1] == 2 * kk.shape[-1]: kk, vv = stand_in.split_halves(kk.contiguous()), stand_in.split_halves(vv.contiguous())
    expands.append(tokens)
    return kk.cast(keys.dtype), vv.cast(values.dtype)
  expands = []
  stand_in.mla_expand = expand
  monkeypatch.setattr(mla, "has_mma", lambda device: True)
  monkeypatch.setattr(M, "has_mma", lambda device: True)
  m.set_kernel_modules(dataclasses.replace(m.kernel_modules, mla_attention=stand_in))
  m.set_prefill_chunks(128)
  assert m.expanded is None                                  # no chunk of 128 takes the flash kernel: no buffers
  m.set_prefill_chunks(256)
  wide = 2 if cache_type == "f32" else 1   # this preset's rows fit a stage as pairs: flash_form's "split"
  assert stand_in.flash_form(cfg.qk_nope + cfg.qk_rope, cfg.v_head, m.cache_dtype) == {"f32": "split", "f16": "f16"}[cache_type]
  assert [t.shape for t in m.expanded] == [(512, cfg.n_head, wide * (cfg.qk_nope + cfg.qk_rope)), (512, cfg.n_head, wide * cfg.v_head)]
  m.set_kernels("generated")
  assert m.expanded is None
  m.set_kernels("hand")
  ids = window(cfg.vocab_size, 300, 5)
  got, want = m.logits(ids), ref.logits(ids)
  # every block's chunks took the flash branch, over keys and values in fp16: an fp32 cache's as (hi, lo) pairs (the
  # kernel's three fp16 products a pair), an fp16 cache's as they are (one)
  assert calls and all(s[0] == 256 and s[-2:] == (dtypes.float16, dtypes.float16) for s in calls), calls
  assert expands == [256] * len(calls)
  # an fp16 cache's expansions are rounded to fp16 as well (the kernel multiplies fp16 rows): their 10-bit mantissas move
  # this preset's logits by 8.4e-4, what the fp16 cache's own rounding moves them by against an fp32 cache (7.8e-4, and one
  # of these 300 rows' argmax)
  flips = int((got.argmax(-1) != want.argmax(-1)).sum())
  assert rel(got, want) < {"f32": 1e-5, "f16": 1.5e-3}[cache_type] and flips <= {"f32": 0, "f16": 2}[cache_type], (rel(got, want), flips)

def test_long_chunks_on_the_tensor_cores(monkeypatch):
  """One sequence on the tensor cores' hand-written path prefills in chunks of 2048 too (a long prompt's flash attention
  expands its rows once a chunk); a model of several sequences (a server, which runs a chunk between decode steps), the
  generated path, a device without tensor cores and a model whose chunks of 2048 would not flash keep 512; "fit" counts no
  per-key scores where the kernels hold none."""
  import apps.model as M
  path = synth.generate("youtu-llm-2b-tiny", "release", progress=False)
  assert Transformer.from_gguf(path, max_context=64).prefill_chunks == (64, 32)   # the CPU; lengths clamped to the context
  monkeypatch.setattr(M, "has_mma", lambda device: True)
  assert Transformer.from_gguf(path, max_context=4096).prefill_chunks == (2048, 512, 128, 32)
  assert Transformer.from_gguf(path, max_context=4096, slots=2).prefill_chunks == (512, 128, 32)
  assert Transformer.from_gguf(path, max_context=4096, kernels="generated").prefill_chunks == (512, 128, 32)
  assert list(Transformer.from_gguf(path, max_context=4096)._chunks(2600, 0)) == [(0, 2048, 2048), (2048, 512, 512), (2560, 32, 32), (2592, 8, 32)]
  cfg = Transformer.from_gguf(path, max_context=64).cfg
  free = int((M.FIT_RESERVE + 2**27) / 0.9) + 1   # 128 MiB for the context
  assert M.fit_context(cfg, 4, free, 2048, scores=False) == cfg.context_length > 4 * M.fit_context(cfg, 4, free, 2048)
  monkeypatch.setattr(M, "flash_prefills", lambda cfg, chunk: chunk > 512)   # GLM-4.7-Flash's rule: 2048 flash, 512 not
  assert Transformer.from_gguf(path, max_context=4096).prefill_chunks == (2048, 512, 128, 32)
  monkeypatch.setattr(M, "flash_prefills", lambda cfg, chunk: False)
  assert Transformer.from_gguf(path, max_context=4096).prefill_chunks == (512, 128, 32)
