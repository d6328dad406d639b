"""apps/kernels/mla_attention.py: the MLA decode attention kernels and their portable reference.

- the reference (tinygrad ops, any device) vs a float64 numpy implementation of the formula, cache row included;
- the rendered CUDA and Metal sources EXECUTED on the CPU by a small emulator of the dialect (each GPU thread a fiber,
  warp shuffles / simd reductions and workgroup barriers as fiber barriers, UBSan for misaligned float4 and local-array
  bounds, NaN guards around every buffer and in the cache rows the kernel may not read), vs float64 numpy;
- CUDA render + nvcc compile + TinyJit replay (DEV=NULL:NVCC:sm_90) for the three models' shapes, when nvcc is there;
- on a CUDA / Metal device (the H100): the kernels vs the reference, single calls and a TinyJit decode loop.
"""
import math
from pathlib import Path
import numpy as np
import pytest
from nvcc import needs_nvcc, run_nvcc_script, run_script
from emulator import emulate
from tinygrad import Tensor, TinyJit, Device, UOp, dtypes
from apps.kernels import render, language_of, SourceKernel, Param
from apps.kernels import mla_attention
from apps.mla import decode_attention_reference
from apps.kernels.mla_attention import (AttentionShape, attend_kernel, combine_kernel, mla_decode_attention,
                                        SPLITS, MIN_CHUNK, prefill_attend_kernel,
                                        mla_prefill_attention, prefill_splits, PREFILL_SPLITS, PREFILL_MIN_CHUNK,
                                        prefill_mma_kernel, mma_warps, mma_group, MMA_GROUP, attend_mma_kernel, decode_mma_warps,
                                        DECODE_MMA_KEYS, attend_depth_kernel, decode_mma_serves_shape, attend_mma_t_kernel,
                                        flash_prefill_kernel, flash_keys, flash_split, FLASH_KEYS, flash_form, split_halves,
                                        flash_stages, expand_kernel, chunk_rows_kernel)

REPO = Path(__file__).resolve().parent.parent
SMALL = AttentionShape(n_head=4, kv_lora=64, qk_nope=32, qk_rope=16)
ODD = AttentionShape(n_head=6, kv_lora=72, qk_nope=8, qk_rope=12)     # lanes past kv_lora / qk_rope, 2 heads per warp, 3 warps
ODD5 = AttentionShape(n_head=5, kv_lora=72, qk_nope=8, qk_rope=12)    # one head a warp, 5 warps
GLM = AttentionShape(n_head=20, kv_lora=512, qk_nope=192, qk_rope=64)
DSV2 = AttentionShape(n_head=16, kv_lora=512, qk_nope=128, qk_rope=64)  # Youtu-LLM-2B has the same attention shape
TINY = AttentionShape(n_head=4, kv_lora=256, qk_nope=96, qk_rope=32)    # the -tiny presets

# ---------------------------------------------------------------- data and the float64 formula

def make_case(s: AttentionShape, pos: int, max_context: int, seed: int = 0, theta: float = 10000.0) -> dict:
  """Random inputs; cache rows < pos random, rows >= pos NaN (nothing may read them: the new row is computed, not read)."""
  rng = np.random.default_rng(seed)
  ang = np.arange(max_context)[:, None] * (1.0 / theta ** (np.arange(0, s.qk_rope, 2) / s.qk_rope))[None, :]
  cache = np.full((max_context, s.kv_lora + s.qk_rope), np.nan, np.float32)
  cache[:pos] = rng.standard_normal((pos, s.kv_lora + s.qk_rope))
  return dict(q_lat=rng.standard_normal((s.n_head, s.kv_lora)).astype(np.float32),
              q_raw=rng.standard_normal((s.n_head, s.qk_nope + s.qk_rope)).astype(np.float32),
              kv_raw=(rng.standard_normal(s.kv_lora + s.qk_rope) * 3).astype(np.float32),
              kv_norm_w=(1 + 0.3 * rng.standard_normal(s.kv_lora)).astype(np.float32), cache=cache,
              rope_cos=np.cos(ang).astype(np.float32), rope_sin=np.sin(ang).astype(np.float32), pos=np.array([pos, 0], np.int32),
              scale=1 / math.sqrt(s.qk_nope + s.qk_rope), eps=1e-6)

def numpy_attention(s: AttentionShape, c: dict) -> tuple[np.ndarray, np.ndarray]:
  """(out (H, kv_lora), new cache row) in float64, straight from the formula; with an fp16 cache the new row is rounded to
  it, as the cache holds it."""
  f = lambda k: c[k].astype(np.float64)
  p = int(c["pos"][0])
  cos, sin = f("rope_cos")[p], f("rope_sin")[p]
  def rope(x):  # interleaved pairs (x0, x1) rotated; the rotated even lanes, then the odd ones
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return np.concatenate([x0 * cos - x1 * sin, x1 * cos + x0 * sin], axis=-1)
  kv = f("kv_raw")
  c_kv = kv[:s.kv_lora] / np.sqrt(np.mean(kv[:s.kv_lora] ** 2) + c["eps"]) * f("kv_norm_w")
  row = np.concatenate([c_kv, rope(kv[s.kv_lora:])])
  if c["cache"].dtype == np.float16: row = row.astype(np.float16).astype(np.float64)
  keys = np.concatenate([f("cache")[:p], row[None]])
  q = np.concatenate([f("q_lat"), rope(f("q_raw")[:, s.qk_nope:])], axis=-1)
  sc = q @ keys.T * c["scale"]
  pr = np.exp(sc - sc.max(-1, keepdims=True))
  return (pr / pr.sum(-1, keepdims=True)) @ keys[:, :s.kv_lora], row

def rel_err(a, b) -> float: return float(np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max())

def check_cache(s: AttentionShape, c: dict, cache: np.ndarray, row: np.ndarray, rtol: float = 2e-6):
  p = int(c["pos"][0])
  np.testing.assert_array_equal(cache[:p], c["cache"][:p])              # rows before pos untouched
  assert np.isnan(cache[p + 1:]).all()                                     # rows after pos untouched
  np.testing.assert_allclose(cache[p], row, rtol=rtol, atol=rtol * np.abs(row).max())

KW = lambda s, c: dict(n_head=s.n_head, kv_lora=s.kv_lora, qk_nope=s.qk_nope, qk_rope=s.qk_rope, scale=c["scale"], eps=c["eps"])
INPUTS = ("q_lat", "q_raw", "kv_raw", "kv_norm_w", "cache", "rope_cos", "rope_sin", "pos")

# ---------------------------------------------------------------- the reference on the default device

@pytest.mark.parametrize("pos", [0, 1, 37, 200])
def test_reference_matches_numpy(pos):
  c = make_case(SMALL, pos, 256, seed=pos)
  t = {k: Tensor(c[k]) for k in INPUTS}
  out = decode_attention_reference(*[t[k] for k in INPUTS], **KW(SMALL, c)).numpy()
  ref, row = numpy_attention(SMALL, c)
  assert out.shape == (SMALL.n_head, SMALL.kv_lora) and rel_err(out, ref) < 1e-5
  check_cache(SMALL, c, t["cache"].numpy(), row)

def test_reference_symbolic_pos():
  """With a bound symbolic position (as in the model's decode) the reference reads the same rows."""
  c = make_case(SMALL, 5, 64, seed=1)
  t = {k: Tensor(c[k]) for k in INPUTS}
  v = UOp.variable("start_pos", 0, 63).bind(5)
  out = decode_attention_reference(*[t[k] for k in INPUTS[:-1]], v, **KW(SMALL, c)).numpy()
  ref, row = numpy_attention(SMALL, c)
  assert rel_err(out, ref) < 1e-5
  check_cache(SMALL, c, t["cache"].numpy(), row)

def emulate_attention(s: AttentionShape, c: dict, language: str, work: Path, kv_offset: int = 0,
                      attend: SourceKernel | None = None) -> tuple[np.ndarray, np.ndarray]:
  """Both kernels on the emulator: (out, cache after). Partials start as NaN: reading one that was not written shows.
  kv_offset: kv_raw is passed behind that many NaNs (a stacked [q_a; kv_a] output), which the kernel must skip.
  attend: another attend kernel of the same parameters (attend_kernel's by default)."""
  attend = attend or attend_kernel(s, c["scale"], c["eps"], kv_offset, half=c["cache"].dtype == np.float16)
  combine = combine_kernel(s)
  if kv_offset: c = {**c, "kv_raw": np.concatenate([np.full(kv_offset, np.nan, np.float32), c["kv_raw"]])}
  part = np.full((SPLITS, s.n_head, s.kv_lora), np.nan, np.float32)
  ml = np.full((SPLITS, s.n_head, 2), np.nan, np.float32)
  cache = c["cache"].copy()
  emulate(attend, language, [part, ml, cache] + [c[k] for k in INPUTS[:4]] + [c["rope_cos"], c["rope_sin"], c["pos"]], work)
  out = np.full((s.n_head, s.kv_lora), np.nan, np.float32)
  emulate(combine, language, [out, part, ml, c["pos"]], work)
  return out, cache

# pos: a single token, one partial split, several splits of MIN_CHUNK, chunks of more than MIN_CHUNK (ceil(n / SPLITS)),
# chunks of more than one shared-memory stage (stage_rows rows); 1023 / 1024: the last position whose splits take MIN_CHUNK
# keys (every split full: the combine's one-split-at-a-time form) and the first past it (the form that loads them all at once)
@pytest.mark.parametrize("shape,pos", [(SMALL, 0), (SMALL, 1), (SMALL, 37), (SMALL, 200), (ODD, 5), (ODD, 200), (SMALL, 1023), (SMALL, 1024),
                                       (SMALL, 1500), (ODD, 3000), (ODD5, 3000), (SMALL, 6000)],
                         ids=lambda v: f"h{v.n_head}_kv{v.kv_lora}_r{v.qk_rope}" if isinstance(v, AttentionShape) else str(v))
def test_kernels_emulated_cuda(shape, pos, tmp_path):
  assert MIN_CHUNK * SPLITS == 1024 and ODD.stage_rows * SPLITS < 3000 < 2 * ODD.stage_rows * SPLITS  # 3000: two stages, the second partial
  assert ODD.heads_per_warp == 2 and ODD5.heads_per_warp == 1
  c = make_case(shape, pos, max(4096, pos + 16), seed=pos + 1)   # 6000: past 4096, three stages a split
  out, cache = emulate_attention(shape, c, "CUDA", tmp_path)
  ref, row = numpy_attention(shape, c)
  assert rel_err(out, ref) < 1e-5
  check_cache(shape, c, cache, row)

