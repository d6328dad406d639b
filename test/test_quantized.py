"""apps/quantized.py against gguf-py: on-device dequantization of every type, linear / expert / batched / embedding
kernels vs a float64 numpy reference, TinyJit replay across expert selections, load-time memory, clear errors, and the
CUDA kernels rendered and compiled (DEV=NULL:NVCC:sm_90) when nvcc is there."""
import os, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
from nvcc import needs_nvcc, run_nvcc_script
import gguf
from hypothesis import given, settings, strategies as st
from apps.gguf import GGUFFile, GGUFWriter, GGMLType, GGUFError, BLOCK, ValueType
from apps.quantized import QuantizedLinear, QuantizedExpertWeights, QuantizedEmbedding, dequantize_rows, load_tensor, mul_mat_id, packed_bytes, \
  expert_tiles, block_product, tile_block_product, BLOCK_PRODUCT_TYPES, TILE_BLOCK_PRODUCT_TYPES
from apps.packed import PackedTensor, QUANT_FORMATS, format_for
from apps.dispatch import kernel_for, register_kernel, KernelSpec
import apps.dispatch as D
from tinygrad import Tensor, TinyJit, UOp, Device, GlobalCounters, dtypes
from tinygrad.uop.ops import Ops

QUANTS = list(QUANT_FORMATS)
FLOATS = [GGMLType.F32, GGMLType.F16, GGMLType.BF16]
ALL = QUANTS + FLOATS
# fp16 fields (byte offsets in a block) that must hold finite scales; every other byte is free
F16_FIELDS = {GGMLType.Q4_0: [0], GGMLType.Q4_1: [0, 2], GGMLType.Q5_0: [0], GGMLType.Q5_1: [0, 2], GGMLType.Q8_0: [0],
              GGMLType.Q4_K: [0, 2], GGMLType.Q5_K: [0, 2], GGMLType.Q6_K: [208]}

def gq(typ) -> gguf.GGMLQuantizationType: return gguf.GGMLQuantizationType(int(typ))

def random_tensor(typ: GGMLType, ne: tuple, rng: np.random.Generator, mode: str = "normal") -> np.ndarray:
  """File bytes of a random tensor with ggml dims ne. mode: normal | extreme (any finite fp16 scale, subnormals to
  65504) | zeros / ones (all quant bits 0 / 1, normal scales)."""
  n = int(np.prod(ne))
  if typ == GGMLType.F32: return rng.standard_normal(n).astype(np.float32).view(np.uint8)
  if typ == GGMLType.F16: return rng.standard_normal(n).astype(np.float16).view(np.uint8)
  if typ == GGMLType.BF16: return (rng.standard_normal(n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
  bs, nbytes = BLOCK[typ]
  blocks = rng.integers(0, 256, (n // bs, nbytes), dtype=np.uint8)
  if mode in ("zeros", "ones"): blocks[:] = 0 if mode == "zeros" else 255
  for off in F16_FIELDS[typ]:
    if mode == "extreme":  # random sign, exponent 0..30 (subnormals included), mantissa: every finite fp16
      bits = rng.integers(0, 31 << 10, len(blocks), dtype=np.uint16) | (rng.integers(0, 2, len(blocks), dtype=np.uint16) << 15)
      d = bits.view(np.float16)
    else: d = (rng.standard_normal(len(blocks)) * 0.02).astype(np.float16)
    blocks[:, off:off + 2] = d.view(np.uint8).reshape(-1, 2)
  return blocks.reshape(-1)

def ref_weight(raw: np.ndarray, typ: GGMLType, ne: tuple) -> np.ndarray:
  """gguf-py's dequantization, numpy shape (reversed ne)."""
  rows = int(np.prod(ne[1:]))
  return gguf.quants.dequantize(raw.reshape(rows, -1), gq(typ)).reshape(tuple(reversed(ne)))

def relerr(out, ref) -> float: return float(np.linalg.norm(out.astype(np.float64) - ref) / np.linalg.norm(ref))

def relerr_terms(out, x, W) -> float:
  """||out - x W^T|| over the root-sum-square of the products' terms (x_k w_nk): a sum's rounding error scales with its
  terms, not with its value. For random signs this is ||x W^T|| (relerr's denominator) on average; where a row's terms
  cancel (a one-row product's dot of 1/1000 of its terms' size), relerr's blows up whatever the order of the sums."""
  x = x.astype(np.float64)
  return float(np.linalg.norm(out.astype(np.float64) - x @ W.T) / np.sqrt(((x * x) @ (W * W).T).sum()))

def fp32_bound(K: int) -> float:
  """||out - ref|| / ||ref|| for fp32 products summed in fp32 (K terms): a few ulps times sqrt(K) for random signs."""
  return 4 * np.sqrt(K) * 2.0 ** -24 + 2.0 ** -22

def x24(v: np.ndarray, block: int = 32) -> np.ndarray:
  """v (float32, last axis a multiple of `block`) as the integer-x kernels round it (apps/kernels/matvec.X24_SPLIT: the decode
  matvecs for Q4_0 / Q8_0 and the prefill GEMM), in float64: integers X times a scale per block, d = max |v| / 8323072
  (fp32; 127 * 65536 keeps X's top byte signed), X = v * (1 / d) rounded half away from zero. The kernels use blocks of 32;
  other lengths are for tests that tell them apart."""
  b = np.ascontiguousarray(v, np.float32).reshape(*v.shape[:-1], -1, block)
  d = (np.abs(b).max(-1, keepdims=True) / np.float32(8323072)).astype(np.float32)
  with np.errstate(divide="ignore"): idv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
  X = np.sign(b * idv) * np.floor(np.abs(b * idv) + np.float32(0.5))
  return (X.astype(np.float64) * d.astype(np.float64)).reshape(v.shape)

def near_tie_case(seed: int, T: int, N: int = 256, K: int = 256, E: int = 8, k: int = 2, delta: float = 3e-6):
  """A product whose result feeds a router, with every token's choice a near tie (GLM-4.7-Flash-tiny's attn_output: Q4_0
  K x N, the residual added; a router of E experts, top k). Returns (raw, x, res, R, h): the weights' bytes, x (T, K) and
  res (T, N) float32, the router R (E, N) and h = x @ W.T + res (float64), whose router logits R h have their k-th and
  (k+1)-th best `delta` apart (logits ~1): res is moved along R_b - R_a until they are."""
  rng = np.random.default_rng(seed)
  raw = random_tensor(GGMLType.Q4_0, (K, N), rng)
  W = ref_weight(raw, GGMLType.Q4_0, (K, N)).astype(np.float64)
  x, res = rng.standard_normal((T, K)).astype(np.float32), rng.standard_normal((T, N)).astype(np.float32)
  R = rng.standard_normal((E, N)) / np.sqrt(N)
  h = x.astype(np.float64) @ W.T + res
  for t in range(T):
    a, b = np.argsort(-(R @ h[t]))[k - 1:k + 1]
    res[t] += (-delta - (R[b] - R[a]) @ h[t]) * (R[b] - R[a]) / np.sum((R[b] - R[a]) ** 2)
    h[t] = x[t].astype(np.float64) @ W.T + res[t]
  srt = -np.sort(-(h @ R.T), axis=1)
  assert np.allclose(srt[:, k - 1] - srt[:, k], delta, rtol=0.02)   # every token's choice is a near tie
  return raw, x, res, R, h

def top_k_sets(logits: np.ndarray, k: int = 2) -> list[set[int]]: return [set(np.argsort(-row)[:k].tolist()) for row in logits]

def x_seen(typ: GGMLType, x: np.ndarray, tokens: int) -> np.ndarray:
  """x as a product with `typ` weights on this device multiplies it (float64): the hand-written decode matvecs (up to 4
  tokens, apps/kernels/matvec.py) round x to 24 bits per block for Q4_0 and Q8_0 weights, the tensor-core GEMM (more
  tokens, CUDA sm_80+, apps/kernels/gemm.py) for every type it takes; every other path multiplies x."""
  from apps.kernels import matvec, gemm, language_of
  if language_of(Device.DEFAULT) is None: return x.astype(np.float64)
  if tokens <= 4: return x24(x) if typ in matvec.TYPES and matvec.TYPES[typ].xint else x.astype(np.float64)
  K = x.shape[-1]
  gemm_ok = typ in gemm.MMA_TYPES and K % BLOCK[typ][0] == 0 and gemm.mma_supports(gemm.GemmShape(typ, tokens, 16, K), Device.DEFAULT)
  return x24(x) if gemm_ok else x.astype(np.float64)

FP16_BOUND = 2.0 ** -9  # fp16 output (and fp16 x, which the reference uses as given): rounding of the result dominates

def write_gguf(path, tensors: list[tuple[str, tuple, GGMLType, np.ndarray]]) -> None:
  w = GGUFWriter(path)
  w.add("general.architecture", "test", ValueType.STRING)
  for name, ne, typ, _ in tensors: w.add_tensor(name, ne, typ)
  data = {name: raw for name, _, _, raw in tensors}
  w.write(lambda name: data[name])

# ---------------------------------------------------------------- dequantization, bitwise vs gguf-py

DQ_NE = {t: (QUANT_FORMATS[t].block * 2, 3) if t in QUANT_FORMATS else (24, 3) for t in ALL}  # one shape per type: one kernel each

def fma_bound(raw: np.ndarray, typ: GGMLType, ref: np.ndarray) -> np.ndarray:
  """Elementwise bound for formulas a*q + c that a compiler may contract into one fma: the results differ by at most
  one rounding of the product, |a*q| * 2**-24, plus half an ulp of the sum; |a*q| <= |ref| + |c|."""
  bs, nbytes = BLOCK[typ]
  b = raw.reshape(-1, nbytes)
  if typ in (GGMLType.Q4_1, GGMLType.Q5_1): c = np.repeat(np.abs(b[:, 2:4].copy().view(np.float16).astype(np.float64)), bs, axis=1)
  else:
    dmin = b[:, 2:4].copy().view(np.float16).astype(np.float64)
    _, mn = gguf.quants.Q4_K.get_scale_min(b[:, 4:16].copy())
    c = np.repeat(np.abs(dmin * mn.astype(np.float64)), 32, axis=1)
  c = c.reshape(ref.shape)
  return (np.abs(ref) + 2 * c) * 2.0 ** -23

@pytest.mark.parametrize("typ", ALL, ids=lambda t: t.name)
@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), mode=st.sampled_from(["normal", "extreme", "zeros", "ones"]))
def test_dequantize_matches_gguf_py(typ, seed, mode):
  ne = DQ_NE[typ]
  raw = random_tensor(typ, ne, np.random.default_rng(seed), mode)
  ref = ref_weight(raw, typ, ne)
  out = dequantize_rows(PackedTensor.from_bytes(raw, typ, ne)).numpy()
  assert out.shape == ref.shape and out.dtype == np.float32
  if typ in QUANT_FORMATS and QUANT_FORMATS[typ].fma_rounding:
    bad = ~((out.view(np.uint32) == ref.view(np.uint32)) | (np.abs(out.astype(np.float64) - ref) <= fma_bound(raw, typ, ref)))
    assert not bad.any(), f"{bad.sum()} weights off: {out[bad][:4]} vs {ref[bad][:4]}"
  else:  # a single rounded product per weight, in gguf-py's order: bit for bit
    diff = out.view(np.uint32) != ref.view(np.uint32)
    assert not diff.any(), f"{diff.sum()} weights differ: {out[diff][:4]} vs {ref[diff][:4]}"

def test_packed_bytes_within_budget():
  # the device layouts may cost at most a few % over the file (decoded K-quant scales), never 10%
  for typ in ALL:
    ne = (QUANT_FORMATS[typ].block * 4 if typ in QUANT_FORMATS else 64, 8)
    fmt = format_for(typ, ne[0])
    w = PackedTensor.from_bytes(random_tensor(typ, ne, np.random.default_rng(1)), typ, ne)
    assert w.nbytes == packed_bytes(typ, ne) == fmt.device_bytes * np.prod(ne) // fmt.block
    file = int(np.prod(ne)) // BLOCK[typ][0] * BLOCK[typ][1]
    assert w.nbytes <= file * 1.03, (typ.name, w.nbytes, file)

@pytest.mark.parametrize("typ", ALL, ids=lambda t: t.name)
def test_pack_host_into_lent_memory(typ):
  # the loader packs straight into a pinned staging buffer of host_bytes: every part made there (none falls back to a
  # copy), none overlapping, the same bytes as packed into fresh arrays
  ne = (QUANT_FORMATS[typ].block * 3 if typ in QUANT_FORMATS else 24, 5)
  raw = random_tensor(typ, ne, np.random.default_rng(2))
  fmt = format_for(typ, ne[0])
  arena, used, spans = np.zeros(fmt.host_bytes(int(np.prod(ne)) // fmt.block), np.uint8), 0, []
  def empty(shape, dtype):
    nonlocal used
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if used + n > arena.nbytes: return np.empty(shape, dtype)
    a, used = arena[used:used + n].view(dtype).reshape(shape), used + -(-n // 64) * 64
    return a
  _, want = PackedTensor.pack_host(raw, typ, ne)
  _, got = PackedTensor.pack_host(raw, typ, ne, empty=empty)
  for name, a in got.items():
    np.testing.assert_array_equal(a, want[name])
    assert np.shares_memory(a, arena), f"{name} was not made in the lent memory"
    spans.append((a.ctypes.data, a.ctypes.data + a.nbytes))
  spans.sort()
  assert all(e <= s for (_, e), (s, _) in zip(spans, spans[1:]))

# ---------------------------------------------------------------- linear

LIN_SHAPES = [(1, 1, 5), (1, 3, 37), (4, 2, 37), (3, 2, 1)]  # (T, blocks per row, out): T=1 decode, T>1 prefill, odd outs

@pytest.mark.parametrize("typ", ALL, ids=lambda t: t.name)
@pytest.mark.parametrize("T,nblk,N", LIN_SHAPES)
def test_linear_fp32(typ, T, nblk, N):
  rng = np.random.default_rng(T * 1000 + N)
  K = (QUANT_FORMATS[typ].block if typ in QUANT_FORMATS else 8) * nblk
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  lin = QuantizedLinear(PackedTensor.from_bytes(raw, typ, (K, N)))
  assert (lin.in_features, lin.out_features, lin.type) == (K, N, typ)
  x = rng.standard_normal((T, K)).astype(np.float32)
  out = lin(Tensor(x)).numpy()
  assert out.shape == (T, N) and out.dtype == np.float32
  assert relerr(out, x_seen(typ, x, T) @ W.T) < fp32_bound(K)

@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q6_K, GGMLType.F16])
def test_linear_fp16_and_leading_dims(typ):
  rng = np.random.default_rng(7)
  K, N = (QUANT_FORMATS[typ].block * 2 if typ in QUANT_FORMATS else 64), 37
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  lin = QuantizedLinear(PackedTensor.from_bytes(raw, typ, (K, N)))
  x = rng.standard_normal((2, 3, K)).astype(np.float16)
  out = lin(Tensor(x)).numpy()
  assert out.shape == (2, 3, N) and out.dtype == np.float16
  assert relerr(out, x.astype(np.float64) @ W.T) < FP16_BOUND

def test_linear_one_kernel_no_dequantized_copy():
  rng = np.random.default_rng(3)
  K, N = 256, 64
  lin = QuantizedLinear(PackedTensor.from_bytes(random_tensor(GGMLType.Q4_K, (K, N), rng), GGMLType.Q4_K, (K, N)))
  x = Tensor(rng.standard_normal((1, K)).astype(np.float32)).realize()
  lin(x).realize()  # compile once
  GlobalCounters.reset()
  before = GlobalCounters.mem_used
  y = lin(x).realize()
  assert GlobalCounters.kernel_count == 1
  assert GlobalCounters.mem_used - before == y.nbytes() == N * 4  # only the output is allocated

def test_linear_symbolic_batch_under_jit():
  # a prefill chunk of variable length: one capture, right rows for every length
  rng = np.random.default_rng(4)
  K, N, T_MAX = 64, 5, 8
  raw = random_tensor(GGMLType.Q8_0, (K, N), rng)
  W = ref_weight(raw, GGMLType.Q8_0, (K, N)).astype(np.float64)
  lin = QuantizedLinear(PackedTensor.from_bytes(raw, GGMLType.Q8_0, (K, N)))
  xb = Tensor(rng.standard_normal((T_MAX, K)).astype(np.float32)).realize()
  v, bodies = UOp.variable("n_tokens", 1, T_MAX), []
  @TinyJit
  def step(xb, n):
    bodies.append(1)
    y = lin(xb[:n])
    return y.pad(((0, T_MAX - y.shape[0]), None)).contiguous()
  for t in [3, 5, 1, 8, 2]:
    out = step(xb, v.bind(t)).numpy()
    assert relerr(out[:t], xb.numpy()[:t].astype(np.float64) @ W.T) < fp32_bound(K)
    assert not out[t:].any()
  assert len(bodies) == 2  # eager run + capture; the rest are replays

# ---------------------------------------------------------------- experts (mul_mat_id) and batched

def expert_file(tmp_path, specs: list[tuple[str, GGMLType, tuple]], seed=0):
  rng = np.random.default_rng(seed)
  tensors = [(name, ne, typ, random_tensor(typ, ne, rng)) for name, typ, ne in specs]
  path = tmp_path / "experts.gguf"
  write_gguf(path, tensors)
  return GGUFFile(path), {name: ref_weight(raw, typ, ne).astype(np.float64) for name, ne, typ, raw in tensors}

def expert_ref(W: np.ndarray, sel: np.ndarray, x: np.ndarray) -> np.ndarray:
  """out[b, j] = W[sel[b, j]] @ x[b] (x (B, K)) or x[b, j] (x (B, J, K)), in float64."""
  xs = x[:, None, :] if x.ndim == 2 else x
  return np.einsum("bjnk,bjk->bjn", W[sel], np.broadcast_to(xs, (*sel.shape, x.shape[-1])).astype(np.float64))

@pytest.mark.parametrize("typ", ALL, ids=lambda t: t.name)
def test_experts_vs_reference(tmp_path, typ):
  K = QUANT_FORMATS[typ].block * 2 if typ in QUANT_FORMATS else 32
  E, N = 6, 5
  gf, W = expert_file(tmp_path, [("ffn_down_exps.weight", typ, (K, N, E))])
  ex = QuantizedExpertWeights.from_gguf(gf, "ffn_down_exps.weight")
  assert (ex.in_features, ex.out_features, ex.n_expert, ex.type) == (K, N, E, typ)
  rng = np.random.default_rng(1)
  sel = np.array([[1, 1, 4], [5, 0, 5]], dtype=np.int32)  # repeated experts inside one selection
  x = rng.standard_normal((2, K)).astype(np.float32)
  out = ex(Tensor(sel), Tensor(x)).numpy()
  assert out.shape == (2, 3, N)
  assert relerr(out, expert_ref(W["ffn_down_exps.weight"], sel, x_seen(typ, x, 2))) < fp32_bound(K)
  xj = rng.standard_normal((2, 3, K)).astype(np.float32)  # one input per slot (the down projection)
  out = mul_mat_id(ex, Tensor(sel), Tensor(xj)).numpy()
  assert relerr(out, expert_ref(W["ffn_down_exps.weight"], sel, x_seen(typ, xj, 2))) < fp32_bound(K)

def test_merged_gate_up_equals_separate(tmp_path):
  K, N, E = 64, 7, 4
  gf, W = expert_file(tmp_path, [("gate", GGMLType.Q4_0, (K, N, E)), ("up", GGMLType.Q4_0, (K, N, E)), ("up8", GGMLType.Q8_0, (K, N, E))])
  merged = QuantizedExpertWeights.from_gguf(gf, ["gate", "up"])
  gate, up = QuantizedExpertWeights.from_gguf(gf, "gate"), QuantizedExpertWeights.from_gguf(gf, "up")
  assert len(merged.groups) == 1 and merged.out_features == 2 * N
  rng = np.random.default_rng(2)
  sel, x = Tensor(np.array([[3, 0]], dtype=np.int32)), Tensor(rng.standard_normal((1, K)).astype(np.float32)).realize()
  merged(sel, x).realize()
  GlobalCounters.reset()
  y = merged(sel, x).realize()
  assert GlobalCounters.kernel_count == 1  # gate and up from one read of sel and x
  sep = np.concatenate([gate(sel, x).numpy(), up(sel, x).numpy()], axis=-1)
  ref = expert_ref(np.concatenate([W["gate"], W["up"]], axis=1), sel.numpy(), x_seen(GGMLType.Q4_0, x.numpy(), 1))
  assert relerr(y.numpy(), ref) < fp32_bound(K) and relerr(sep, ref) < fp32_bound(K)
  np.testing.assert_allclose(y.numpy(), sep, rtol=0, atol=np.abs(ref).max() * 2.0 ** -20)
  # different types cannot share a kernel: two groups, same result
  mixed = QuantizedExpertWeights.from_gguf(gf, ["gate", "up8"])
  assert len(mixed.groups) == 2 and mixed.out_features == 2 * N
  ref = expert_ref(np.concatenate([W["gate"], W["up8"]], axis=1), sel.numpy(), x_seen(GGMLType.Q4_0, x.numpy(), 1))
  assert relerr(mixed(sel, x).numpy(), ref) < fp32_bound(K)

def test_experts_tinyjit_replays_across_selections(tmp_path):
  K, N, E = 64, 6, 8
  gf, W = expert_file(tmp_path, [("gate", GGMLType.Q4_0, (K, N, E)), ("up", GGMLType.Q4_0, (K, N, E))])
  ex = QuantizedExpertWeights.from_gguf(gf, ["gate", "up"])
  Wm = np.concatenate([W["gate"], W["up"]], axis=1)
  rng, bodies = np.random.default_rng(5), []
  @TinyJit
  def step(sel: Tensor, x: Tensor) -> Tensor:
    bodies.append(1)
    return ex(sel, x).contiguous()
  captured = None
  for i in range(6):
    sel = rng.integers(0, E, (1, 4)).astype(np.int32)
    if i == 3: sel[0, 1:] = sel[0, 0]  # one expert chosen for all slots
    x = rng.standard_normal((1, K)).astype(np.float32)
    out = step(Tensor(sel), Tensor(x)).numpy()
    assert relerr(out, expert_ref(Wm, sel, x_seen(GGMLType.Q4_0, x, 1))) < fp32_bound(K), f"step {i} sel {sel}"
    if i >= 2:
      captured = captured or step.captured
      assert step.captured is captured
  assert len(bodies) == 2  # eager + one capture; every later selection replays the same kernels
  assert [c.src[0].op for c in captured._linear.src] == [Ops.PROGRAM]  # the replay is one kernel: gate+up of the selected experts

@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q6_K, GGMLType.F32], ids=lambda t: t.name)
@pytest.mark.parametrize("T", [1, 3, 5])
def test_portable_residual_in_the_product(typ, T):
  """The portable kernel adds a decode product's residual (up to 4 tokens) at its store (tinygrad's kernels: no provider
  serves the product): one kernel, against float64; more tokens and the other fusions run as separate ops around it."""
  K = QUANT_FORMATS[typ].block if typ in QUANT_FORMATS else 32
  N, rng = 2 * K, np.random.default_rng(T)
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  lin = QuantizedLinear(PackedTensor.from_bytes(raw, typ, (K, N)))
  lin.kernels = "generated"
  x, r = rng.standard_normal((T, K)).astype(np.float32), rng.standard_normal((T, N)).astype(np.float32)
  xt, rt = Tensor(x).realize(), Tensor(r).realize()
  lin(xt, residual=rt).realize()
  GlobalCounters.reset()
  out = lin(xt, residual=rt).numpy()
  assert GlobalCounters.kernel_count == (1 if T <= 4 else 2)
  assert relerr(out, r + x.astype(np.float64) @ W.T) < fp32_bound(K)
  nw = (1 + 0.1 * rng.standard_normal(K)).astype(np.float32)
  xn = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * nw
  out = lin(xt, norm=(Tensor(nw), 1e-6), residual=rt).numpy()   # the norm apart, the residual too
  assert relerr(out, r + xn @ W.T) < fp32_bound(K)

@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q8_0, GGMLType.Q5_0], ids=lambda t: t.name)
def test_one_token_product_scales_a_chunk_once(typ):
  """A generated one-token product multiplies each chunk's sum by the chunk's scale (d), a sum inside the sum over chunks;
  a product of more tokens keeps one sum (its heuristic groups a chunk's words, which a nested sum does not allow)."""
  K, N, rng = 256, 64, np.random.default_rng(11)
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  lin = QuantizedLinear(PackedTensor.from_bytes(raw, typ, (K, N)))
  lin.kernels = "generated"
  for T, reduces in ((1, 2), (3, 1)):
    x = rng.standard_normal((T, K)).astype(np.float32)
    calls = lin(Tensor(x)).schedule_linear().src
    assert [sum(u.op is Ops.REDUCE for u in c.src[0].toposort()) for c in calls if c.src[0].op is Ops.SINK] == [reduces]
    assert relerr(lin(Tensor(x)).numpy(), x.astype(np.float64) @ W.T) < fp32_bound(K)