@pytest.mark.parametrize("k", [2, 4, 8, 16, 32])
@pytest.mark.parametrize("language", ["CUDA", "METAL"])
def test_warp_sums_emulated(k, language, tmp_path):
  """The transposed reduction gives every lane all k warp sums, each in its own slot (integers: exact in any order)."""
  body = f"""int lane = LID_X;
  float sc_[{k}];
  for (int i = 0; i < {k}; i++) sc_[i] = x[lane*{k} + i];
  {mla_attention._warp_sums(k)}
  for (int i = 0; i < {k}; i++) out[lane*{k} + i] = sc_[i];"""
  kern = SourceKernel(f"warp_sums_{k}", (Param("out", dtypes.float32, written=True), Param("x", dtypes.float32)), body, (1, 1, 1), (32, 1, 1))
  x = np.random.default_rng(k).integers(-1000, 1000, (32, k)).astype(np.float32)
  out = np.full((32, k), np.nan, np.float32)
  emulate(kern, language, [out, x], tmp_path)
  np.testing.assert_array_equal(out, np.broadcast_to(x.sum(0), (32, k)))

def test_kernels_emulated_kv_offset(tmp_path):
  """The new token's kv row read at an offset into kv_raw (Youtu / GLM stack q_a and kv_a into one output)."""
  c = make_case(SMALL, 37, 4096, seed=3)
  out, cache = emulate_attention(SMALL, c, "CUDA", tmp_path, kv_offset=24)
  ref, row = numpy_attention(SMALL, c)
  assert rel_err(out, ref) < 1e-5
  check_cache(SMALL, c, cache, row)

# glm-2001: 16-token chunks over two stages of 14 and 2 rows, and a split with one cached row (a masked tile)
@pytest.mark.parametrize("shape,pos", [(GLM, 101), (GLM, 2001), (DSV2, 9), (TINY, 40)], ids=["glm", "glm-2001", "dsv2", "tiny"])
def test_kernels_emulated_model_shapes(shape, pos, tmp_path):
  c = make_case(shape, pos, 2048, seed=7)
  out, cache = emulate_attention(shape, c, "CUDA", tmp_path)
  ref, row = numpy_attention(shape, c)
  assert rel_err(out, ref) < 1e-5
  check_cache(shape, c, cache, row)

def test_kernels_emulated_metal(tmp_path):
  """The Metal source (Metal's names only, simd reductions) computes the same."""
  for s, pos in ((ODD, 30), (GLM, 20)):
    c = make_case(s, pos, 64, seed=3)
    out, cache = emulate_attention(s, c, "METAL", tmp_path / s.__repr__().replace(" ", ""))
    ref, row = numpy_attention(s, c)
    assert rel_err(out, ref) < 1e-5
    check_cache(s, c, cache, row)

# an fp16 cache: rows read 8 halves at a time and widened, the new row rounded before its own score; SMALL at 3000: two
# stages a split
@pytest.mark.parametrize("shape,pos,language", [(SMALL, 37, "CUDA"), (SMALL, 3000, "CUDA"), (TINY, 40, "CUDA"), (SMALL, 37, "METAL")],
                         ids=["small", "small-3000", "tiny", "small-metal"])
def test_kernels_emulated_half_cache(shape, pos, language, tmp_path):
  c = make_case(shape, pos, 4096, seed=pos + 5)
  c["cache"] = c["cache"].astype(np.float16)
  out, cache = emulate_attention(shape, c, language, tmp_path)
  ref, row = numpy_attention(shape, c)
  assert cache.dtype == np.float16 and rel_err(out, ref) < 1e-5
  check_cache(shape, c, cache, row, rtol=0)   # the row exactly as fp16 rounds it
  with pytest.raises(ValueError, match="multiples of 8"): attend_kernel(ODD, 0.1, 1e-6, half=True)

MMA_DEC = AttentionShape(n_head=20, kv_lora=96, qk_nope=16, qk_rope=32)   # two head tiles (the second 4 heads), 2 warps

# pos: one key, one stage part full, splits of several stages (TINY at 20000: 157 keys a split, the last stage 29; DSV2 at
# 9000: 71, the second stage 7), past 4096 (rows of other splits past the new one NaN: a stage reads none of them), the new
# row in the last split's second stage (TINY at 8959: 70 keys a split, the last one's key 69; it goes in from registers as
# that stage's copies start); sharp: queries x 4, so the running max moves between a split's stages
@pytest.mark.parametrize("shape,pos,sharp", [(TINY, 0, 1), (TINY, 13, 1), (TINY, 200, 1), (TINY, 20000, 4), (TINY, 8959, 1),
                                             (MMA_DEC, 37, 1), (MMA_DEC, 3001, 1), (DSV2, 600, 1), (DSV2, 9000, 4)],
                         ids=lambda v: f"h{v.n_head}_kv{v.kv_lora}_r{v.qk_rope}" if isinstance(v, AttentionShape) else str(v))