@pytest.mark.parametrize("typ", [GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K])
def test_tokens_product_splits_its_chunk_range(typ):
  """A generated K-quant product of several tokens takes a chunk's coordinates as (R // step) % dim, which the code generator
  splits into the block's ranges: its kernel indexes the packed words without a modulo (the form as one range left the div /
  mod index arithmetic in the loop); one token keeps R one range for the matvec rule."""
  from tinygrad.codegen import to_program
  K, N, rng = 512, 64, np.random.default_rng(12)
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  lin = QuantizedLinear(PackedTensor.from_bytes(raw, typ, (K, N)))
  lin.kernels = "generated"
  x = rng.standard_normal((3, K)).astype(np.float32)
  asts = [c.src[0] for c in lin(Tensor(x)).schedule_linear().src if c.src[0].op is Ops.SINK]
  assert len(asts) == 1 and "%" not in to_program(asts[0], Device[Device.DEFAULT].renderer).src[2].arg
  assert relerr(lin(Tensor(x)).numpy(), x.astype(np.float64) @ W.T) < fp32_bound(K)

@pytest.mark.parametrize("typ", [GGMLType.Q8_0, GGMLType.F16, GGMLType.Q4_K])
def test_batched_per_head(tmp_path, typ):
  K = QUANT_FORMATS[typ].block if typ in QUANT_FORMATS else 16
  H, N = 3, 5
  gf, W = expert_file(tmp_path, [("attn_k_b.weight", typ, (K, N, H))])
  kb = QuantizedExpertWeights.from_gguf(gf, "attn_k_b.weight")
  x = np.random.default_rng(6).standard_normal((2, H, K)).astype(np.float32)  # (T, n_head, in)
  out = kb.batched(Tensor(x)).numpy()
  assert out.shape == (2, H, N)
  assert relerr(out, np.einsum("hnk,thk->thn", W["attn_k_b.weight"], x_seen(typ, x, 2))) < fp32_bound(K)

def test_experts_prefill_symbolic(tmp_path):
  K, N, E, T_MAX = 32, 4, 5, 6
  gf, W = expert_file(tmp_path, [("e", GGMLType.Q5_0, (K, N, E))])
  ex = QuantizedExpertWeights.from_gguf(gf, "e")
  rng = np.random.default_rng(8)
  selb = Tensor(rng.integers(0, E, (T_MAX, 2)).astype(np.int32)).realize()
  xb = Tensor(rng.standard_normal((T_MAX, 2, K)).astype(np.float32)).realize()
  v = UOp.variable("n_tokens", 1, T_MAX)
  t = 4
  y = ex(selb[:v.bind(t)], xb[:v.bind(t)])
  out = y.pad(((0, T_MAX - y.shape[0]), None, None)).numpy()
  assert relerr(out[:t], expert_ref(W["e"], selb.numpy()[:t], xb.numpy()[:t])) < fp32_bound(K)

@pytest.mark.parametrize("B, J, E, tile", [(40, 4, 9, 16), (7, 3, 5, 4), (1, 1, 1, 4)])
def test_expert_tiles_hold_each_entry_once(B, J, E, tile):
  rng = np.random.default_rng(B)
  for sel in [rng.integers(0, E, (B, J)).astype(np.int32) for _ in range(4)] + [np.zeros((B, J), np.int32)]:
    entry, expert, slot, count = (t.numpy() for t in expert_tiles(Tensor(sel), E, tile))
    assert len(expert) == -(-B * J // tile) + E and len(entry) == len(expert) * tile
    assert (entry[slot] == np.arange(B * J)).all() and len(set(slot.tolist())) == B * J   # each entry in one place
    assert (expert[slot // tile] == sel.reshape(-1)).all()                                # a tile holds its expert's entries
    assert (np.diff(expert) >= 0).all()                                                   # the experts in order
    # a tile's count is its entries, first in the tile: the places below it hold an entry, the rest padding
    assert (count == np.bincount(slot // tile, minlength=len(expert))).all() and (slot % tile < count[slot // tile]).all()
    assert (np.diff((count > 0).astype(int)) <= 0).all()                                  # the tiles that hold none come last

@pytest.mark.parametrize("E, B, J", [(6, 20, 3), (2, 40, 2)], ids=["tile16", "tile32"])   # 10 entries an expert, 40
@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q6_K, GGMLType.Q5_K], ids=lambda t: t.name)
def test_experts_generated_chunk_in_tiles(tmp_path, typ, E, B, J):
  """The generated path runs a chunk of 8 entries an expert or more as products of tiles of one expert's entries (of 32
  where they average 32 or more); the same products as the reference, x shared by a token's slots or one a slot, at a
  concrete and a symbolic chunk length."""
  K, N = QUANT_FORMATS[typ].block, 24
  gf, W = expert_file(tmp_path, [("e", typ, (K, N, E))])
  ex = QuantizedExpertWeights.from_gguf(gf, "e")
  ex.kernels = "generated"
  rng = np.random.default_rng(3)
  sel = rng.integers(0, E, (B, J)).astype(np.int32)
  for x in (rng.standard_normal((B, K)).astype(np.float32), rng.standard_normal((B, J, K)).astype(np.float32)):
    assert relerr(ex(Tensor(sel), Tensor(x)).numpy(), expert_ref(W["e"], sel, x)) < fp32_bound(K)   # x as it is: no kernel rounds it
  v, t = UOp.variable("n_tokens", 1, B), 17
  xb = Tensor(rng.standard_normal((B, J, K)).astype(np.float32)).realize()
  y = ex(Tensor(sel)[:v.bind(t)], xb[:v.bind(t)])
  out = y.pad(((0, B - y.shape[0]), None, None)).numpy()[:t]
  assert relerr(out, expert_ref(W["e"], sel[:t], xb.numpy()[:t])) < fp32_bound(K)

# ---------------------------------------------------------------- embedding and small tensors

@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q6_K, GGMLType.Q8_0, GGMLType.F16, GGMLType.BF16, GGMLType.Q5_1])
def test_embedding_rows(tmp_path, typ):
  dim = QUANT_FORMATS[typ].block if typ in QUANT_FORMATS else 24
  vocab = 11
  gf, W = expert_file(tmp_path, [("token_embd.weight", typ, (dim, vocab))])
  emb = QuantizedEmbedding.from_gguf(gf, "token_embd.weight")
  ids = np.array([[3, 10, 3], [0, 7, 1]], dtype=np.int32)
  out = emb(Tensor(ids)).numpy()
  assert out.shape == (2, 3, dim)
  assert np.array_equal(out, W["token_embd.weight"][ids].astype(np.float32))

def test_load_tensor_small(tmp_path):
  specs = [("norm", GGMLType.F32, (48,)), ("router", GGMLType.F16, (32, 4)), ("bias", GGMLType.BF16, (16,)), ("q", GGMLType.Q8_0, (32, 2))]
  gf, W = expert_file(tmp_path, specs, seed=9)
  for name, typ, ne in specs:
    t = load_tensor(gf, name)
    assert t.shape == tuple(reversed(ne))
    assert t.dtype == (dtypes.float16 if typ == GGMLType.F16 else dtypes.float32)
    assert np.array_equal(t.numpy().astype(np.float64), W[name])
  assert load_tensor(gf, "router", dtype=dtypes.float32).dtype == dtypes.float32

# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("typ", [GGMLType.IQ2_XXS, GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.IQ4_XS])
def test_unsupported_type_names_tensor_and_type(tmp_path, typ):
  bs, nbytes = BLOCK[typ]
  path = tmp_path / "bad.gguf"
  write_gguf(path, [("blk.0.ffn_down.weight", (bs, 2), typ, np.zeros(2 * nbytes, np.uint8))])
  with pytest.raises(GGUFError, match=rf"'blk\.0\.ffn_down\.weight'.*{typ.name}"):
    QuantizedLinear.from_gguf(GGUFFile(path), "blk.0.ffn_down.weight")

def test_shape_errors(tmp_path):
  with pytest.raises(GGUFError, match=r"'w'.*row length 48 is not a multiple of the Q4_0 block size 32"):
    PackedTensor.from_bytes(np.zeros(3 * 18, np.uint8), GGMLType.Q4_0, (48, 2), name="w")
  with pytest.raises(GGUFError, match=r"'w' has 10 bytes"):
    PackedTensor.from_bytes(np.zeros(10, np.uint8), GGMLType.Q4_0, (32, 1), name="w")
  gf, _ = expert_file(tmp_path, [("lin", GGMLType.Q4_0, (64, 3)), ("exps", GGMLType.Q4_0, (64, 3, 2)), ("exps2", GGMLType.Q4_0, (32, 3, 2))])
  lin = QuantizedLinear.from_gguf(gf, "lin")
  with pytest.raises(ValueError, match="in_features=64"): lin(Tensor.zeros(1, 32))
  with pytest.raises(GGUFError, match="expected 2"): QuantizedLinear.from_gguf(gf, "exps")
  with pytest.raises(GGUFError, match="expected 3"): QuantizedExpertWeights.from_gguf(gf, "lin")
  with pytest.raises(GGUFError, match="cannot merge"): QuantizedExpertWeights.from_gguf(gf, ["exps", "exps2"])
  ex = QuantizedExpertWeights.from_gguf(gf, "exps")
  with pytest.raises(ValueError, match="int tensor"): ex(Tensor.zeros(1, 2), Tensor.zeros(1, 64))
  with pytest.raises(ValueError, match="fits neither"): ex(Tensor.zeros(1, 2, dtype=dtypes.int32), Tensor.zeros(3, 64))
  with pytest.raises(ValueError, match="n_expert, in"): ex.batched(Tensor.zeros(1, 3, 64))
  with pytest.raises(GGUFError, match="missing required tensor 'nope'"): QuantizedLinear.from_gguf(gf, "nope")

# ---------------------------------------------------------------- the seam

def test_kernel_seam_takes_registered_kernels():
  dev = Device.DEFAULT.split(":")[0]  # the test device (a GPU machine may have no compiler for tinygrad's CPU device)
  spec = KernelSpec("linear", format_for(GGMLType.Q4_0, 64), 1, 1, 3, 64, 1, False, False, dev)
  assert kernel_for(spec) is not None
  sentinel = lambda *srcs: None
  register_kernel(lambda s: sentinel if s.fmt.type == GGMLType.Q4_0 and s.op == "linear" and s.device == dev else None)
  try:
    assert kernel_for(spec) is sentinel
    assert kernel_for(KernelSpec("linear", format_for(GGMLType.Q8_0, 64), 1, 1, 3, 64, 1, False, False, dev)) is not sentinel
  finally: D._PROVIDERS.pop(0)

# ---------------------------------------------------------------- memory

def test_load_memory_within_file_size(tmp_path):
  """Every quantized and float tensor of a small GGUF loaded packed: device memory <= 1.1 x the file's tensor bytes,
  host staging freed, nothing dequantized."""
  import gc
  specs = [(f"lin.{t.name}", t, ((QUANT_FORMATS[t].block if t in QUANT_FORMATS else 8) * 4, 24)) for t in ALL]
  specs += [("exps.gate", GGMLType.Q4_0, (64, 16, 8)), ("exps.up", GGMLType.Q4_0, (64, 16, 8)), ("exps.down", GGMLType.Q6_K, (256, 8, 8)),
            ("token_embd", GGMLType.Q8_0, (64, 40)), ("norm", GGMLType.F32, (64,))]
  gf, _ = expert_file(tmp_path, specs)
  file_tensor_bytes = sum(i.nbytes for i in gf.tensors.values())
  dev = Device.DEFAULT
  gc.collect()
  base_dev, base_all = GlobalCounters.mem_used_per_device[dev], GlobalCounters.mem_used
  peak = 0
  loaded = []
  for name, _, _ in specs:
    if name.startswith("lin."): loaded.append(QuantizedLinear.from_gguf(gf, name))
    elif name == "token_embd": loaded.append(QuantizedEmbedding.from_gguf(gf, name))
    elif name == "norm": loaded.append(load_tensor(gf, name))
    elif name == "exps.gate": loaded.append(QuantizedExpertWeights.from_gguf(gf, ["exps.gate", "exps.up"]))
    elif name == "exps.down": loaded.append(QuantizedExpertWeights.from_gguf(gf, name))
    peak = max(peak, GlobalCounters.mem_used_per_device[dev] - base_dev)
  gc.collect()
  used = GlobalCounters.mem_used_per_device[dev] - base_dev
  assert used <= 1.1 * file_tensor_bytes, (used, file_tensor_bytes)
  assert peak <= 1.1 * file_tensor_bytes
  assert GlobalCounters.mem_used - base_all == used  # host staging (NPY buffers) is gone
  assert used >= 0.95 * file_tensor_bytes  # and it is really all there

# ---------------------------------------------------------------- CUDA render + compile

CUDA_SCRIPT = r"""
import apps
from apps.gguf import GGMLType
from apps.quantized import *
from apps.packed import *
from tinygrad import Tensor, dtypes, GlobalCounters
def empty_packed(typ, ne):
  fmt = format_for(typ, ne[0]); rows = tuple(reversed(ne[1:])); nb = ne[0] // fmt.block
  return PackedTensor(fmt, rows, ne[0], {n: Tensor.empty(*rows, nb, c, dtype=dt) for n, dt, c in fmt.parts})
outs = []
for typ in [GGMLType[t] for t in "%s".split(",")]:
  K = 512 if typ in QUANT_FORMATS and QUANT_FORMATS[typ].block == 256 else 96
  outs.append(QuantizedLinear(empty_packed(typ, (K, 37)))(Tensor.empty(1, K)))
  outs.append(QuantizedLinear(empty_packed(typ, (K, 36)))(Tensor.empty(4, K, dtype=dtypes.float16)))
  ex = QuantizedExpertWeights([empty_packed(typ, (K, 40, 8))], [40])
  outs.append(ex(Tensor.empty(1, 4, dtype=dtypes.int32), Tensor.empty(1, K)))
  outs.append(ex(Tensor.empty(2, 4, dtype=dtypes.int32), Tensor.empty(2, 4, K)))
  outs.append(ex.batched(Tensor.empty(3, 8, K)))
  outs.append(dequantize_rows(empty_packed(typ, (K, 9)), Tensor.empty(2, 3, dtype=dtypes.int32)))
GlobalCounters.reset()
Tensor.realize(*outs)
print("KERNELS", GlobalCounters.kernel_count, len(outs))
"""

@pytest.mark.slow  # ~30 s each: nvcc compiles ~35 kernels
@needs_nvcc
@pytest.mark.parametrize("types", [["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"], ["Q4_K", "Q5_K", "Q6_K", "F32", "F16", "BF16"]], ids=["32", "256+float"])
def test_cuda_kernels_compile(types):
  n_kernels, n_outs = map(int, run_nvcc_script(CUDA_SCRIPT % ",".join(types)).split("KERNELS")[1].split())
  assert n_kernels == n_outs  # every op is exactly one kernel, on CUDA too

def test_to_bound_reads_a_sliced_output_in_place():
  """A kernel's output sliced back to a symbolic chunk length T goes to the next kernel as the unsliced buffer (its rows past
  T are whatever that kernel left there: no padded copy, no kernel); anything else is padded with zero rows."""
  from apps.kernels import to_bound
  T = UOp.variable("n_tokens", 1, 16).bind(5)
  y = (Tensor.arange(16 * 12).reshape(16, 3, 4).float() + 1).contiguous().realize()
  (a,), B, Bmax = to_bound(y[:T].reshape(T, 12))
  assert Bmax == 16 and B is T and a.shape == (16, 12)
  assert a.uop.op is Ops.RESHAPE and a.uop.src[0] is y.uop    # y itself, reshaped
  np.testing.assert_array_equal(a.numpy(), y.numpy().reshape(16, 12))   # rows 5.. are y's own, not zeros
  yn = y.numpy()
  for other, want in (((y[:T] * 2).reshape(T, 12), yn[:5] * 2), (y[1:T + 1].reshape(T, 12), yn[1:6]),   # computed, offset,
                      (y[:T, :2].reshape(T, 8), yn[:5, :2])):                                                # narrowed
    (b,), _, _ = to_bound(other)
    got = b.numpy()
    assert b.shape[0] == 16 and not got[5:].any()
    np.testing.assert_array_equal(got[:5], want.reshape(5, -1))

# ---------------------------------------------------------------- block products in integers (generated path, int8 tensor cores)

@pytest.mark.parametrize("typ", BLOCK_PRODUCT_TYPES, ids=lambda t: t.name)
def test_block_product_against_x24(typ):
  # x rounded to 24 bits a block as the hand-written integer kernels round it, times the blocks' quants, scales and mins
  # (a K-quant's from its nibble and high-bit planes)
  rng = np.random.default_rng(11)
  T, K, N = 37, 96 if BLOCK[typ][0] == 32 else 512, 20
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  x = rng.standard_normal((T, K)).astype(np.float32)
  x[3, 32:64] = 0   # a block of zeros: scale 0
  out = block_product(PackedTensor.from_bytes(raw, typ, (K, N)), Tensor(x)).numpy()
  assert out.shape == (T, N) and relerr(out, x24(x) @ W.T) < fp32_bound(K)

def test_block_product_a_weight_a_head():
  # rows (J, N): head j's rows of x times weight j (attn_k_b / attn_v_b of a chunk), x rounded as block_product rounds it
  rng = np.random.default_rng(13)
  J, N, K, T = 3, 24, 64, 20
  raw = random_tensor(GGMLType.Q4_0, (K, N, J), rng)
  W = ref_weight(raw, GGMLType.Q4_0, (K, N, J)).astype(np.float64)
  x = rng.standard_normal((T, J, K)).astype(np.float32)
  out = block_product(PackedTensor.from_bytes(raw, GGMLType.Q4_0, (K, N, J)), Tensor(x)).numpy()
  assert out.shape == (T, J, N) and relerr(out, np.einsum("tjk,jnk->tjn", x24(x), W)) < fp32_bound(K)

@pytest.mark.parametrize("typ", (GGMLType.Q8_0, GGMLType.Q5_K, GGMLType.Q6_K), ids=lambda t: t.name)
def test_block_product_normed(typ):
  # norm=(w, eps): rms_norm(x) * w as block_product rounds x, the rows' 1 / rms in x's block scales (and in its block sums,
  # which the mins take)
  rng = np.random.default_rng(14)
  T, K, N, eps = 21, 96 if typ == GGMLType.Q8_0 else 256, 20, 1e-6
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  x, nw = rng.standard_normal((T, K)).astype(np.float32) * 3, rng.standard_normal(K).astype(np.float32)
  xn = (x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps) * nw).astype(np.float32)
  out = block_product(PackedTensor.from_bytes(raw, typ, (K, N)), Tensor(x), (Tensor(nw), eps)).numpy()
  assert out.shape == (T, N) and relerr(out, x24(xn) @ W.T) < fp32_bound(K)