def test_kernels_emulated_mma_decode(shape, pos, sharp, tmp_path):
  """The tensor-core decode attend kernel (tf32 mma.sync emulated with the hardware's truncation) with the combine: fp32
  accurate against float64 over an fp16 cache (queries and weights as tf32 hi + lo), the new row written as fp16 rounds it."""
  assert decode_mma_warps(TINY) == 4 and decode_mma_warps(MMA_DEC) == 2 and decode_mma_warps(DSV2) == 8 and decode_mma_warps(ODD) == 0
  assert DECODE_MMA_KEYS == 64 and -(-(20001 // SPLITS + 1) // DECODE_MMA_KEYS) == 3
  check_fp16_decode(shape, pos, sharp, attend_mma_kernel, tmp_path)

def check_fp16_decode(shape, pos, sharp, build, tmp_path):
  """The decode kernel `build(shape, scale, eps, kv_offset)` with the combine over an fp16 cache, emulated: fp32 accurate
  against float64 (queries x sharp), the new row written as fp16 rounds it."""
  c = make_case(shape, pos, max(4096, pos + 16), seed=pos + 7)
  c["cache"] = c["cache"].astype(np.float16)
  c["q_lat"], c["q_raw"] = c["q_lat"] * sharp, c["q_raw"] * sharp
  k = build(shape, c["scale"], c["eps"], 8)
  out, cache = emulate_attention(shape, c, "CUDA", tmp_path, 8, k)
  ref, row = numpy_attention(shape, c)
  assert rel_err(out, ref) < 1e-5, rel_err(out, ref)
  check_cache(shape, c, cache, row, rtol=0)
  return k

# the transposed kernel: one n8 tile of heads (TINY: 4 warps), three (MMA_DEC: 2 warps, two of the n-tiles' softmax on warp
# 0; GLM: 8 warps), two (DSV2); the new row in the last split's second stage (TINY at 8959), sharper queries
@pytest.mark.parametrize("shape,pos,sharp", [(TINY, 0, 1), (TINY, 200, 1), (TINY, 8959, 4), (MMA_DEC, 37, 1), (MMA_DEC, 3001, 4),
                                             (DSV2, 600, 1), (GLM, 700, 1)],
                         ids=lambda v: f"h{v.n_head}_kv{v.kv_lora}_r{v.qk_rope}" if isinstance(v, AttentionShape) else str(v))
def test_kernels_emulated_mma_t_decode(shape, pos, sharp, tmp_path):
  """attend_mma_t_kernel (the keys as the mma's M, the heads as its N) with the combine: fp32 accurate against float64 over
  an fp16 cache, the new row written as fp16 rounds it, every head of a split from one workgroup."""
  k = check_fp16_decode(shape, pos, sharp, attend_mma_t_kernel, tmp_path)
  assert k.global_size[1] == 1 and k.local_size[1] == decode_mma_warps(shape)

def test_mma_decode_shared_memory():
  """The models' 16 heads: two stages of 64 rows of 576 halves and the softmax's fragments, past the 48 KB of a static array
  and within sm_90's 227 KB (sm_80's 163 KB: not), so the kernel declares them dynamic."""
  k = attend_mma_kernel(DSV2, 0.1, 1e-6)
  assert 48 * 1024 < 166912 < k.smem <= 232448 and "DYN_SHARED(uint4, smem_)" in k.body

DEPTH = AttentionShape(n_head=8, kv_lora=96, qk_nope=16, qk_rope=32)   # 4 warps on the CUDA cores, 2 on the tensor cores

# DEPTH: one tile, the tensor cores' two warps of a launch of four; MMA_DEC: two tiles of 2 warps, the CUDA cores' 10 warps
# in one workgroup a split (the second tile's leave)
@pytest.mark.parametrize("shape,pos", [(DEPTH, 40), (DEPTH, 62), (DEPTH, 63), (DEPTH, 300), (MMA_DEC, 50), (MMA_DEC, 300)],
                         ids=lambda v: f"h{v.n_head}" if isinstance(v, AttentionShape) else str(v))
def test_kernels_emulated_depth(shape, pos, tmp_path):
  """attend_depth_kernel (here from 64 keys on) is attend_kernel below and attend_mma_kernel from there, to the bit: one
  launch picks by the token's position (63: the 64th key); the launch's extra warps change nothing."""
  assert decode_mma_serves_shape(DSV2) and decode_mma_serves_shape(GLM) and decode_mma_serves_shape(MMA_DEC)
  assert not decode_mma_serves_shape(ODD) and not decode_mma_serves_shape(TINY)
  k = attend_depth_kernel(shape, 0.1, 1e-6, 8, keys=64)
  assert k.local_size[1] == shape.n_head // shape.heads_per_warp > decode_mma_warps(shape) and k.global_size[1] == -(-shape.n_head // 16)
  c = make_case(shape, pos, 4096, seed=pos)
  c["cache"] = c["cache"].astype(np.float16)
  got = emulate_attention(shape, c, "CUDA", tmp_path, 8, attend_depth_kernel(shape, c["scale"], c["eps"], 8, keys=64))
  one = attend_mma_kernel(shape, c["scale"], c["eps"], 8) if pos + 1 >= 64 else attend_kernel(shape, c["scale"], c["eps"], 8, half=True)
  want = emulate_attention(shape, c, "CUDA", tmp_path, 8, one)
  np.testing.assert_array_equal(got[0], want[0])
  np.testing.assert_array_equal(got[1], want[1])
  assert rel_err(got[0], numpy_attention(shape, c)[0]) < 1e-5

@pytest.mark.parametrize("kernel,los", [
  (attend_mma_kernel, ("MMA_TF32(sc[j], ql[k], k0, k1);", "MMA_TF32(o[2*q], pl, a0, a1);", "MMA_TF32(o[2*q + 1], pl, b0, b1);")),
  (attend_mma_t_kernel, ("MMA_F16(sc[m][nt], a, qb[i][nt].z, qb[i][nt].w);", "MMA_F16(o[m][nt], a, pb[nt].z, pb[nt].w);"))],
  ids=["mma", "mma_t"])
def test_mma_decode_needs_the_lo_parts(kernel, los, tmp_path):
  """Without the queries' and weights' lo parts (tf32 or fp16 alone) the kernel is ~1e-3 off: the checks above can fail."""
  c = make_case(TINY, 200, 4096, seed=3)
  c["cache"] = c["cache"].astype(np.float16)
  k = kernel(TINY, c["scale"], c["eps"])
  body = k.body
  for lo in los:
    assert lo in body
    body = body.replace(lo, "")
  crude = SourceKernel(k.name + "_crude", k.params, body, k.global_size, k.local_size, k.helpers, smem=k.smem)
  out, _ = emulate_attention(TINY, c, "CUDA", tmp_path, attend=crude)
  assert rel_err(out, numpy_attention(TINY, c)[0]) > 1e-4

def test_kernels_emulated_decode_sequence(tmp_path):
  """Token after token into one cache (as a replayed capture does): every step reads the rows the earlier steps wrote."""
  s, n = SMALL, 12
  c = make_case(s, 0, 32, seed=11)
  rng = np.random.default_rng(12)
  cache_np = c["cache"].copy()
  for p in range(n):
    c.update(pos=np.array([p, 0], np.int32), cache=cache_np, q_lat=rng.standard_normal(c["q_lat"].shape).astype(np.float32),
             kv_raw=rng.standard_normal(c["kv_raw"].shape).astype(np.float32))
    out, cache_np = emulate_attention(s, c, "CUDA", tmp_path)
    ref, row = numpy_attention(s, c)
    assert rel_err(out, ref) < 1e-5, p
    check_cache(s, c, cache_np, row)

@pytest.mark.parametrize("language", ["CUDA", "METAL"])
def test_kernels_emulated_batched_rows(language, tmp_path):
  """Three sequences' new tokens in one launch (grid y, a batched decode step): each at its own position in its own slot
  of one cache, its q_raw and kv_raw read in place from the row of a stacked [q; kv_a] output; each row's output and cache
  row as the one-sequence formula gives them, every other cache row untouched (NaN rows: nothing reads them). One row is
  past 1,024 keys: its combine loads its splits at once where the others' sum one split at a time."""
  s, mc, positions, slots = SMALL, 1536, (5, 0, 1300), (2, 0, 1)
  assert MIN_CHUNK * SPLITS < 1300
  B = len(positions)
  cases = [make_case(s, p, mc, seed=20 + b) for b, p in enumerate(positions)]
  for c in cases[1:]: c["kv_norm_w"] = cases[0]["kv_norm_w"]
  q_len = s.n_head * (s.qk_nope + s.qk_rope)
  off = q_len + 4                                            # a gap of NaNs between q and kv: the kernel must skip it
  stacked = np.full((B, off + s.kv_lora + s.qk_rope), np.nan, np.float32)
  for b, c in enumerate(cases): stacked[b, :q_len], stacked[b, off:] = c["q_raw"].reshape(-1), c["kv_raw"]
  cache = np.full((3 * mc, s.kv_lora + s.qk_rope), np.nan, np.float32)
  for b, c in enumerate(cases): cache[slots[b] * mc:(slots[b] + 1) * mc] = c["cache"]
  pos = np.array([[p, slot * mc] for p, slot in zip(positions, slots)], np.int32)
  L = stacked.shape[1]
  attend, combine = attend_kernel(s, cases[0]["scale"], cases[0]["eps"], off, rows=B, q_stride=L, kv_stride=L), combine_kernel(s, rows=B)
  part, ml = np.full((B, SPLITS, s.n_head, s.kv_lora), np.nan, np.float32), np.full((B, SPLITS, s.n_head, 2), np.nan, np.float32)
  q_lat = np.stack([c["q_lat"] for c in cases])
  emulate(attend, language, [part, ml, cache, q_lat, stacked, stacked, cases[0]["kv_norm_w"], cases[0]["rope_cos"], cases[0]["rope_sin"], pos],
          tmp_path)
  out = np.full((B, s.n_head, s.kv_lora), np.nan, np.float32)
  emulate(combine, language, [out, part, ml, pos], tmp_path)
  for b, c in enumerate(cases):
    ref, row = numpy_attention(s, c)
    assert rel_err(out[b], ref) < 1e-5, b
    check_cache(s, c, cache[slots[b] * mc:(slots[b] + 1) * mc], row)

# ---------------------------------------------------------------- prefill: a chunk of tokens over the cache

def prefill_case(s: AttentionShape, P: int, T: int, max_context: int, seed: int = 0) -> dict:
  """A chunk of T tokens at positions P..P+T-1 whose rows are in the cache (rows past them NaN: nobody may read them)."""
  rng = np.random.default_rng(seed)
  cache = np.full((max_context, s.kv_lora + s.qk_rope), np.nan, np.float32)
  n = min(P + T, max_context)
  cache[:n] = rng.standard_normal((n, s.kv_lora + s.qk_rope))
  return dict(q=rng.standard_normal((T, s.n_head, s.kv_lora + s.qk_rope)).astype(np.float32), cache=cache,
              pos=np.array([P, 0], np.int32), scale=1 / math.sqrt(s.qk_nope + s.qk_rope))

def numpy_prefill(s: AttentionShape, c: dict) -> np.ndarray:
  """(T, H, kv_lora) in float64: token t at position P + t attends to cache rows 0..P + t."""
  P, q, keys = int(c["pos"][0]), c["q"].astype(np.float64), c["cache"].astype(np.float64)
  out = np.zeros((q.shape[0], s.n_head, s.kv_lora))
  for t in range(q.shape[0]):
    k = keys[:P + t + 1]
    sc = q[t] @ k.T * c["scale"]
    pr = np.exp(sc - sc.max(-1, keepdims=True))
    out[t] = (pr / pr.sum(-1, keepdims=True)) @ k[:, :s.kv_lora]
  return out

def emulate_prefill(s: AttentionShape, c: dict, language: str, work: Path, tokens: int | None = None) -> np.ndarray:
  """Both prefill kernels on the emulator for `tokens` (default: the case's T; more: padded tokens past the chunk)."""
  T = c["q"].shape[0]
  tokens = tokens or T
  q = np.concatenate([c["q"], np.zeros((tokens - T, *c["q"].shape[1:]), np.float32)])
  mc = c["cache"].shape[0]
  S = prefill_splits(tokens)
  q_lat, q_pe = np.ascontiguousarray(q[..., :s.kv_lora]), np.ascontiguousarray(q[..., s.kv_lora:])
  out = np.full((tokens, s.n_head, s.kv_lora), np.nan, np.float32)
  attend = prefill_attend_kernel(s, c["scale"], tokens, mc, half=c["cache"].dtype == np.float16)
  if S == 1:   # the attend kernel writes the output itself
    emulate(attend, language, [out, q_lat, q_pe, c["cache"], c["pos"]], work)
    return out
  part = np.full((tokens, S, s.n_head, s.kv_lora), np.nan, np.float32)
  ml = np.full((tokens, S, s.n_head, 2), np.nan, np.float32)
  emulate(attend, language, [part, ml, q_lat, q_pe, c["cache"], c["pos"]], work)
  emulate(combine_kernel(s, tokens, mc), language, [out, part, ml, c["pos"]], work)
  return out

# P, T: the first chunk (one split per token), a chunk with several splits of PREFILL_MIN_CHUNK keys, chunks of more than one
# shared-memory stage per split (ODD: 14 rows a stage)
@pytest.mark.parametrize("shape,P,T", [(SMALL, 0, 5), (SMALL, 150, 6), (ODD, 70, 3), (ODD, 600, 2), (DSV2, 9, 3)],
                         ids=lambda v: f"h{v.n_head}_kv{v.kv_lora}_r{v.qk_rope}" if isinstance(v, AttentionShape) else str(v))
def test_prefill_kernels_emulated_cuda(shape, P, T, tmp_path):
  assert 150 + 6 > 2 * PREFILL_MIN_CHUNK and 600 > PREFILL_SPLITS * PREFILL_MIN_CHUNK
  c = prefill_case(shape, P, T, 1024, seed=P + T)
  out = emulate_prefill(shape, c, "CUDA", tmp_path)
  assert rel_err(out, numpy_prefill(shape, c)) < 1e-5

@pytest.mark.parametrize("P,T", [(0, 5), (150, 6), (600, 2)])
def test_prefill_one_split_emulated(P, T, tmp_path, monkeypatch):
  """A chunk long enough for one split per token (made short here: PREFILL_PAIRS lowered): the attend kernel alone
  writes the normalized output, no combine, the same numbers."""
  monkeypatch.setattr(mla_attention, "PREFILL_PAIRS", T)
  assert prefill_splits(T) == 1 and prefill_splits(T // 2) > 1
  assert prefill_kernel_params(ODD, T) == ["out", "q", "qpe", "cache", "pos"]
  c = prefill_case(ODD, P, T, 1024, seed=P + T + 1)
  out = emulate_prefill(ODD, c, "CUDA", tmp_path)
  assert rel_err(out, numpy_prefill(ODD, c)) < 1e-5

def prefill_kernel_params(s: AttentionShape, tokens: int) -> list[str]:
  return [p.name for p in prefill_attend_kernel(s, 0.1, tokens, 1024).params]

def test_prefill_splits_policy():
  """Short chunks split each token's keys (up to PREFILL_SPLITS, for ~PREFILL_PAIRS workgroups); from PREFILL_PAIRS tokens
  on, one split and no partials."""
  assert prefill_splits(1) == prefill_splits(64) == PREFILL_SPLITS
  assert prefill_splits(128) == 4 and prefill_splits(256) == 2 and prefill_splits(512) == prefill_splits(4096) == 1
  assert prefill_kernel_params(SMALL, 128) == ["part", "ml", "q", "qpe", "cache", "pos"]
  assert prefill_kernel_params(SMALL, 512) == ["out", "q", "qpe", "cache", "pos"]

def test_prefill_kernels_emulated_padded_and_metal(tmp_path):
  """A chunk of 3 tokens run as its bound of 5 (the padded tokens read rows past the chunk, NaN here, and the last one is
  past the context: clamped to its last row); the real tokens' outputs are exact. The Metal source computes the same."""
  c = prefill_case(ODD, 60, 3, 64, seed=4)
  out = emulate_prefill(ODD, c, "CUDA", tmp_path / "cuda", tokens=5)
  assert rel_err(out[:3], numpy_prefill(ODD, c)) < 1e-5
  c = prefill_case(ODD, 30, 4, 64, seed=5)
  out = emulate_prefill(ODD, c, "METAL", tmp_path / "metal")
  assert rel_err(out, numpy_prefill(ODD, c)) < 1e-5

# ---------------------------------------------------------------- a prefill chunk's latent rows and roped queries

@pytest.mark.parametrize("shape,half,language", [(SMALL, False, "CUDA"), (ODD, False, "CUDA"), (TINY, True, "CUDA"), (SMALL, True, "METAL"),
                                                 (GLM, False, "METAL")], ids=["small", "odd", "tiny-f16", "small-f16-metal", "glm-metal"])
def test_chunk_rows_emulated(shape, half, language, tmp_path):
  """chunk_rows_kernel for 5 tokens at positions 37..41 of the sequence in slot 1, run as a bound of 8 and behind 3 rows of
  another part (a mixed step's decode rows), q and kv read in place from the rows of a stacked output with NaNs between
  them: each token's cache row and roped q_pe as the one-token formula (numpy_attention's) makes them; every other cache
  row untouched, q_pe's rows past the chunk zero."""
  s, P, T, tokens, first, mc = shape, 37, 5, 8, 3, 64
  cases = [make_case(s, P + t, mc, seed=30 + t) for t in range(T)]
  q_len, off = s.n_head * (s.qk_nope + s.qk_rope), s.n_head * (s.qk_nope + s.qk_rope) + 4
  stacked = np.full((first + tokens, off + s.kv_lora + s.qk_rope), np.nan, np.float32)
  for t, c in enumerate(cases): stacked[first + t, :q_len], stacked[first + t, off:] = c["q_raw"].reshape(-1), c["kv_raw"]
  stacked[first + T:] = 7.0   # the bound's padding rows: finite, so a row made from one would show
  dt = np.float16 if half else np.float32
  cache = np.full((2 * mc, s.kv_lora + s.qk_rope), np.nan, dt)
  q_pe = np.full((tokens, s.n_head, s.qk_rope), np.nan, np.float32)
  c0 = cases[0]
  k = chunk_rows_kernel(s, c0["eps"], tokens, mc, off, stacked.shape[1], stacked.shape[1], first, half)
  emulate(k, language, [q_pe, cache, stacked, stacked, c0["kv_norm_w"], c0["rope_cos"], c0["rope_sin"], np.array([P, mc, T], np.int32)], tmp_path)
  for t, c in enumerate(cases):
    c = dict(c, kv_norm_w=c0["kv_norm_w"], cache=c["cache"].astype(dt))
    _, row = numpy_attention(s, c)
    tol = 1e-3 if half else 2e-6
    np.testing.assert_allclose(cache[mc + P + t].astype(np.float64), row, rtol=tol, atol=tol * np.abs(row).max())
    x = c["q_raw"][:, s.qk_nope:].astype(np.float64)
    cos, sin = c["rope_cos"][P + t].astype(np.float64), c["rope_sin"][P + t].astype(np.float64)
    want = np.concatenate([x[:, 0::2] * cos - x[:, 1::2] * sin, x[:, 1::2] * cos + x[:, 0::2] * sin], axis=-1)
    np.testing.assert_allclose(q_pe[t], want, rtol=1e-5, atol=1e-5)
  written = np.zeros(2 * mc, bool)
  written[mc + P:mc + P + T] = True
  assert np.isnan(cache[~written].astype(np.float32)).all() and (q_pe[T:] == 0).all()   # the padding's queries zero

def test_chunk_rows_bad_input_is_a_clear_error():
  """mla_chunk_rows names what is wrong in one line: the table, kv's offset and alignment, rows too short, the cache; on a
  device without hand-written kernels it says so."""
  from apps.kernels.mla_attention import mla_chunk_rows
  s, T, mc = SMALL, 3, 16
  c = make_case(s, 0, mc)
  L = s.n_head * (s.qk_nope + s.qk_rope) + s.kv_lora + s.qk_rope
  args = lambda **k: dict(dict(q_raw=Tensor.zeros(T, L).contiguous(), kv_raw=Tensor.zeros(T, L).contiguous(), kv_norm_w=Tensor(c["kv_norm_w"]),
                               cache=Tensor(c["cache"]), rope_cos=Tensor(c["rope_cos"]), rope_sin=Tensor(c["rope_sin"]),
                               pos=Tensor([0, 0, T], dtype=dtypes.int32)), **k)
  kw = dict(n_head=s.n_head, kv_lora=s.kv_lora, qk_nope=s.qk_nope, qk_rope=s.qk_rope, eps=1e-6, kv_offset=s.n_head * (s.qk_nope + s.qk_rope))
  for bad, match in ((dict(pos=Tensor([0, 0], dtype=dtypes.int32)), r"pos is a dtypes.int \(2,\), expected int32 \(3,\)"),
                     (dict(kv_raw=Tensor.zeros(T, L - 4).contiguous()), r"kv_raw is a dtypes.float \(3, \d+\), expected float32 rows of at least"),
                     (dict(kv_raw=Tensor.zeros(T, L + 2).contiguous()), r"kv_raw's rows of \d+ elements are not 16-byte aligned"),
                     (dict(cache=Tensor.zeros(mc + 1, s.kv_lora + s.qk_rope).contiguous()), r"cache has shape \(17, 80\)")):
    with pytest.raises(ValueError, match=match): mla_chunk_rows(**args(**bad), **kw)
  with pytest.raises(ValueError, match="kv_offset 6 is not"): mla_chunk_rows(**args(), **{**kw, "kv_offset": 6})
  if language_of(Device.DEFAULT) is None:
    with pytest.raises(ValueError, match="compiles no hand-written kernels"): mla_chunk_rows(**args(), **kw)

def test_prefill_kernels_emulated_after_other_rows(tmp_path):
  """The prefill attend kernels (CUDA cores and tensor cores) with first = 3: the chunk's queries after 3 rows of another
  part's (NaN here: never read), the output as with the chunk's queries alone."""
  c = prefill_case(SMALL, 30, 4, 64, seed=11)
  want = numpy_prefill(SMALL, c)
  q = np.concatenate([np.full((3, SMALL.n_head, SMALL.kv_lora), np.nan, np.float32), c["q"][..., :SMALL.kv_lora]])
  q_pe = np.ascontiguousarray(c["q"][..., SMALL.kv_lora:])
  for k in (prefill_attend_kernel(SMALL, c["scale"], 4, 64, first=3), prefill_mma_kernel(SMALL, c["scale"], 4, 64, first=3)):
    assert k.name.endswith("_f3"), k.name
    out = np.full((4, SMALL.n_head, SMALL.kv_lora), np.nan, np.float32)
    if k.params[0].name == "part":
      S = prefill_splits(4)
      part, ml = np.full((4, S, SMALL.n_head, SMALL.kv_lora), np.nan, np.float32), np.full((4, S, SMALL.n_head, 2), np.nan, np.float32)
      emulate(k, "METAL", [part, ml, q, q_pe, c["cache"], c["pos"]], tmp_path / "attend")
      emulate(combine_kernel(SMALL, 4, 64), "METAL", [out, part, ml, c["pos"]], tmp_path / "combine")
    else: emulate(k, "CUDA", [out, q, q_pe, c["cache"], c["pos"]], tmp_path / "mma")
    assert rel_err(out, want) < 1e-5, k.name

# ---------------------------------------------------------------- prefill from tensor ops on a device with locals

LATENT_ON_PYTHON = """
import numpy as np
import apps  # noqa: F401  (the patched tinygrad)
from tinygrad import Tensor, TinyJit, UOp
from apps.mla import latent_attention
from test_kernels_attention import AttentionShape, prefill_case, numpy_prefill
MC = 48
# 2 heads of 16 columns: the softmax's reductions grouped over the padded keys; 32 heads of 128: more outputs than a grouped
# reduction takes, the value product's lanes along v's columns
for s, L, cases in ((AttentionShape(n_head=2, kv_lora=16, qk_nope=8, qk_rope=8), 16, ((0, 5), (16, 7), (30, 1), (3, 13))),
                    (AttentionShape(n_head=32, kv_lora=128, qk_nope=8, qk_rope=8), 8, ((0, 5), (13, 3)))):
  v_pos, v_len = UOp.variable("start_pos", 0, MC - L), UOp.variable(f"n_tokens_{L}", 1, L)
  out = Tensor.empty(L, s.n_head, s.kv_lora).realize()
  @TinyJit
  def chunk(q, cache, p, n, scale):
    return Tensor(out.uop.after(out[:n].uop.store(latent_attention(q[:n], cache, p, s.kv_lora, scale).uop))).realize()
  for P, T in cases:
    c = prefill_case(s, P, L, MC, seed=P)  # the bound's rows: those past T are what a chunk's buffer holds there
    got = chunk(Tensor(c["q"]).realize(), Tensor(c["cache"]).realize(), v_pos.bind(P), v_len.bind(T), float(c["scale"])).numpy()[:T]
    want = numpy_prefill(s, dict(c, q=c["q"][:T]))
    assert np.abs(got - want).max() < 1e-4, (s.n_head, P, T, np.abs(got - want).max())
print("ok")
"""

def test_latent_attention_partial_chunks_with_locals():
  # the tensor-op attention (the generated path's, the CPU's) of chunks shorter than their bound under TinyJit, on PYTHON:
  # its kernels take the heuristics' locals, groups and padded symbolic reductions, which the CPU's do not
  assert run_script(LATENT_ON_PYTHON, "PYTHON").strip().endswith("ok")

def test_expanded_attention_is_the_absorbed_one():
  """A long chunk's attention over keys and values expanded per head from the latent rows (apps.mla.expanded_attention) is
  the absorbed form's (q_nope through k_b, attention over the latent rows, the output through v_b), in float64, for chunks
  at depth and shorter than their bound under TinyJit; the model's chunks of 512 take it, those of 128 do not."""
  from apps.mla import Config, expands_latents, expanded_attention
  s, MC, L, dv = AttentionShape(n_head=3, kv_lora=32, qk_nope=16, qk_rope=8), 64, 16, 12
  rng = np.random.default_rng(7)
  k_b, v_b = rng.standard_normal((s.n_head, s.kv_lora, s.qk_nope)), rng.standard_normal((s.n_head, dv, s.kv_lora))
  v_pos, v_len = UOp.variable("start_pos", 0, MC - L), UOp.variable(f"n_tokens_{L}", 1, L)
  out = Tensor.empty(L, s.n_head, dv).realize()
  kb, vb = Tensor(k_b.astype(np.float32)).realize(), Tensor(v_b.astype(np.float32)).realize()
  @TinyJit
  def chunk(q_nope, q_pe, cache, p, n, scale):
    y = expanded_attention(q_nope[:n], q_pe[:n], cache, p, kb, vb, s.kv_lora, scale)
    return Tensor(out.uop.after(out[:n].uop.store(y.uop))).realize()
  for P, T in ((0, 16), (20, 5), (40, 16), (47, 1)):
    c = prefill_case(s, P, L, MC, seed=P)
    q_nope, q_pe = rng.standard_normal((L, s.n_head, s.qk_nope)), c["q"][..., s.kv_lora:]
    got = chunk(Tensor(q_nope.astype(np.float32)).realize(), Tensor(q_pe).realize(), Tensor(c["cache"]).realize(), v_pos.bind(P),
                v_len.bind(T), float(c["scale"])).numpy()[:T]
    q_lat = np.einsum("thd,hcd->thc", q_nope[:T], k_b)                          # the absorbed query
    lat = numpy_prefill(s, dict(c, q=np.concatenate([q_lat, q_pe[:T]], -1)))    # (T, H, kv_lora)
    want = np.einsum("thc,hvc->thv", lat, v_b)
    assert rel_err(got, want) < 1e-5, (P, T, rel_err(got, want))
  dsv2 = Config(n_layer=1, dim=1, n_head=16, vocab_size=1, norm_eps=1e-6, context_length=1, q_lora_rank=0, kv_lora_rank=512, qk_nope=128,
                qk_rope=64, v_head=128, ffn_dim=1, n_dense_lead=1)
  glm = Config(**{**vars(dsv2), "n_head": 20, "qk_nope": 192, "v_head": 256})
  assert [expands_latents(c, n) for c in (dsv2, glm) for n in (512, 128)] == [True, False, True, False]

# ---------------------------------------------------------------- prefill on the tensor cores (CUDA sm_80+)

MMA_SMALL = AttentionShape(n_head=5, kv_lora=64, qk_nope=0, qk_rope=32)   # 4 warps; a 16-row tile spans 4 tokens

def emulate_prefill_mma(s: AttentionShape, c: dict, work: Path, tokens: int | None = None, edit=lambda body: body,
                        group: int | None = None) -> np.ndarray:
  """The tensor-core prefill kernel on the emulator (its body through `edit` first; `group` tiles a workgroup)."""
  T = c["q"].shape[0]
  tokens = tokens or T
  q = np.concatenate([c["q"], np.zeros((tokens - T, *c["q"].shape[1:]), np.float32)])
  out = np.full((tokens, s.n_head, s.kv_lora), np.nan, np.float32)
  k = prefill_mma_kernel(s, c["scale"], tokens, c["cache"].shape[0], half=c["cache"].dtype == np.float16, group=group)
  k = SourceKernel(k.name, k.params, edit(k.body), k.global_size, k.local_size, trigger=k.trigger)
  emulate(k, "CUDA", [out, np.ascontiguousarray(q[..., :s.kv_lora]), np.ascontiguousarray(q[..., s.kv_lora:]), c["cache"], c["pos"]], work)
  return out

def test_mma_warps():
  assert mma_warps(DSV2) == mma_warps(GLM) == 8 and mma_warps(TINY) == mma_warps(MMA_SMALL) == 4
  assert mma_warps(SMALL) == 2 and mma_warps(ODD) == 0   # ODD: rows of 84 floats, not whole steps of 8
  assert mma_warps(AttentionShape(4, 1024, 0, 512)) == 0   # two stages of 8 rows of 1,540 floats: past 48 KB

# P, T: rows of several tokens per tile and a last tile cut short, many stages of 8 keys (scores that grow: the rescale),
# the models' shapes (8 warps; GLM's 20 heads: tiles across tokens)
@pytest.mark.parametrize("shape,P,T", [(MMA_SMALL, 0, 5), (MMA_SMALL, 150, 6), (SMALL, 30, 4), (TINY, 40, 3), (DSV2, 9, 3), (GLM, 17, 2)],
                         ids=lambda v: f"h{v.n_head}_kv{v.kv_lora}_r{v.qk_rope}" if isinstance(v, AttentionShape) else str(v))
def test_prefill_mma_emulated(shape, P, T, tmp_path):
  """The tensor-core kernel (tf32 mma.sync emulated with the hardware's truncation of the inputs: one product per pair
  would miss by ~1e-3) to fp32 accuracy against float64."""
  c = prefill_case(shape, P, T, 1024, seed=P + T + 2)
  if P >= 150: c["q"] *= 4   # sharper softmax: the running max moves between stages
  out = emulate_prefill_mma(shape, c, tmp_path)
  assert rel_err(out, numpy_prefill(shape, c)) < 1e-5

@pytest.mark.parametrize("shape,P,T", [(MMA_SMALL, 150, 6), (DSV2, 9, 3), (GLM, 17, 2)], ids=["small-150", "dsv2", "glm"])
def test_prefill_mma_emulated_half_cache(shape, P, T, tmp_path):
  """An fp16 cache: two products a pair (its values are exact in tf32), fp32-accurate against float64 of the same halves;
  and the CUDA-core kernel, which widens them."""
  c = prefill_case(shape, P, T, 1024, seed=P + T + 3)
  c["cache"] = c["cache"].astype(np.float16)
  if P >= 150: c["q"] *= 4
  want = numpy_prefill(shape, c)
  assert rel_err(emulate_prefill_mma(shape, c, tmp_path / "mma"), want) < 1e-5
  assert rel_err(emulate_prefill(shape, c, "CUDA", tmp_path / "cores"), want) < 1e-5

def test_prefill_mma_128_registers_from_two_tiles_per_sm():
  """A chunk of two tiles per SM or more is compiled for 128 registers: two workgroups per SM of a tile each, or one of two
  tiles; one wave of tiles for one workgroup per SM."""
  big, grouped = prefill_mma_kernel(DSV2, 0.1, 512, 1024, group=1), prefill_mma_kernel(DSV2, 0.1, 512, 1024)
  one_wave = prefill_mma_kernel(DSV2, 0.1, 128, 1024)
  assert big.global_size[0] == 512 and big.min_blocks == 2 and "__launch_bounds__(256, 2)" in render(big, "CUDA")
  assert grouped.global_size[0] == 256 and grouped.min_blocks == 1 and "__launch_bounds__(512)" in render(grouped, "CUDA")
  assert one_wave.global_size[0] == 128 and one_wave.min_blocks == 1 and "__launch_bounds__(256)" in render(one_wave, "CUDA")

# three tiles in groups of two: the last group (run first) holds the last tile and one of padded rows only, the first group
# two tiles whose rows end at different positions (the earlier tile's rows masked past theirs); fp16 caches too
@pytest.mark.parametrize("shape,P,T,half", [(MMA_SMALL, 40, 7, False), (MMA_SMALL, 150, 7, True), (DSV2, 9, 3, False), (GLM, 17, 2, True)],
                         ids=lambda v: f"h{v.n_head}_kv{v.kv_lora}" if isinstance(v, AttentionShape) else str(v))
def test_prefill_mma_emulated_groups(shape, P, T, half, tmp_path):
  """Workgroups of two tiles on the same staged keys (a long chunk's) give the one-tile workgroups' result."""
  c = prefill_case(shape, P, T, 1024, seed=P + T + 5)
  if half: c["cache"] = c["cache"].astype(np.float16)
  k = prefill_mma_kernel(shape, c["scale"], T, 1024, group=2)
  assert k.global_size[0] == 2 and k.local_size[1] == 2 * mma_warps(shape)
  out = emulate_prefill_mma(shape, c, tmp_path, group=2)
  assert rel_err(out, numpy_prefill(shape, c)) < 1e-5
  assert np.array_equal(out, emulate_prefill_mma(shape, c, tmp_path / "one", group=1))

def test_prefill_mma_groups_from_two_per_sm():
  """A chunk of two tiles per SM or more runs in groups of MMA_GROUP tiles where a tile is one token's heads; a shorter one,
  or tiles across tokens (GLM-4.7-Flash's 20 heads), a tile a workgroup."""
  assert [mma_group(DSV2, T) for T in (512, 2048, 128, 8)] == [MMA_GROUP, MMA_GROUP, 1, 1]
  assert [mma_group(GLM, T) for T in (512, 2048)] == [1, 1]

def test_prefill_mma_emulated_padded(tmp_path):
  """A chunk of 3 tokens run as its bound of 5: the padded tokens' rows share a tile with the real ones and reach cache
  rows past the chunk (stale rows: finite, as in the model's zeroed cache; a padded token's last one is past the
  context, clamped); the real rows are exact."""
  c = prefill_case(MMA_SMALL, 60, 3, 64, seed=6)
  c["cache"][63:] = 1e30   # the row past the chunk: stale and large (any weight on it would show)
  out = emulate_prefill_mma(MMA_SMALL, c, tmp_path, tokens=5)
  assert rel_err(out[:3], numpy_prefill(MMA_SMALL, c)) < 1e-5

def test_prefill_mma_needs_the_split_products(tmp_path):
  """Queries and keys rounded to tf32 once (their lo parts dropped) miss the bound: the test sees the precision."""
  crude = lambda body: body.replace("ql[j][i] = x - qh[j][i]", "ql[j][i] = 0.0f").replace("k0l = k0 - k0h", "k0l = 0.0f") \
                           .replace("k1l = k1 - k1h", "k1l = 0.0f")
  c = prefill_case(MMA_SMALL, 20, 6, 1024, seed=9)
  assert rel_err(emulate_prefill_mma(MMA_SMALL, c, tmp_path, edit=crude), numpy_prefill(MMA_SMALL, c)) > 1e-4

# ---------------------------------------------------------------- Metal source; CUDA render + compile

def test_metal_render():
  for s in (SMALL, ODD, TINY, DSV2, GLM):
    for k in (attend_kernel(s, 0.1, 1e-6), combine_kernel(s)):
      src = render(k, "METAL")
      assert f"kernel void {k.function_name}(" in src and "simd_sum" in src
      assert not any(w in src for w in ("__shfl", "__syncthreads", "make_float4", "exp2f", "__shared__")), k.name

CUDA_SCRIPT = r"""
import apps
from tinygrad import Tensor, TinyJit, dtypes, GlobalCounters
from apps.kernels.mla_attention import mla_decode_attention
for H, nope, KV, R, dt in ((16, 128, 512, 64, dtypes.float), (20, 192, 512, 64, dtypes.float), (4, 96, 256, 32, dtypes.float),
                           (20, 192, 512, 64, dtypes.half), (16, 128, 512, 64, dtypes.half)):
  MC = 4096
  cache = Tensor.zeros(MC, KV + R, dtype=dt).contiguous().realize()
  cos, sin, w = Tensor.empty(MC, R // 2).realize(), Tensor.empty(MC, R // 2).realize(), Tensor.empty(KV).realize()
  @TinyJit
  def step(q_lat, q_raw, kv_raw, pos):
    return mla_decode_attention(q_lat, q_raw, kv_raw, w, cache, cos, sin, pos, n_head=H, kv_lora=KV, qk_nope=nope, qk_rope=R,
                                scale=0.07, eps=1e-6).realize()
  for i in range(3):
    args = [Tensor.empty(H, KV).realize(), Tensor.empty(H, nope + R).realize(), Tensor.empty(KV + R).realize(),
            Tensor([i, 0], dtype=dtypes.int32).realize()]
    GlobalCounters.reset()
    out = step(*args)
    assert out.shape == (1, H, KV)
    if i == 0: print("KERNELS", GlobalCounters.kernel_count)
# prefill: a chunk of symbolic length (bound 64) in a TinyJit, as the model's prefill runs it
from tinygrad import UOp
from apps.kernels.mla_attention import mla_prefill_attention
H, KV, R, MC = 16, 512, 64, 4096
cache = Tensor.zeros(MC, KV + R).contiguous().realize()
n_tok = UOp.variable("n_tokens", 1, 64)
@TinyJit
def fill(q, pos):
  return (mla_prefill_attention(q[:, :, :KV], q[:, :, KV:], cache, pos, kv_lora=KV, qk_rope=R, scale=0.07) * 1).realize()
for i, T in enumerate((64, 40, 17)):
  GlobalCounters.reset()
  out = fill(Tensor.empty(64, H, KV + R).realize()[:n_tok.bind(T)], Tensor([3 * i, 0], dtype=dtypes.int32).realize())
  assert out.shape[1:] == (H, KV)
print("PREFILL", GlobalCounters.kernel_count)
# a 512-token chunk: one split, the attend kernel alone
args = Tensor.empty(512, H, KV).realize(), Tensor.empty(512, H, R).realize(), cache, Tensor([0, 0], dtype=dtypes.int32).realize()
GlobalCounters.reset()
out = mla_prefill_attention(*args, kv_lora=KV, qk_rope=R, scale=0.07).realize()
assert out.shape == (512, H, KV)
print("PREFILL512", GlobalCounters.kernel_count)
# the same chunk over an fp16 cache: its own tensor-core kernel (two products a pair)
cache16 = Tensor.zeros(MC, KV + R, dtype=dtypes.half).contiguous().realize()
GlobalCounters.reset()
out = mla_prefill_attention(*args[:2], cache16, args[3], kv_lora=KV, qk_rope=R, scale=0.07).realize()
print("PREFILL512_F16", GlobalCounters.kernel_count)
"""

@needs_nvcc
def test_cuda_compile_and_jit():
  """Rendered, compiled with nvcc for sm_90, and run inside a TinyJit (capture + replay) for the three models' shapes; each
  call is exactly the two kernels (the cache is written in place: no copy of it)."""
  out = run_nvcc_script(CUDA_SCRIPT)
  assert [int(l.split()[1]) for l in out.splitlines() if l.startswith("KERNELS")] == [2, 2, 2, 2, 2]
  assert "PREFILL" in out, out
  assert [int(l.split()[1]) for l in out.splitlines() if l.startswith("PREFILL512")] == [1, 1], out   # one split: no combine

CHOICE_SCRIPT = r"""
import apps
from tinygrad import Device
import apps.kernels.mla_attention as M
M.program = lambda k, device, trigger=True: k.name   # the kernels chosen, by name
for H, nope, half in ((20, 192, True), (16, 128, True), (20, 192, False)):
  print("ATTEND", H, half, M.kernels(M.AttentionShape(H, 512, nope, 64), 0.07, 1e-6, Device.DEFAULT, half=half)[0])
"""

@needs_nvcc
def test_decode_kernel_choice_on_sm90():
  """sm_90, one sequence: 20 heads over an fp16 cache take the transposed tensor-core kernel at every depth, 16 heads the
  depth kernel (CUDA cores, then tensor cores from 2,048 keys), an fp32 cache the CUDA cores."""
  out = run_nvcc_script(CHOICE_SCRIPT)
  assert out.splitlines() == ["ATTEND 20 True mla_attend_mmat_h20_kv512_r64_f16", "ATTEND 16 True mla_attend_h16_kv512_r64_f16_mma2048",
                              "ATTEND 20 False mla_attend_h20_kv512_r64"], out

def test_bad_input_is_a_clear_error():
  with pytest.raises(ValueError, match="multiples of 4"): attend_kernel(AttentionShape(4, 66, 8, 16), 0.1, 1e-6)
  c = make_case(SMALL, 3, 16)
  t = {k: Tensor(c[k]) for k in INPUTS}
  with pytest.raises(ValueError, match=r"q_raw has shape \(4, 48\), expected \(1, 96\)"):
    mla_decode_attention(*[t[k] for k in INPUTS], **{**KW(SMALL, c), "qk_nope": 8})
  with pytest.raises(ValueError, match=r"q_raw has shape \(90,\), expected \(1, 96\)"):  # a flat q_raw must hold every head
    mla_decode_attention(t["q_lat"], Tensor(np.zeros(90, np.float32)), *[t[k] for k in INPUTS[2:]], **{**KW(SMALL, c), "qk_nope": 8})
  with pytest.raises(ValueError, match="pos is dtypes.float, expected dtypes.int"):
    mla_decode_attention(*[t[k] for k in INPUTS[:-1]], Tensor([3.0, 0.0]), **KW(SMALL, c))
  if language_of(Device.DEFAULT) is None:
    with pytest.raises(ValueError, match="compiles no hand-written kernels"): mla_decode_attention(*[t[k] for k in INPUTS], **KW(SMALL, c))
    longer = Tensor(np.zeros(4 * 48 + 80, np.float32))  # the heads first, then more (a stacked [q; kv_a] output): accepted
    with pytest.raises(ValueError, match="compiles no hand-written kernels"):
      mla_decode_attention(t["q_lat"], longer, *[t[k] for k in INPUTS[2:]], **KW(SMALL, c))

# ---------------------------------------------------------------- on a GPU (the H100): kernel vs reference

GPU = Device.DEFAULT.split(":")[0] in ("CUDA", "NV", "METAL")
START_POS = lambda max_context: UOp.variable("start_pos", 0, max_context - 1)  # the reference compiled once for every position

@pytest.mark.skipif(not GPU, reason="needs a CUDA or Metal device")
@pytest.mark.parametrize("shape", [DSV2, GLM, TINY], ids=["h16", "h20", "tiny"])
def test_gpu_kernels_match_reference(shape):
  for pos in (0, 1, 100, 1000, 4095):
    c = make_case(shape, pos, 4096, seed=pos)
    c["cache"][pos + 1:] = 0.0  # NaN rows are for the emulator; here a wrong read would show as a mismatch instead
    tk, tr = {k: Tensor(c[k]) for k in INPUTS}, {k: Tensor(c[k]) for k in INPUTS}
    out = mla_decode_attention(*[tk[k] for k in INPUTS], **KW(shape, c)).numpy()
    ref = decode_attention_reference(*[tr[k] for k in INPUTS[:-1]], START_POS(4096).bind(pos), **KW(shape, c)).numpy()
    ref64, row = numpy_attention(shape, c)
    assert rel_err(out, ref.astype(np.float64)) < 1e-5, pos
    assert rel_err(out, ref64) < 1e-5, pos
    cache, cache_ref = tk["cache"].numpy(), tr["cache"].numpy()
    np.testing.assert_array_equal(np.delete(cache, pos, 0), np.delete(c["cache"], pos, 0))
    np.testing.assert_allclose(cache[pos], cache_ref[pos], rtol=2e-6, atol=2e-6 * np.abs(row).max())

@pytest.mark.skipif(not GPU, reason="needs a CUDA or Metal device")
def test_gpu_jit_decode_loop():
  """A TinyJit'd step replayed token after token (graph replays) vs the reference on its own cache."""
  s, n, mc = GLM, 40, 256
  c = make_case(s, 0, mc, seed=5)
  cache_k, cache_r = Tensor(np.zeros_like(c["cache"])).realize(), Tensor(np.zeros_like(c["cache"])).realize()
  fixed = {k: Tensor(c[k]).realize() for k in ("kv_norm_w", "rope_cos", "rope_sin")}
  @TinyJit
  def step(q_lat, q_raw, kv_raw, pos):
    return mla_decode_attention(q_lat, q_raw, kv_raw, fixed["kv_norm_w"], cache_k, fixed["rope_cos"], fixed["rope_sin"], pos,
                                **KW(s, c)).realize()
  rng = np.random.default_rng(6)
  for p in range(n):
    q_lat = rng.standard_normal((s.n_head, s.kv_lora)).astype(np.float32)
    q_raw = rng.standard_normal((s.n_head, s.qk_nope + s.qk_rope)).astype(np.float32)
    kv_raw = (rng.standard_normal(s.kv_lora + s.qk_rope) * 3).astype(np.float32)
    out = step(Tensor(q_lat), Tensor(q_raw), Tensor(kv_raw), Tensor([p, 0], dtype=dtypes.int32)).numpy()
    ref = decode_attention_reference(Tensor(q_lat), Tensor(q_raw), Tensor(kv_raw), fixed["kv_norm_w"], cache_r, fixed["rope_cos"],
                                         fixed["rope_sin"], START_POS(mc).bind(p), **KW(s, c)).numpy()
    assert rel_err(out, ref.astype(np.float64)) < 1e-5, p
  np.testing.assert_allclose(cache_k.numpy()[:n], cache_r.numpy()[:n], rtol=2e-6, atol=1e-5)
  assert not cache_k.numpy()[n:].any()

@pytest.mark.skipif(not GPU, reason="needs a CUDA or Metal device")
def test_gpu_q_raw_read_in_place():
  """q_raw as the head of a longer flat buffer (a stacked [q; kv_a] output, kv at kv_offset): the same as q_raw alone."""
  s = DSV2
  for pos in (0, 100):
    c = make_case(s, pos, 256, seed=pos)
    c["cache"][pos + 1:] = 0.0
    q = c["q_raw"].reshape(-1)
    stacked = np.concatenate([q, c["kv_raw"]])
    t1, t2 = {k: Tensor(c[k]) for k in INPUTS}, {k: Tensor(c[k]) for k in INPUTS}
    t1["q_raw"] = t1["kv_raw"] = Tensor(stacked)
    a = mla_decode_attention(*[t1[k] for k in INPUTS], **KW(s, c), kv_offset=q.size).numpy()
    b = mla_decode_attention(*[t2[k] for k in INPUTS], **KW(s, c)).numpy()
    np.testing.assert_array_equal(a, b)

@pytest.mark.skipif(not GPU, reason="needs a CUDA or Metal device")
def test_prefill_on_the_device():
  """mla_prefill_attention on the device (the tensor-core kernel on an sm_80+ CUDA device; a symbolic chunk length is the
  model's: tools/gpu_check.py's prompts of 33 tokens in chunks of 16, and the nvcc test's capture)."""
  for s, P, T in ((DSV2, 0, 7), (DSV2, 300, 40), (DSV2, 1000, 128), (DSV2, 0, 512), (GLM, 5, 77), (TINY, 30, 16)):
    c = prefill_case(s, P, T, 2048, seed=P)
    c["cache"][P + T:] = 0.0
    out = mla_prefill_attention(Tensor(c["q"][..., :s.kv_lora].copy()), Tensor(c["q"][..., s.kv_lora:].copy()), Tensor(c["cache"]),
                                Tensor(c["pos"]), kv_lora=s.kv_lora, qk_rope=s.qk_rope, scale=c["scale"]).numpy()
    assert rel_err(out, numpy_prefill(s, c)) < 1e-5, (P, T)

# ---------------------------------------------------------------- the expanded form's flash kernel (tensor cores, emulated)

def flash_case(H: int, dqk: int, dv: int, P: int, T: int, key_rows: int, seed: int = 0, sharp: float = 1.0) -> dict:
  """A chunk of T queries at positions P..P+T-1 over per-head keys and values whose rows past P + T are NaN (never read)."""
  rng = np.random.default_rng(seed)
  k, v = np.full((key_rows, H, dqk), np.nan, np.float32), np.full((key_rows, H, dv), np.nan, np.float32)
  k[:P + T], v[:P + T] = rng.standard_normal((P + T, H, dqk)), rng.standard_normal((P + T, H, dv))
  return dict(q=(rng.standard_normal((T, H, dqk)) * sharp).astype(np.float32), k=k, v=v, pos=np.array([P, 0], np.int32),
              scale=1 / math.sqrt(dqk))

def numpy_flash(c: dict) -> np.ndarray:
  """(T, H, dv) in float64: query t at position P + t attends to rows 0..P + t of its head's keys and values."""
  P, q, k, v = int(c["pos"][0]), c["q"].astype(np.float64), c["k"].astype(np.float64), c["v"].astype(np.float64)
  out = np.zeros((q.shape[0], q.shape[1], v.shape[2]))
  for t in range(q.shape[0]):
    for h in range(q.shape[1]):
      sc = k[:P + t + 1, h] @ q[t, h] * c["scale"]
      pr = np.exp(sc - sc.max())
      out[t, h] = pr / pr.sum() @ v[:P + t + 1, h]
  return out

def numpy_split_halves(x: np.ndarray) -> np.ndarray:
  hi = x.astype(np.float16)
  return np.concatenate([hi, ((x - hi.astype(np.float32)) * 2048).astype(np.float16)], axis=-1)

def emulate_flash(c: dict, work: Path, tokens: int | None = None, edit=lambda body: body, ws: int | None = None, half: bool = False,
                  split: bool = False) -> np.ndarray:
  T, H, dqk = c["q"].shape
  tokens = tokens or T
  q = np.concatenate([c["q"], np.zeros((tokens - T, H, dqk), np.float32)])
  out = np.full((tokens, H, c["v"].shape[2]), np.nan, np.float32)
  k = flash_prefill_kernel(H, dqk, c["v"].shape[2], c["scale"], tokens, c["k"].shape[0], ws, half, split)
  k = SourceKernel(k.name, k.params, edit(k.body), k.global_size, k.local_size, trigger=k.trigger)
  kv = (lambda x: x.astype(np.float16)) if half else numpy_split_halves if split else (lambda x: x)
  emulate(k, "CUDA", [out, q, kv(c["k"]), kv(c["v"]), c["pos"]], work)
  return out

@pytest.mark.parametrize("ws", [1, 2])
@pytest.mark.parametrize("H,dqk,dv,P,T", [(2, 32, 16, 13, 20), (1, 16, 16, 70, 70), (3, 32, 48, 0, 5)], ids=["small", "two-tiles", "start"])
def test_flash_prefill_emulated(H, dqk, dv, P, T, ws, tmp_path):
  """Causal attention of a chunk over per-head keys and values to fp32 accuracy against float64, a warp a tile of queries
  or two (each a slice of the dims and columns): several stages of keys, a chunk of two or three query tiles (the later
  ones first), a chunk at position 0; queries sharp enough that the running max moves."""
  c = flash_case(H, dqk, dv, P, T, P + T + 9, seed=P + T, sharp=4.0)
  assert rel_err(emulate_flash(c, tmp_path, ws=ws), numpy_flash(c)) < 1e-5

def test_flash_prefill_emulated_padded_and_wide(tmp_path):
  """A chunk of 3 tokens run as its bound of 6: the padded rows reach key rows past the chunk (stale: finite, as the
  expansions of the model's zeroed cache are; large, so any weight on them would show), the real rows exact; and rows
  too wide for two stages of 16 keys in 48 KB (GLM-4.7-Flash's 256 + 256: stages of 8)."""
  c = flash_case(2, 16, 8, 30, 3, 40, seed=3)
  c["k"][33:36], c["v"][33:36] = 1e3, 1e3
  out = emulate_flash(c, tmp_path / "pad", tokens=6)
  assert rel_err(out[:3], numpy_flash(c)) < 1e-5
  assert flash_keys(192, 128) == FLASH_KEYS and flash_keys(256, 256) == 8 and flash_split(256, 256) == flash_split(192, 128) == 2
  assert flash_split(24, 16) == 1 and flash_split(256, 256, half=True) == flash_split(192, 128, half=True) == 1
  assert flash_split(192, 128, split=True) == 1 and flash_split(256, 256, split=True) == 2
  c = flash_case(1, 256, 256, 21, 4, 30, seed=4)
  assert rel_err(emulate_flash(c, tmp_path / "wide"), numpy_flash(c)) < 1e-5

def test_flash_prefill_needs_the_split_products(tmp_path):
  """Queries and keys rounded to tf32 once (their lo parts dropped) miss the bound: the test sees the precision."""
  c = flash_case(2, 24, 16, 13, 20, 40, seed=7, sharp=4.0)
  crude = lambda body: body.replace("ql[i] = qf[j][i] - qh[i]", "ql[i] = 0.0f").replace("k0l = k0 - k0h", "k0l = 0.0f") \
                           .replace("k1l = k1 - k1h", "k1l = 0.0f")
  assert rel_err(emulate_flash(c, tmp_path, edit=crude), numpy_flash(c)) > 1e-5

@pytest.mark.parametrize("ws", [1, 2])
@pytest.mark.parametrize("H,dqk,dv,P,T", [(2, 32, 32, 13, 20), (1, 64, 32, 70, 70), (3, 32, 64, 0, 5), (1, 192, 128, 40, 24), (1, 256, 256, 40, 24)],
                         ids=["small", "two-tiles", "start", "16-head-models", "glm-4.7-flash"])
def test_flash_prefill_f16_emulated(H, dqk, dv, P, T, ws, tmp_path):
  """fp16 keys and values (an fp16 cache's expansions): every product one fp16 m16n8k16, the weights' A fragments the scores'
  C fragments, the values' B fragments transposed by ldmatrix. Against float64 over the same fp16 rows: within the error of
  queries and weights rounded to fp16's 10-bit mantissa (1e-3 on sharp queries), and past the fp32 kernel's bound."""
  c = flash_case(H, dqk, dv, P, T, P + T + 9, seed=P + T, sharp=4.0)
  c["k"], c["v"] = (c[n].astype(np.float16).astype(np.float32) for n in ("k", "v"))
  err = rel_err(emulate_flash(c, tmp_path, ws=ws, half=True), numpy_flash(c))
  assert 1e-5 < err < 1.5e-3, err

@pytest.mark.parametrize("ws", [1, 2])
@pytest.mark.parametrize("H,dqk,dv,P,T", [(2, 32, 32, 13, 20), (1, 64, 32, 70, 70), (3, 32, 64, 0, 5)], ids=["small", "two-tiles", "start"])
def test_flash_prefill_split_emulated(H, dqk, dv, P, T, ws, tmp_path):
  """fp32 keys and values as fp16 pairs (split_halves), every product three fp16 m16n8k16 (hi hi; hi lo and lo hi apart):
  fp32 accuracy against float64, as the tf32 form's."""
  c = flash_case(H, dqk, dv, P, T, P + T + 9, seed=P + T, sharp=4.0)
  assert rel_err(emulate_flash(c, tmp_path, ws=ws, split=True), numpy_flash(c)) < 1e-5

def test_flash_prefill_split_needs_the_cross_terms(tmp_path):
  """Without the lo halves (the cross terms dropped) the split form is fp16's accuracy, not fp32's: the products above
  are what make it exact."""
  c = flash_case(2, 32, 32, 13, 20, 42, seed=9, sharp=4.0)
  crude = lambda body: body.replace("* 0.00048828125f", "* 0.0f")
  assert rel_err(emulate_flash(c, tmp_path, edit=crude, split=True), numpy_flash(c)) > 1e-4

def test_flash_prefill_split_one_stage_emulated(tmp_path):
  """GLM-4.7-Flash's 256 + 256 rows as pairs: two stages of 16 do not fit 48 KB, one does (its loads wait for the last
  stage's math); fp32 accuracy as with two, two warps a tile (fp32's registers)."""
  assert flash_stages(192, 128, split=True) == (FLASH_KEYS, 2) and flash_stages(256, 256, split=True) == (FLASH_KEYS, 1)
  c = flash_case(1, 256, 256, 21, 20, 45, seed=6, sharp=4.0)
  assert "LOAD_STAGE(c0, 0)" in flash_prefill_kernel(1, 256, 256, 0.1, 20, 45, split=True).body
  assert rel_err(emulate_flash(c, tmp_path, split=True), numpy_flash(c)) < 1e-5

def test_split_halves():
  """split_halves: hi + lo * 2^-11 within 2^-21 of x relative where x is 2^-10 or more (fp32's 2^-24, near), and within
  2^-34 absolute below (hi and lo subnormal there), on the device's own kernel (a float's rounding through half and back is
  not dropped: patches/0072)."""
  x = (np.random.default_rng(0).standard_normal((64, 3, 40)) * np.logspace(-6, 4, 40)).astype(np.float32)
  got = split_halves(Tensor(x)).numpy()
  assert got.dtype == np.float16 and got.shape == (64, 3, 80)
  back = got[..., :40].astype(np.float64) + got[..., 40:].astype(np.float64) / 2048
  assert (np.abs(back - x) <= np.maximum(np.abs(x) * 2.0**-21, 2.0**-34)).all()
  assert (got[..., 40:] != 0).mean() > 0.9   # lo holds the rest
  assert flash_form(192, 128, dtypes.float32) == flash_form(256, 256, dtypes.float32) == "split"
  assert flash_form(256, 256, dtypes.float16) == "f16" and flash_form(576, 512, dtypes.float32) == "tf32"

def test_flash_prefill_f16_padded(tmp_path):
  """fp16 rows: a chunk of 3 tokens run as its bound of 6, the padded rows' keys past the chunk large and finite (a weight on
  them would show); GLM-4.7-Flash's 256 + 256 rows take stages of 16 keys in fp16 (8 in fp32)."""
  c = flash_case(2, 32, 32, 30, 3, 40, seed=3)
  c["k"][33:36], c["v"][33:36] = 1e3, 1e3
  c["k"], c["v"] = (c[n].astype(np.float16).astype(np.float32) for n in ("k", "v"))
  assert rel_err(emulate_flash(c, tmp_path, tokens=6, half=True)[:3], numpy_flash(c)) < 2e-3
  assert flash_keys(256, 256, half=True) == FLASH_KEYS and flash_keys(192, 128, half=True) == FLASH_KEYS

def test_expand_per_head():
  """The form expanded per head of latent rows: keys [c_kv @ k_b[h] | k_rope], values c_kv @ v_b[h].T, every head one
  product (the flash prefill's keys and values)."""
  from apps.mla import heads_side_by_side, expand_per_head
  rng = np.random.default_rng(0)
  H, KV, nope, R, dv, S = 3, 16, 8, 4, 6, 5
  rows, k_b, v_b = rng.standard_normal((S, KV + R)), rng.standard_normal((H, KV, nope)), rng.standard_normal((H, dv, KV))
  keys, values = expand_per_head(Tensor(rows.astype(np.float32)), *heads_side_by_side(Tensor(k_b.astype(np.float32)),
                                 Tensor(v_b.astype(np.float32))), H, R)
  want_k = np.concatenate([np.einsum("sk,hkn->shn", rows[:, :KV], k_b), np.repeat(rows[:, None, KV:], H, 1)], -1)
  np.testing.assert_allclose(keys.numpy(), want_k, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(values.numpy(), np.einsum("sk,hvk->shv", rows[:, :KV], v_b), rtol=1e-5, atol=1e-5)

# ---------------------------------------------------------------- the flash prefill's expansions (tensor cores, emulated)

def emulate_expand(H: int, nope: int, rope: int, dv: int, KV: int, P: int, tokens: int, key_rows: int, base: int, form: str, work: Path,
                   groups: int = 3, edit=lambda body: body, seed: int = 0):
  """expand_kernel over a random cache (base + key_rows + 3 rows) and random k_b, v_b: (keys, values) as fp32 (pairs put
  together), the rows it wrote, and the float64 expansion of the cache's rows base.. (over the fp16 cache where form is f16)."""
  rng = np.random.default_rng(seed)
  half = form == "f16"
  cache = rng.standard_normal((base + key_rows + 3, KV + rope)).astype(np.float16 if half else np.float32)
  k_b, v_b = (rng.standard_normal(s).astype(np.float32) * 0.1 for s in ((H, KV, nope), (H, dv, KV)))
  w = numpy_split_halves(np.concatenate([k_b.transpose(0, 2, 1).reshape(H * nope, KV), v_b.reshape(H * dv, KV)]))
  wide, odt = (2, np.float16) if form == "split" else (1, np.float16 if half else np.float32)
  keys, values = np.full((key_rows, H, wide * (nope + rope)), np.nan, odt), np.full((key_rows, H, wide * dv), np.nan, odt)
  k = expand_kernel(H, nope, rope, dv, KV, tokens, key_rows, half, form, groups)
  k = SourceKernel(k.name, k.params, edit(k.body), k.global_size, k.local_size, trigger=k.trigger)
  emulate(k, "CUDA", [keys, values, cache, w, np.array([P, base], np.int32)], work)
  def together(x):   # pairs put together
    return x[..., :x.shape[-1] // 2].astype(np.float64) + x[..., x.shape[-1] // 2:].astype(np.float64) / 2048 if wide == 2 else x.astype(np.float64)
  rows = cache[base:base + key_rows].astype(np.float64)
  want_k = np.concatenate([np.einsum("sk,hkn->shn", rows[:, :KV], k_b), np.repeat(rows[:, None, KV:], H, 1)], -1)
  return together(keys), together(values), min(P + tokens, key_rows), want_k, np.einsum("sk,hvk->shv", rows[:, :KV], v_b)

@pytest.mark.parametrize("form", ["split", "f32", "f16"])
@pytest.mark.parametrize("H,nope,rope,dv,P,tokens,key_rows,base", [(2, 64, 32, 64, 100, 70, 300, 7), (4, 96, 32, 64, 150, 40, 180, 0)],
                         ids=["two-heads-a-tile", "heads-across-tiles-clamped"])
def test_expand_emulated(H, nope, rope, dv, P, tokens, key_rows, base, form, tmp_path):
  """The flash prefill's keys [c_kv . k_b[h] | k_rope] and values c_kv . v_b[h] of rows 0..P + tokens - 1 (clamped to the
  buffers' rows) of a sequence whose cache rows start at `base`, one GEMM on the tensor cores: an fp32 cache's to fp32
  accuracy (its rows' pairs, three fp16 products), into fp16 pairs or fp32 rows; an fp16 cache's to fp16's rounding of
  the product. Tiles of 128 rows x columns walked by 3 workgroups; the rows past the chunk are not written."""
  keys, values, n, want_k, want_v = emulate_expand(H, nope, rope, dv, 64, P, tokens, key_rows, base, form, tmp_path)
  assert np.isnan(keys[n:]).all() and np.isnan(values[n:]).all() and n < key_rows or n == key_rows
  bound = 1e-3 if form == "f16" else 5e-7
  errs = rel_err(keys[:n], want_k[:n]), rel_err(values[:n], want_v[:n])
  assert max(errs) < bound, errs

EXPAND_SCRIPT = r"""
import apps
from tinygrad import Tensor, TinyJit, dtypes, GlobalCounters
from apps.kernels.mla_attention import mla_expand, flash_form
for H, nope, dv, cdt in ((16, 128, 128, dtypes.float), (20, 192, 256, dtypes.float), (16, 128, 128, dtypes.half), (20, 192, 256, dtypes.half)):
  KV, R, MC = 512, 64, 4096
  form = flash_form(nope + R, dv, cdt)
  wide, bdt = (2, dtypes.half) if form == "split" else (1, cdt)
  cache = Tensor.zeros(2 * MC, KV + R, dtype=cdt).contiguous().realize()   # two sequences' rows: the second one's at MC
  keys, values = (Tensor.zeros(MC, H, wide * w, dtype=bdt).contiguous().realize() for w in (nope + R, dv))
  k_b, v_b = Tensor.empty(H, KV, nope).realize(), Tensor.empty(H, dv, KV).realize()
  step = TinyJit(lambda pos: Tensor.realize(*mla_expand(cache, k_b, v_b, pos, keys, values, 2048)))
  for i in range(3):
    pos = Tensor([1000 * i, MC], dtype=dtypes.int32).realize()
    GlobalCounters.reset()
    step(pos)
    if i == 0: print("EXPAND", form, GlobalCounters.kernel_count)
"""

@needs_nvcc
def test_expand_compiles_and_captures():
  """The expansion GEMM for the three models' shapes over both caches, rendered and compiled with nvcc for sm_90 inside a
  TinyJit (capture and replays), into the buffers in place: the weights' pairs and the GEMM, no copy of the cache or the
  buffers."""
  out = run_nvcc_script(EXPAND_SCRIPT)
  assert [l.split()[1:] for l in out.splitlines() if l.startswith("EXPAND")] == [["split", "2"], ["split", "2"], ["f16", "2"], ["f16", "2"]], out

def test_flash_supports():
  """The flash prefill takes the models' shapes (and the tiny presets') over both caches; a shape whose key columns are not
  whole tiles of the expansion (3 heads x 40) or whose rows the flash kernel cannot step (dv 20) is left to the latent form."""
  from apps.kernels.mla_attention import flash_supports
  for H, nope, dv, kv in ((16, 128, 128, 512), (20, 192, 256, 512), (4, 96, 64, 256), (4, 64, 64, 256)):
    assert all(flash_supports(H, nope, 64 if kv == 512 else 32, dv, kv, dt) for dt in (dtypes.float32, dtypes.float16))
  assert not flash_supports(3, 40, 32, 64, 256, dtypes.float32) and not flash_supports(16, 128, 64, 20, 512, dtypes.float16)

def test_expand_needs_the_cross_terms(tmp_path):
  """Without the lo halves' products an fp32 cache's expansion is fp16's accuracy: the cross terms are what make it fp32's."""
  keys, values, n, want_k, want_v = emulate_expand(2, 64, 32, 64, 64, 20, 30, 60, 0, "split", tmp_path,
                                                   edit=lambda body: body.replace("* 0.00048828125f", "* 0.0f"))
  assert rel_err(values[:n], want_v[:n]) > 1e-4

def test_flash_prefills_where_its_flops_pay():
  """The tensor cores' chunks take the expanded form's flash kernel where its FLOPs a key are at most 2/3 of the absorbed
  form's: DeepSeek-V2-Lite's (and Youtu-LLM-2B's: the same attention shape) 512-token chunks, not GLM-4.7-Flash's (whose
  wide expansion measured no faster), which its 2048-token ones would; no chunk of 128."""
  from apps.mla import Config, flash_prefills
  dsv2 = Config(n_layer=1, dim=1, n_head=16, vocab_size=1, norm_eps=1e-6, context_length=1, q_lora_rank=0, kv_lora_rank=512, qk_nope=128,
                qk_rope=64, v_head=128, ffn_dim=1, n_dense_lead=1)
  glm = Config(**{**vars(dsv2), "n_head": 20, "qk_nope": 192, "v_head": 256})
  assert [flash_prefills(c, n) for c in (dsv2, glm) for n in (2048, 512, 128)] == [True, True, False, True, False, False]