@pytest.mark.parametrize("typ", TILE_BLOCK_PRODUCT_TYPES, ids=lambda t: t.name)
def test_tile_block_product_against_x24(typ):
  # tiles of rows, each times its own expert's weight (experts repeated, one unused), x rounded as block_product rounds it
  rng = np.random.default_rng(12)
  E, N, K, T, TL = 4, 24, 96, 5, 16
  raw = random_tensor(typ, (K, N, E), rng)
  W = ref_weight(raw, typ, (K, N, E)).astype(np.float64)
  x = rng.standard_normal((T, TL, K)).astype(np.float32)
  ex = np.array([2, 0, 0, 3, 2], np.int32)
  out = tile_block_product(PackedTensor.from_bytes(raw, typ, (K, N, E)), Tensor(x), Tensor(ex)).numpy()
  assert out.shape == (T, TL, N) and relerr(out, np.einsum("trk,tnk->trn", x24(x), W[ex])) < fp32_bound(K)

BLOCK_PRODUCT_ON_TENSOR_CORES = """
import numpy as np, apps
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quantized import QuantizedLinear, int8_tensor_cores
from tinygrad import Tensor, Variable, dtypes
from tinygrad.codegen import to_program_cache
from tinygrad.uop.ops import Ops
from tools.bench_quantized import random_raw
from apps.quants import dequantize
rng = np.random.default_rng(0)
T, K, N = 64, 64, 16
raw = random_raw(GGMLType.Q4_0, N * K, rng)
lin = QuantizedLinear(PackedTensor.from_bytes(raw, GGMLType.Q4_0, (K, N)))
lin.kernels = "generated"
x = rng.standard_normal((T, K)).astype(np.float32)
ref = x.astype(np.float64) @ dequantize(raw, GGMLType.Q4_0).reshape(N, K).astype(np.float64).T
out = lin(Tensor(x)).numpy()
assert int8_tensor_cores("PYTHON") and np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-6
# a chunk of a symbolic 40 of 64 tokens, as a captured prefill runs it: the product is made over the chunk's bound, every
# program that has the int8 tensor cores over constant ranges (its result sliced back would shrink it to the symbolic rows)
to_program_cache.clear()
n = Variable("n_tokens", 1, T).bind(40)
y = lin(Tensor(x)[:n] * 1.0)
got = (y.pad(((0, T - n), (0, 0))) + 0).contiguous().realize().numpy()[:40]
assert np.linalg.norm(got - ref[:40]) / np.linalg.norm(ref[:40]) < 1e-6
tc = [p for p in to_program_cache.values() if any(u.op is Ops.WMMA and u.src[0].dtype == dtypes.int8 for u in p.toposort())]
assert tc and not any(u.op is Ops.PARAM and getattr(u.arg, "name", None) for p in tc for u in p.toposort()), len(tc)   # no variable
# normed: rms_norm(x) * w first, the rows' 1 / rms in x's block scales
nw, eps = rng.standard_normal(K).astype(np.float32), 1e-6
xn = x.astype(np.float64) / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps) * nw
refn = xn @ dequantize(raw, GGMLType.Q4_0).reshape(N, K).astype(np.float64).T
outn = lin(Tensor(x), norm=(Tensor(nw), eps)).numpy()
assert np.linalg.norm(outn - refn) / np.linalg.norm(refn) < 1e-6
# K-quants (a scale and a min a sub-block; Q6_K's two scales a block): the tensor cores take their blocks too
for typ in (GGMLType.Q5_K, GGMLType.Q6_K):
  rawk = random_raw(typ, N * 256, rng)
  link = QuantizedLinear(PackedTensor.from_bytes(rawk, typ, (256, N)))
  link.kernels = "generated"
  xk = rng.standard_normal((T, 256)).astype(np.float32)
  refk = xk.astype(np.float64) @ dequantize(rawk, typ).reshape(N, 256).astype(np.float64).T
  to_program_cache.clear()
  outk = link(Tensor(xk)).numpy()
  assert np.linalg.norm(outk - refk) / np.linalg.norm(refk) < 1e-6, typ
  assert any(u.op is Ops.WMMA and u.src[0].dtype == dtypes.int8 for p in to_program_cache.values() for u in p.toposort()), typ
# a weight a head (attn_k_b / attn_v_b of a chunk): head j's rows times weight j
from apps.quantized import QuantizedExpertWeights
H = 3
rawh = random_raw(GGMLType.Q4_0, H * N * K, rng)
hw = QuantizedExpertWeights([PackedTensor.from_bytes(rawh, GGMLType.Q4_0, (K, N, H))], [N])
hw.kernels = "generated"
xh = rng.standard_normal((T, H, K)).astype(np.float32)
to_program_cache.clear()
outh = hw.batched(Tensor(xh)).numpy()
refh = np.einsum("thk,hnk->thn", xh.astype(np.float64), dequantize(rawh, GGMLType.Q4_0).reshape(H, N, K).astype(np.float64))
assert outh.shape == (T, H, N) and np.linalg.norm(outh - refh) / np.linalg.norm(refh) < 1e-6
assert any(u.op is Ops.WMMA and u.src[0].dtype == dtypes.int8 for p in to_program_cache.values() for u in p.toposort())
# a chunk's routed entries in tiles an expert (24 tokens, 2 of 4 experts each): the tiles' products on the int8 tensor cores
E, B, J = 4, 24, 2
rawe = random_raw(GGMLType.Q4_0, E * N * K, rng)
ew = QuantizedExpertWeights([PackedTensor.from_bytes(rawe, GGMLType.Q4_0, (K, N, E))], [N])
ew.kernels = "generated"
sel = rng.integers(0, E, (B, J)).astype(np.int32)
xe = rng.standard_normal((B, K)).astype(np.float32)
to_program_cache.clear()
oute = ew(Tensor(sel), Tensor(xe)).numpy()
We = dequantize(rawe, GGMLType.Q4_0).reshape(E, N, K).astype(np.float64)
refe = np.einsum("bk,bjnk->bjn", xe.astype(np.float64), We[sel])
assert np.linalg.norm(oute - refe) / np.linalg.norm(refe) < 1e-6
assert any(u.op is Ops.WMMA and u.src[0].dtype == dtypes.int8 for p in to_program_cache.values() for u in p.toposort())
print("ok")
"""

def test_generated_chunk_product_on_int8_tensor_cores():
  # a chunk's Q4_0 products on the generated path (a linear one, normed or not; a weight a head; routed experts' tiles) and
  # K-quant ones, on the sm_80 emulator: the int8 tensor cores take their blocks
  env = {**os.environ, "DEV": "PYTHON::sm_80", "PARALLEL": "0", "CACHELEVEL": "0", "PYTHONPATH": str(Path(__file__).parent.parent)}
  r = subprocess.run([sys.executable, "-c", BLOCK_PRODUCT_ON_TENSOR_CORES], env=env, capture_output=True, text=True, timeout=600)
  assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr

def test_layer_opts_reach_the_generated_kernel():
  """QuantizedLinear.opts (a measurement's variant: tools.bench_quantized --opts) are the generated product's opts, in its
  spec (so each variant is its own kernel): a variant that cannot apply fails, one that can gives the same product."""
  from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
  rng = np.random.default_rng(3)
  K, N = 256, 64
  raw = random_tensor(GGMLType.Q4_0, (K, N), rng)
  x = Tensor(rng.standard_normal((1, K)).astype(np.float32))
  w = QuantizedLinear(PackedTensor.from_bytes(raw, GGMLType.Q4_0, (K, N)))
  w.kernels = "generated"
  ref = w(x).numpy()
  w.opts = (Opt(OptOps.UPCAST, 0, 4),)
  np.testing.assert_allclose(w(x).numpy(), ref, rtol=1e-5, atol=1e-5)
  w.opts = (Opt(OptOps.UPCAST, 0, 7),)
  with pytest.raises(KernelOptError): w(x).realize()
