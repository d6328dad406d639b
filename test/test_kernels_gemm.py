"""The prefill GEMM (apps/kernels/gemm.py): its rendered CUDA and Metal sources RUN on the dialect's CPU emulator against
gguf-py's dequantization in float64 (token and row counts that are not multiples of the 64 x 64 tile, several k blocks),
the CUDA source compiles with nvcc here, apps/quantized.py's seam gives it the prefill products of CUDA and Metal devices
(the decode matvecs keep B <= 4), and on such a device it serves QuantizedLinear's prefill products at the fp32 bound."""
import numpy as np
from dataclasses import replace
from pathlib import Path
import pytest
from tinygrad import Tensor, Device, dtypes
from tinygrad.uop.ops import UOp, KernelInfo
from apps.gguf import GGMLType, BLOCK
import apps.dispatch as D
from apps.quantized import QuantizedLinear, QuantizedExpertWeights
from apps.packed import PackedTensor, format_for
from apps.dispatch import KernelSpec
from apps.kernels import gemm, render, language_of
from test_quantized import random_tensor, ref_weight, relerr, fp32_bound, x24, near_tie_case, top_k_sets
from nvcc import needs_nvcc, run_nvcc_script, sm90_registers
from emulator import emulate

TYPES = list(gemm.TYPES)

def k_of(typ, blocks: int) -> int:
  """K of `blocks` packed blocks of typ (a K-quant's are 256 weights: 8 steps each)."""
  return blocks * BLOCK[typ][0]

def emulated(typ, T, N, K, language, work, seed=0, tile=None):
  rng = np.random.default_rng(seed)
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  x = rng.standard_normal((T, K)).astype(np.float32)
  fmt, host = PackedTensor.pack_host(raw, typ, (K, N))
  out = np.full((T, N), np.nan, np.float32)
  emulate(gemm.build(gemm.GemmShape(typ, T, N, K), tile), language, [out, x] + [np.ascontiguousarray(host[p]) for p, _, _ in fmt.parts], work)
  return out, x.astype(np.float64) @ W.T

@pytest.mark.parametrize("typ", TYPES, ids=lambda t: t.name)
def test_emulated_cuda(tmp_path, typ):
  """Partial tiles in both directions (70 tokens, 72 rows: a second workgroup row and column mostly out of range), several
  blocks (every sub-block of a K-quant's two), each dense tile (16, 32 or 64 tokens by 64 rows)."""
  K = k_of(typ, 3 if BLOCK[typ][0] == 32 else 2)
  for tt in (16, 32, 64):
    out, ref = emulated(typ, 70, 72, K, "CUDA", tmp_path / str(tt), tile=(tt, 64))
    assert relerr(out, ref) < fp32_bound(K), (tt, relerr(out, ref))

def expert_case(typ, T, J, E, N, K, per_slot, sel, seed=0, seen=lambda v: v.astype(np.float64)):
  """Buffers (out, x, sel, *parts) of a routed-expert product and its reference, x as `seen` turns it into float64."""
  rng = np.random.default_rng(seed)
  raw = random_tensor(typ, (K, N, E), rng)
  W = ref_weight(raw, typ, (K, N, E)).astype(np.float64)                     # (E, N, K)
  x = rng.standard_normal((T, J, K) if per_slot else (T, K)).astype(np.float32)
  xv = seen(x)
  xs = xv if per_slot else np.broadcast_to(xv[:, None], (T, J, K))
  ref = np.einsum("tjnk,tjk->tjn", W[np.clip(sel, 0, E - 1)], xs)
  fmt, host = PackedTensor.pack_host(raw, typ, (K, N, E))
  return [np.full((T, J, N), np.nan, np.float32), x, sel.astype(np.int32)] + [np.ascontiguousarray(host[p]) for p, _, _ in fmt.parts], ref

@pytest.mark.parametrize("typ", TYPES, ids=lambda t: t.name)
def test_emulated_experts(tmp_path, typ):
  """Routed experts: 150 tokens x 2 slots (two scan steps of 256 entries), expert 1 chosen 85 times (two tiles), expert 3
  by nobody, a repeated expert within a token, ids out of range clamped; x shared by the slots, then one row per slot."""
  T, J, E, N, K = 150, 2, 4, 40, k_of(typ, 2 if BLOCK[typ][0] == 32 else 1)
  sel = np.zeros((T, J), np.int64)
  sel[:, 0], sel[:, 1] = 1, np.arange(T) % 3 - 1      # slot 1: 2 (-1 clamps to 0), 0, 1, ...; expert 3 unused
  sel[5] = [2, 2]
  for per_slot in (False, True):
    bufs, ref = expert_case(typ, T, J, E, N, K, per_slot, sel, seed=int(per_slot))
    emulate(gemm.build(gemm.GemmShape(typ, T, N, K, J, E, per_slot)), "CUDA", bufs, tmp_path / str(per_slot))
    assert relerr(bufs[0], ref) < fp32_bound(K), (per_slot, relerr(bufs[0], ref))

def test_emulated_experts_metal(tmp_path):
  """The experts' listing (a warp's prefix sum by simdgroup shuffles) in the Metal rendering: 150 tokens x 2 slots as above."""
  typ, T, J, E, N, K = GGMLType.Q4_0, 150, 2, 4, 40, 64
  sel = np.stack([np.ones(T, np.int64), np.arange(T) % 3 - 1], 1)
  bufs, ref = expert_case(typ, T, J, E, N, K, False, sel, seed=2)
  emulate(gemm.build(gemm.GemmShape(typ, T, N, K, J, E)), "METAL", bufs, tmp_path)
  assert relerr(bufs[0], ref) < fp32_bound(K), relerr(bufs[0], ref)

def test_emulated_residual(tmp_path):
  """out = W . x + residual: the residual added in the store (a layer's residual add at prefill, no kernel of its own)."""
  typ, T, N, K = GGMLType.Q4_0, 70, 72, 96
  rng = np.random.default_rng(6)
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  x, res = rng.standard_normal((T, K)).astype(np.float32), rng.standard_normal((T, N)).astype(np.float32)
  fmt, host = PackedTensor.pack_host(raw, typ, (K, N))
  out = np.full((T, N), np.nan, np.float32)
  emulate(gemm.build(gemm.GemmShape(typ, T, N, K, residual=True)), "CUDA", [out, x, res] + [np.ascontiguousarray(host[p]) for p, _, _ in fmt.parts],
          tmp_path)
  ref = x.astype(np.float64) @ W.T + res
  assert relerr(out, ref) < fp32_bound(K), relerr(out, ref)

@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q6_K], ids=lambda t: t.name)
def test_emulated_batched(tmp_path, typ):
  """Every slot its own expert (MLA's k_b / v_b at prefill): out[t, j] = W[j] . x[t, j], 70 tokens (a partial second tile)."""
  T, J, N, K = 70, 3, 72, k_of(typ, 2 if BLOCK[typ][0] == 32 else 1)
  sel = np.broadcast_to(np.arange(J), (T, J))
  bufs, ref = expert_case(typ, T, J, J, N, K, True, sel, seed=5)
  del bufs[2]                                                                # no sel
  emulate(gemm.build(gemm.GemmShape(typ, T, N, K, J, J, True, batched=True)), "CUDA", bufs, tmp_path)
  assert relerr(bufs[0], ref) < fp32_bound(K), relerr(bufs[0], ref)

@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q6_K], ids=lambda t: t.name)
def test_emulated_metal(tmp_path, typ):
  K = k_of(typ, 2 if BLOCK[typ][0] == 32 else 1)
  out, ref = emulated(typ, 9, 40, K, "METAL", tmp_path, seed=1)
  assert relerr(out, ref) < fp32_bound(K), relerr(out, ref)

# ---- the tensor-core GEMM (CUDA sm_80+): x quantized by build_xq, then integer mma.sync; references x24(x) @ W

def xq_records(x: np.ndarray, work: Path) -> np.ndarray:
  """build_xq's records of x (rows, K), emulated."""
  R, K = x.shape
  xq = np.zeros(K // 32 * R * gemm.XQ_WORDS, np.uint32)
  emulate(gemm.build_xq(R, K), "CUDA", [xq, np.ascontiguousarray(x)], work / "xq")
  return xq

def test_emulated_xq_records(tmp_path):
  """Every block of 32 x values of a row: dx = max |x| / 8323072 and X = round(x / dx) (x24's), split into signed bytes h,
  m, l with X = 65536 h + 256 m + l, the words at the fragment quad's places, the sums of X over k 0..15 and 16..31; a zero
  block."""
  R, K = 5, 96
  x = np.random.default_rng(2).standard_normal((R, K)).astype(np.float32) * np.float32([[1e-3], [1], [30], [1e4], [1]])
  x[4, 32:64] = 0
  rec = xq_records(x, tmp_path).reshape(K // 32, R, gemm.XQ_WORDS)
  b = x.reshape(R, K // 32, 32).transpose(1, 0, 2)
  d = rec[..., 16].view(np.float32)
  assert np.array_equal(d, (np.abs(b).max(-1) / np.float32(8323072)).astype(np.float32))
  X = np.rint(np.divide(x24(x).reshape(R, K // 32, 32).transpose(1, 0, 2), d[..., None].astype(np.float64), out=np.zeros(b.shape),
                        where=d[..., None] > 0)).astype(np.int64)
  by = lambda words: np.ascontiguousarray(words).view(np.int8).reshape(*words.shape[:-1], 32).astype(np.int64)  # 8 words -> 32 bytes
  # word w (k 4w ..) belongs to quad lane w % 4
  h, m, l = rec[..., [0, 4, 8, 12, 1, 5, 9, 13]], rec[..., [2, 6, 10, 14, 3, 7, 11, 15]], rec[..., [20, 22, 24, 26, 21, 23, 25, 27]]
  assert np.array_equal(65536 * by(h) + 256 * by(m) + by(l), X) and (np.abs(by(h)) <= 127).all()
  assert np.array_equal(rec[..., 17].view(np.int32), X[..., :16].sum(-1)) and np.array_equal(rec[..., 18].view(np.int32), X[..., 16:].sum(-1))
  assert (X[1, 4] == 0).all() and d[1, 4] == 0

def test_emulated_xq_records_normed(tmp_path):
  """rms-normed rows: X and the sums of X are those of x * norm_w (its own max per block), and dx carries the row's
  1 / rms (over all K, float64 within fp32's bound); K of 1.5, 2 and 6 rounds of the workgroup's 256 float4s, a zero block."""
  rng, eps = np.random.default_rng(4), 1e-6
  for K in (1536, 2048, 6144):
    R = 3
    x = (rng.standard_normal((R, K)) * np.float32([[1e-3], [1], [300]])).astype(np.float32)
    g = (1 + 0.5 * rng.standard_normal(K)).astype(np.float32)
    x[2, 64:96] = 0
    normed = np.zeros(K // 32 * R * gemm.XQ_WORDS, np.uint32)
    emulate(gemm.build_xq(R, K, eps), "CUDA", [normed, x, g], tmp_path / f"n{K}")
    plain = xq_records((x * g).astype(np.float32), tmp_path / f"p{K}")
    got, want = normed.reshape(K // 32, R, gemm.XQ_WORDS), plain.reshape(K // 32, R, gemm.XQ_WORDS)
    words = [w for w in range(gemm.XQ_WORDS) if w != 16]
    assert np.array_equal(got[..., words], want[..., words]), K   # the integers and their sums: x * norm_w's
    rs = 1 / np.sqrt((x.astype(np.float64) ** 2).mean(-1) + eps)
    d, dn = want[..., 16].view(np.float32).astype(np.float64), got[..., 16].view(np.float32).astype(np.float64)
    assert np.allclose(dn, d * rs[None, :], rtol=fp32_bound(K), atol=0) and (dn[2, 2] == 0), K

def test_emulated_xq_records_of_strided_rows(tmp_path):
  """Rows `stride` apart (a stacked output's first K of each: q_b's input in [q_a; kv_a], k_b's q_nope in q) give the records
  of those K columns, plain and rms-normed (the norm over the K columns only)."""
  R, K, XS, eps = 6, 96, 136, 1e-6
  rng = np.random.default_rng(3)
  x, g = rng.standard_normal((R, XS)).astype(np.float32), rng.standard_normal(K).astype(np.float32)
  for e, extra in ((None, []), (eps, [g])):
    got, want = (np.zeros(K // 32 * R * gemm.XQ_WORDS, np.uint32) for _ in range(2))
    emulate(gemm.build_xq(R, K, e, XS), "CUDA", [got, x] + extra, tmp_path / f"s{e}")
    emulate(gemm.build_xq(R, K, e), "CUDA", [want, np.ascontiguousarray(x[:, :K])] + extra, tmp_path / f"c{e}")
    assert np.array_equal(got, want), e

def test_emulated_xq_records_of_glu_slices(tmp_path):
  """A split SwiGLU product's slices (S, rows, [gate; up]) give the records of x = silu(sum gate) * sum up, the slices added
  in order in fp32: X = round(x / dx) of x in fp32 (against float64: within its rounding), dx that of x's block max."""
  S, R, K = 4, 6, 96
  part = (np.random.default_rng(5).standard_normal((S, R, 2 * K)) * 3).astype(np.float32)
  got = np.zeros(K // 32 * R * gemm.XQ_WORDS, np.uint32)
  emulate(gemm.build_xq(R, K, glu=S), "CUDA", [got, part], tmp_path / "glu")
  g, u = np.cumsum(part[..., :K], 0, dtype=np.float32)[-1], np.cumsum(part[..., K:], 0, dtype=np.float32)[-1]
  x = g.astype(np.float64) / (1 + np.exp(-g.astype(np.float64))) * u
  rec = got.reshape(K // 32, R, gemm.XQ_WORDS)
  d = rec[..., 16].view(np.float32).astype(np.float64)
  bmax = np.abs(x).reshape(R, K // 32, 32).max(-1).T
  assert np.allclose(d, bmax / 8323072, rtol=1e-6, atol=0)
  by = lambda words: np.ascontiguousarray(words).view(np.int8).reshape(*words.shape[:-1], 32).astype(np.int64)
  h, m, l = rec[..., [0, 4, 8, 12, 1, 5, 9, 13]], rec[..., [2, 6, 10, 14, 3, 7, 11, 15]], rec[..., [20, 22, 24, 26, 21, 23, 25, 27]]
  X = 65536 * by(h) + 256 * by(m) + by(l)
  want = x.reshape(R, K // 32, 32).transpose(1, 0, 2) / d[..., None]
  # round(x32 / dx) for x32 = x evaluated in fp32 (exp, +, /, *: within 4 ulp of x)
  assert (np.abs(X - want) <= 0.5 + 4 * 2.0**-24 * np.abs(want)).all(), np.abs(X - want).max()
  assert np.array_equal(rec[..., 17].view(np.int32), X[..., :16].sum(-1))
  # and the plain x form of that x, rounded to fp32 as the sum kernel leaves it: the same records where its exp rounds alike
  plain = xq_records((g / (np.float32(1) + np.exp(-g)) * u).astype(np.float32), tmp_path / "plain").reshape(rec.shape)
  assert (plain == rec).all(-1).mean() > 0.9

def mma_dense(typ, T, N, K, work, tile, residual=False, seed=0):
  """(out, the float64 product, the x records each workgroup along N copied a K / 32 block of them) of a dense product."""
  rng = np.random.default_rng(seed)
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  x = rng.standard_normal((T, K)).astype(np.float32)
  res = rng.standard_normal((T, N)).astype(np.float32)
  fmt, host = PackedTensor.pack_host(raw, typ, (K, N))
  out = np.full((T, N), np.nan, np.float32)
  k = gemm.build_mma(gemm.GemmShape(typ, T, N, K, residual=residual), tile)
  bufs = [out, xq_records(x, work)] + ([res] if residual else []) + [np.ascontiguousarray(host[p]) for p, _, _ in fmt.parts]
  copied = emulate(k, "CUDA", bufs, work)
  return out, x24(x) @ W.T + (res if residual else 0), copied / (k.global_size[0] * K // 32 * gemm.XQ_VECS * 16)

def test_emulated_mma_keeps_near_tie_routing(tmp_path):
  """The routing after a prefill product is the fp32 routing wherever the router's top-k margin is above fp32 rounding:
  test_quantized.near_tie_case's 37 tokens (a GLM-4.7-Flash-tiny attn_output product, then a router of 8 experts whose
  2nd and 3rd logits of every token are 3e-6 apart). x rounded to 16 bits (two mma) moved the logits by ~1e-5 and flipped
  about half of these choices; at 24 bits the product is fp32-accurate."""
  T, N, K = 37, 256, 256
  raw, x, res, R, h = near_tie_case(21, T, N, K)
  fmt, host = PackedTensor.pack_host(raw, GGMLType.Q4_0, (K, N))
  out = np.full((T, N), np.nan, np.float32)
  emulate(gemm.build_mma(gemm.GemmShape(GGMLType.Q4_0, T, N, K, residual=True)), "CUDA",
          [out, xq_records(x, tmp_path), res] + [np.ascontiguousarray(host[p]) for p, _, _ in fmt.parts], tmp_path)
  assert top_k_sets(out.astype(np.float64) @ R.T) == top_k_sets(h @ R.T)

@pytest.mark.parametrize("typ", TYPES, ids=lambda t: t.name)
def test_emulated_mma(tmp_path, typ):
  """Partial tiles both ways (37 tokens, 72 rows), eight steps of two sub-steps (K = 512), each dense tile (8 .. 64 tokens)."""
  for tt in (8, 16, 64):
    out, ref, _ = mma_dense(typ, 37, 72, 512, tmp_path / str(tt), (tt, 64))
    assert relerr(out, ref) < fp32_bound(512), (tt, relerr(out, ref))

def test_emulated_mma_residual_and_one_sub_step(tmp_path):
  """The residual in the store; K of 3 blocks (one sub-step per step, three steps)."""
  out, ref, _ = mma_dense(GGMLType.Q4_0, 20, 40, 96, tmp_path, None, residual=True, seed=3)
  assert relerr(out, ref) < fp32_bound(96)

@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q4_K, GGMLType.Q6_K], ids=lambda t: t.name)
def test_emulated_mma_experts(tmp_path, typ):
  """Routed experts as test_emulated_experts (an expert with 85 entries: six tiles; one nobody chose), x shared by the
  slots and one row per slot; per head (batched)."""
  T, J, E, N, K = 150, 2, 4, 40, 256
  sel = np.zeros((T, J), np.int64)
  sel[:, 0], sel[:, 1] = 1, np.arange(T) % 3 - 1
  sel[5] = [2, 2]
  for per_slot in (False, True):
    bufs, ref = expert_case(typ, T, J, E, N, K, per_slot, sel, seed=int(per_slot), seen=x24)
    bufs[1] = xq_records(bufs[1].reshape(-1, K), tmp_path / f"x{per_slot}")
    emulate(gemm.build_mma(gemm.GemmShape(typ, T, N, K, J, E, per_slot)), "CUDA", bufs, tmp_path / str(per_slot))
    assert relerr(bufs[0], ref) < fp32_bound(K), (per_slot, relerr(bufs[0], ref))
  T, J = 20, 3
  bufs, ref = expert_case(typ, T, J, J, N, K, True, np.broadcast_to(np.arange(J), (T, J)), seed=5, seen=x24)
  del bufs[2]
  bufs[1] = xq_records(bufs[1].reshape(-1, K), tmp_path / "xb")
  emulate(gemm.build_mma(gemm.GemmShape(typ, T, N, K, J, J, True, batched=True)), "CUDA", bufs, tmp_path / "batched")
  assert relerr(bufs[0], ref) < fp32_bound(K), relerr(bufs[0], ref)

@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q5_K], ids=lambda t: t.name)
def test_emulated_mma_norm_and_glu(tmp_path, typ):
  """A linear product's fusions in the tensor-core kernel: the rms norm in x's quantization (x * norm_w rounded, the row's
  1 / rms in dx, as the decode matvecs do it) and SwiGLU in the store (the W rows [gate; up], a warp's row blocks in pairs);
  the norm alone."""
  T, N, K, eps = 37, 40, 512, 1e-5
  rng = np.random.default_rng(8)
  raw = random_tensor(typ, (K, 2 * N), rng)
  W = ref_weight(raw, typ, (K, 2 * N)).astype(np.float64)
  x, g = rng.standard_normal((T, K)).astype(np.float32), rng.standard_normal(K).astype(np.float32)
  xq = np.zeros(K // 32 * T * gemm.XQ_WORDS, np.uint32)
  emulate(gemm.build_xq(T, K, eps), "CUDA", [xq, x, g], tmp_path / "xq")
  fmt, host = PackedTensor.pack_host(raw, typ, (K, 2 * N))
  parts = [np.ascontiguousarray(host[p]) for p, _, _ in fmt.parts]
  x64 = x.astype(np.float64)
  y = x24(x * g) / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps) @ W.T
  out = np.full((T, N), np.nan, np.float32)
  emulate(gemm.build_mma(gemm.GemmShape(typ, T, N, K, glu=True)), "CUDA", [out, xq] + parts, tmp_path / "glu")
  assert relerr(out, y[:, :N] / (1 + np.exp(-y[:, :N])) * y[:, N:]) < 4 * fp32_bound(K)
  out = np.full((T, 2 * N), np.nan, np.float32)
  emulate(gemm.build_mma(gemm.GemmShape(typ, T, 2 * N, K)), "CUDA", [out, xq] + parts, tmp_path / "norm")
  assert relerr(out, y) < 4 * fp32_bound(K)

@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q5_K], ids=lambda t: t.name)
def test_emulated_mma_experts_norm_and_glu(tmp_path, typ):
  """A routed-expert product's fusions (a prefill chunk's gate_up): x shared by the slots, rms-normed in its quantization,
  each expert's rows [gate; up] and SwiGLU in the store; both expert tiles (a warp's gate and up row blocks in pairs)."""
  T, J, E, N, K, eps = 150, 2, 4, 40, 256, 1e-5
  sel = np.zeros((T, J), np.int64)
  sel[:, 0], sel[:, 1] = 1, np.arange(T) % 3 - 1
  sel[5] = [2, 2]
  rng = np.random.default_rng(11)
  raw = random_tensor(typ, (K, 2 * N, E), rng)
  W = ref_weight(raw, typ, (K, 2 * N, E)).astype(np.float64)                 # (E, 2N, K)
  x, g = rng.standard_normal((T, K)).astype(np.float32), rng.standard_normal(K).astype(np.float32)
  xq = np.zeros(K // 32 * T * gemm.XQ_WORDS, np.uint32)
  emulate(gemm.build_xq(T, K, eps), "CUDA", [xq, x, g], tmp_path / "xq")
  x64 = x.astype(np.float64)
  xn = x24(x * g) / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps)
  y = np.einsum("tjnk,tk->tjn", W[np.clip(sel, 0, E - 1)], xn)
  want = y[..., :N] / (1 + np.exp(-y[..., :N])) * y[..., N:]
  fmt, host = PackedTensor.pack_host(raw, typ, (K, 2 * N, E))
  parts = [np.ascontiguousarray(host[p]) for p, _, _ in fmt.parts]
  for tile in ((64, 128), (16, 256)):
    out = np.full((T, J, N), np.nan, np.float32)
    emulate(gemm.build_mma(gemm.GemmShape(typ, T, N, K, J, E, False, glu=True), tile), "CUDA", [out, xq, sel.astype(np.int32)] + parts,
            tmp_path / str(tile[0]))
    assert relerr(out, want) < 4 * fp32_bound(K), (tile, relerr(out, want))

@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q8_0, GGMLType.Q4_K, GGMLType.Q6_K], ids=lambda t: t.name)
def test_emulated_mma_split(tmp_path, typ):
  """K in slices (a batched decode step's few tokens): each slice's sums in out (split, T, rows of W), which add up to the
  product; with SwiGLU's rows [gate; up] the slices keep W's row order (the gate and up sums apart, SwiGLU after)."""
  T, N, K = 37, 72, 1024   # 5 tiles of 8 tokens, the last partly empty
  rng = np.random.default_rng(12)
  raw = random_tensor(typ, (K, 2 * N), rng)
  W = ref_weight(raw, typ, (K, 2 * N)).astype(np.float64)
  x = rng.standard_normal((T, K)).astype(np.float32)
  fmt, host = PackedTensor.pack_host(raw, typ, (K, 2 * N))
  parts = [np.ascontiguousarray(host[p]) for p, _, _ in fmt.parts]
  for split, glu in ((2, False), (8, False), (4, True)):
    shape = gemm.GemmShape(typ, T, N if glu else 2 * N, K, glu=glu, split=split)
    out = np.full((split, T, 2 * N), np.nan, np.float32)
    emulate(gemm.build_mma(shape), "CUDA", [out, xq_records(x, tmp_path / f"x{split}")] + parts, tmp_path / f"{split}{glu}")
    assert relerr(out.sum(0), x24(x) @ W.T) < fp32_bound(K), (split, glu)
    assert not np.allclose(out[0], out[1]) and not np.isnan(out).any()   # each slice its own part of K, every slot written

@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q5_K], ids=lambda t: t.name)
def test_emulated_mma_experts_split(tmp_path, typ):
  """A batched decode step's routed experts (a few tokens: split_k's slices of K, mma_tile's narrow tiles): each slice's
  sums in out (split, T, J, rows of W) for every (token, slot) entry, which add up to the product; an expert chosen by
  every token (its 7 or 8 entries one tile of 8; at 20 tokens three tiles of 8), one by nobody, x shared by the slots and
  one row per slot, and [gate; up] rows."""
  J, E, N, K = 3, 5, 72, 1024
  for T, per_slot, glu in ((7, False, False), (7, True, False), (7, False, True), (8, True, False), (20, True, False), (20, False, True)):
    sel = np.stack([np.full(T, 1), np.arange(T) % 3 + 2, (np.arange(T) + 1) % 3 + 2], 1)   # expert 0 unused; 1 every token's
    shape = gemm.split_k(gemm.GemmShape(typ, T, N, K, J, E, per_slot, glu=glu))
    # up to 8 tokens 8 steps of 4 sub-steps in 2 slices; 20 tokens 16 steps of 2 in 4 slices of 8 x 256 tiles (expert 1's 20
    # entries: three tiles)
    assert shape.split == (4 if T > 8 else 2) and gemm.mma_tile(shape) == ((8, 256) if T > 8 else (8, 128 if glu else 64)), shape
    rows = 2 * N if glu else N
    bufs, ref = expert_case(typ, T, J, E, rows, K, per_slot, sel, seed=int(per_slot) + 2 * glu, seen=x24)
    bufs[0] = np.full((shape.split, T, J, rows), np.nan, np.float32)
    bufs[1] = xq_records(bufs[1].reshape(-1, K), tmp_path / f"x{T}{per_slot}{glu}")
    emulate(gemm.build_mma(shape), "CUDA", bufs, tmp_path / f"{T}{per_slot}{glu}")
    assert not np.isnan(bufs[0]).any() and not np.allclose(bufs[0][0], bufs[0][1])   # every entry written, each slice its part
    assert relerr(bufs[0].sum(0), ref) < fp32_bound(K), (per_slot, glu, relerr(bufs[0].sum(0), ref))

def test_emulated_mma_copies_its_entries_records_only(tmp_path):
  """A tile copies the x records of its entries only, never a column past them: every workgroup along N moves K / 32
  records of each entry once (a routed expert of a few tokens fills ~2 of its tile's 8 columns; a dense product's last
  tile 5 of 8), and the product stays right with the columns past the entries never written (the emulator fills
  workgroup memory with NaN)."""
  typ, J, E, N, K = GGMLType.Q5_K, 3, 5, 72, 1024   # Q5_K: never staged, so the kernel's only cp.async copies are x's
  T = 20
  sel = np.stack([np.full(T, 1), np.arange(T) % 3 + 2, (np.arange(T) + 1) % 3 + 2], 1)   # entries 0, 20, 13, 14, 13: 9 tiles of 8
  for per_slot in (False, True):
    s = gemm.split_k(gemm.GemmShape(typ, T, N, K, J, E, per_slot))
    k = gemm.build_mma(s)
    bufs, ref = expert_case(typ, T, J, E, N, K, per_slot, sel, seed=7, seen=x24)
    bufs[0] = np.full((s.split, T, J, N), np.nan, np.float32)
    bufs[1] = xq_records(bufs[1].reshape(-1, K), tmp_path / f"x{per_slot}")
    copied = emulate(k, "CUDA", bufs, tmp_path / str(per_slot))
    assert copied == k.global_size[0] * T * J * (K // 32) * gemm.XQ_VECS * 16, (per_slot, copied)
    assert relerr(bufs[0].sum(0), ref) < fp32_bound(K), per_slot
  out, ref, records = mma_dense(typ, 37, N, 512, tmp_path / "dense", (8, 64), seed=8)
  assert records == 37 and relerr(out, ref) < fp32_bound(512), records

def test_emulated_mma_staged_is_the_register_kernel(tmp_path):
  """A staged kernel (gemm.mma_stages: a few tokens' Q4_0 weights and x records through workgroup memory, STAGES steps in
  flight) stores what the kernel with its weights in registers stores, bit for bit (the same products in the same order):
  routed experts in K slices with [gate; up] rows and x a row a slot, an expert's entries over two 16-token tiles, slices of
  fewer steps than stages in flight, a plain product with its residual. Fails if a stage is read before its copies or
  overwritten while a warp reads it (the emulator runs the first warp ahead, then the last)."""
  typ, J, E, N, K = GGMLType.Q4_0, 3, 5, 72, 512
  rng = np.random.default_rng(31)
  cases = []
  for T, per_slot, glu, split in ((7, False, True, 4), (7, True, False, 0), (20, False, False, 0)):
    sel = np.stack([np.full(T, 1), np.arange(T) % 3 + 2, (np.arange(T) + 1) % 3 + 2], 1)   # expert 1: every token's
    s = gemm.GemmShape(typ, T, N, K, J, E, per_slot, glu=glu)
    s = replace(s, split=split) if split else gemm.split_k(s)
    bufs, _ = expert_case(typ, T, J, E, 2 * N if glu else N, K, per_slot, sel, seed=T + per_slot)
    bufs[0] = np.full((s.split, T, J, 2 * N if glu else N) if s.split > 1 else (T, J, N), np.nan, np.float32)
    bufs[1] = xq_records(bufs[1].reshape(-1, K), tmp_path / f"x{T}{per_slot}")
    cases.append((s, bufs))
  short = False
  raw = random_tensor(typ, (K, N), rng)
  fmt, host = PackedTensor.pack_host(raw, typ, (K, N))
  x = rng.standard_normal((8, K)).astype(np.float32)
  cases.append((gemm.GemmShape(typ, 8, N, K, residual=True), [np.full((8, N), np.nan, np.float32), xq_records(x, tmp_path / "xd"),
                rng.standard_normal((8, N)).astype(np.float32)] + [np.ascontiguousarray(host[p]) for p, _, _ in fmt.parts]))
  for i, (s, bufs) in enumerate(cases):
    tile = gemm.mma_tile(s)
    rule = gemm.STAGES if s.experts and s.T <= 8 else 0   # a batched step's routed experts
    assert gemm.mma_stages(s, tile, gemm._mma_steps(s, tile)) == rule, s
    outs = []
    for stages in (gemm.STAGES, 0):
      b = [a.copy() for a in bufs]
      emulate(gemm.build_mma(s, stages=stages), "CUDA", b, tmp_path / f"{i}{stages}")
      outs.append(b[0])
    assert not np.isnan(outs[0]).any() and np.array_equal(outs[0], outs[1]), (s, np.abs(outs[0] - outs[1]).max())
    if s.split > 1 and s.K // gemm.KB // gemm._mma_steps(s, tile) // s.split < gemm.STAGES - 1: short = True
  assert short   # a slice of fewer steps than the stages the kernel puts in flight first

def test_staged_kernels_are_a_batched_steps_routed_experts():
  """gemm.mma_stages on DeepSeek-V2-Lite's full-size shapes: a step of 8's routed gate_up and down (on the split GEMM from
  48 picks) build staged; its attn_output (a plain product of 8 tokens), a step of 16's routed experts and a 32-token
  chunk's keep their weights in registers (slower staged on the H100)."""
  q4 = GGMLType.Q4_0
  def staged(T, N, K, **kw) -> bool:
    s = gemm.split_k(gemm.GemmShape(q4, T, N, K, **kw))
    return gemm.build_mma(s).name.endswith(f"_st{gemm.STAGES}")
  assert staged(8, 1408, 2048, J=6, E=64, glu=True) and staged(8, 2048, 1408, J=6, E=64)
  assert not staged(8, 2048, 2048) and not staged(16, 1408, 2048, J=6, E=64, glu=True) and not staged(32, 2048, 1408, J=6, E=64)

FEW = """
from apps.dispatch import KernelSpec
from tinygrad import Device
from apps.kernels import gemm
from apps.packed import format_for
from apps.gguf import GGMLType
dev = Device.DEFAULT
def gemm_takes(B, N, K, **kw):
  return gemm.provider(KernelSpec("linear", format_for(GGMLType.Q4_0, K), B, 1, N, K, 1, False, False, dev, **kw)) is not None
print(gemm_takes(4, 6144, 2048, glu=True), gemm_takes(3, 2048, 6144), gemm_takes(4, 102400, 2048),
      gemm_takes(2, 6144, 2048, glu=True), gemm_takes(4, 2048, 2048), gemm_takes(4, 2816, 2048, glu=True), gemm_takes(4, 2048, 5120))
"""

@needs_nvcc
def test_few_tokens_large_products_take_the_gemm():
  """A step of 3-4 sequences: Youtu-LLM-2B's dense gate_up and down, an output head, DeepSeek-V2-Lite's shared experts'
  gate_up and GLM-4.7-Flash's attn_output (10M weights and more) take the tensor-core GEMM; 2 tokens and DeepSeek-V2-Lite's
  attn_output stay on the matvecs."""
  assert run_nvcc_script(FEW).split() == ["True", "True", "True", "False", "False", "True", "True"]

def test_seam_adds_up_split_slices():
  """A kernel that leaves its K slices' sums apart (`split` on the program: gemm.split_k's) gets them added up by the seam,
  then SwiGLU over the [gate; up] halves and the residual, as the unsplit kernel would store them: a stand-in kernel whose
  slice s of token t, row r holds (s + 1) (t + 1) (r + 1), on any device."""
  S, T, N, K = 3, 2, 4, 64
  def slices(rows):
    def fxn(out, x, *parts):
      s, t, r = UOp.range(S, 0), UOp.range(T, 1), UOp.range(rows, 2)
      v = ((s + 1) * (t + 1) * (r + 1)).cast(dtypes.float32)
      return out[s, t, r].store(v).end(s, t, r).sink(arg=KernelInfo(name=f"split_slices_{rows}"))
    fxn.split = (S, rows)
    return fxn
  ts, rs = np.arange(1, T + 1, dtype=np.float64)[:, None], np.arange(1, 2 * N + 1, dtype=np.float64)[None, :]
  total = S * (S + 1) / 2 * ts * rs   # the slices' sum, W's rows [gate; up]
  rng = np.random.default_rng(5)
  dev = Device.DEFAULT.split(":")[0]
  res = rng.standard_normal((T, 2 * N)).astype(np.float32)
  D.register_kernel(lambda spec: slices(spec.N * (2 if spec.glu else 1)) if spec.op == "linear" and spec.device == dev and spec.K == K else None)
  D.kernel_cached.cache_clear()
  try:
    lin = QuantizedLinear(PackedTensor.from_bytes(random_tensor(GGMLType.Q4_0, (K, 2 * N), rng), GGMLType.Q4_0, (K, 2 * N)))
    x = Tensor(rng.standard_normal((T, K)).astype(np.float32))
    np.testing.assert_allclose(lin(x, residual=Tensor(res)).numpy(), total + res, rtol=1e-6)
    gate, up = total[:, :N], total[:, N:]
    np.testing.assert_allclose(lin(x, glu=True).numpy(), gate / (1 + np.exp(-gate)) * up, rtol=1e-5)
  finally:
    D._PROVIDERS.pop(0)
    D.kernel_cached.cache_clear()

def test_seam_adds_up_split_expert_slices():
  """As test_seam_adds_up_split_slices for routed experts (a batched step's: out (split, T, J, rows of W)): the slices
  added up, then SwiGLU over each expert's [gate; up] rows; an expert mix the kernel does not take is the plain product's,
  weighted and summed over the slots as tensor ops, with the residual."""
  S, T, J, E, N, K = 3, 2, 2, 4, 4, 64
  def slices(rows):
    def fxn(out, x, sel, *parts):
      s, t, j, r = UOp.range(S, 0), UOp.range(T, 1), UOp.range(J, 2), UOp.range(rows, 3)
      v = ((s + 1) * (t + 1) * (j + 2) * (r + 1)).cast(dtypes.float32)
      return out[s, t, j, r].store(v).end(s, t, j, r).sink(arg=KernelInfo(name=f"split_expert_slices_{rows}"))
    fxn.split = (S, rows)
    return fxn
  total = S * (S + 1) / 2 * np.arange(1, T + 1)[:, None, None] * np.arange(2, J + 2)[None, :, None] * np.arange(1, 2 * N + 1)[None, None, :]
  rng = np.random.default_rng(6)
  dev = Device.DEFAULT.split(":")[0]
  D.register_kernel(lambda spec: slices(spec.N * (2 if spec.glu else 1)) if spec.op == "experts" and spec.device == dev and spec.K == K
                    and not (spec.mix or spec.residual or spec.norm) else None)
  D.kernel_cached.cache_clear()
  try:
    w = QuantizedExpertWeights([PackedTensor.from_bytes(random_tensor(GGMLType.Q4_0, (K, 2 * N, E), rng), GGMLType.Q4_0, (K, 2 * N, E))], [2 * N])
    sel, x = Tensor(np.array([[1, 3], [0, 1]], np.int32)), Tensor(rng.standard_normal((T, K)).astype(np.float32))
    gate, up = total[..., :N], total[..., N:]
    np.testing.assert_allclose(w(sel, x, glu=True).numpy(), gate / (1 + np.exp(-gate)) * up, rtol=1e-5)
    mix, res = rng.standard_normal((T, J)).astype(np.float32), rng.standard_normal((T, 2 * N)).astype(np.float32)
    xs = Tensor(rng.standard_normal((T, J, K)).astype(np.float32))
    np.testing.assert_allclose(w(sel, xs, mix=Tensor(mix), residual=Tensor(res)).numpy(), (total * mix[..., None]).sum(1) + res, rtol=1e-5)
  finally:
    D._PROVIDERS.pop(0)
    D.kernel_cached.cache_clear()

def test_split_k_rule():
  """A few tokens' plain product splits K until there are two workgroups an SM (Youtu-LLM-2B's down: 32 workgroups of 64 rows,
  16 tokens in one tile, K in 16 slices); a chunk's products, experts and per-slot products are not split; slices are
  whole steps, the residual goes to the slices' sum."""
  q, S = GGMLType.Q4_0, gemm.GemmShape
  down = gemm.split_k(S(q, 16, 2048, 6144, residual=True))
  assert down.split == 16 and not down.residual and gemm.mma_tile(down) == (16, 64)
  assert -(-2048 // 64) * down.split >= 2 * gemm.matvec.SMS
  glu = gemm.split_k(S(q, 9, 6144, 2048, glu=True))   # a warp's 16 gate and 16 up rows: 96 workgroups
  assert glu.split == 4 and gemm.mma_tile(glu) == (16, 128)
  mixed = gemm.split_k(S(q, 40, 2048, 6144))   # a step of 8 rows with a 32-token chunk: one tile of 40 tokens
  assert mixed.split > 1 and gemm.mma_tile(mixed) == (40, 64)
  assert gemm.split_k(S(q, 128, 2048, 6144)).split == 1 and gemm.split_k(S(q, 64, 2816, 2048, 6, 64)).split == 1
  # a batched step's routed experts: slices of at least 4 steps, at most 4 (DeepSeek-V2-Lite's gate_up 16 steps of 4
  # sub-steps, down 11: whole)
  assert gemm.split_k(S(q, 8, 1408, 2048, 6, 64, glu=True)).split == 4 and gemm.split_k(S(q, 8, 2048, 1408, 6, 64, True)).split == 1
  assert gemm._mma_steps(S(q, 8, 1408, 2048, 6, 64, glu=True), (8, 128)) == 4 and gemm._mma_steps(S(q, 40, 2048, 6144), (40, 64)) == 2
  assert gemm._mma_steps(S(q, 4, 102400, 2048), (8, 128)) == 2 and gemm._mma_steps(S(q, 16, 2048, 2048, split=4), (16, 64)) == 2
  assert gemm.mma_tile(S(q, 8, 2048, 1408, 6, 64, True, split=2)) == (8, 64)
  # a step of 9-32 sequences: 8 entries x 256 rows, K split (DeepSeek-V2-Lite's gate_up 32 steps of 2 sub-steps: 4 slices;
  # its down 22: 2); past gemm.SPLIT_EXPERTS (a step of 8 rows with a 32-token chunk) unsplit 16 x 256 tiles
  for T in (9, 16, 32):
    gu, dn = gemm.split_k(S(q, T, 1408, 2048, 6, 64, glu=True)), gemm.split_k(S(q, T, 2048, 1408, 6, 64, True))
    assert (gu.split, dn.split, gemm.mma_tile(gu), gemm.mma_tile(dn)) == (4, 2, (8, 256), (8, 256)), T
    assert gemm.mma_stages(gu, (8, 256), 2) == 0 and not gemm.build_mma(gu).name.endswith(f"_st{gemm.STAGES}")
  assert gemm.split_k(S(q, 40, 1408, 2048, 6, 64, glu=True)).split == 1 and gemm.mma_tile(S(q, 40, 1408, 2048, 6, 64, glu=True)) == (16, 256)
  assert gemm.split_k(S(q, 16, 512, 128, 16, 16, True, True)).split == 1
  assert gemm.split_k(S(q, 16, 2048, 96)).split == 1   # 3 blocks: one step of K, nothing to split

@needs_nvcc
def test_batched_steps_experts_tile_spills_nothing(tmp_path):
  """The routed gate_up and down of a step of 16 and 32 sequences (DeepSeek-V2-Lite's and GLM-4.7-Flash's shapes, K split,
  8 x 256 tiles) compile for sm_90 within three workgroups an SM and no stack: the 16 x 256 tile they took before took
  168 registers and spilled 24 bytes (H100: 60% of cycles with no eligible warp)."""
  q = GGMLType.Q4_0
  for T in (16, 32):
    for J, F in ((6, 1408), (4, 1536)):
      for s in (gemm.GemmShape(q, T, F, 2048, J, 64, glu=True), gemm.GemmShape(q, T, 2048, F, J, 64, True)):
        k = gemm.build_mma(gemm.split_k(s))
        n, stack = sm90_registers(render(k, "CUDA"), tmp_path)
        assert k.min_blocks == 3 and n <= 65536 // (3 * 128) and stack == 0, (T, J, s.glu, n, stack)

def test_mma_has_no_metal_rendering():
  k = gemm.build_mma(gemm.GemmShape(GGMLType.Q4_0, 64, 64, 256))
  with pytest.raises(ValueError, match="no Metal rendering"): render(k, "METAL")
  assert "mma.sync" in render(k, "CUDA") and "mma.sync" not in render(gemm.build(gemm.GemmShape(GGMLType.Q4_0, 64, 64, 256)), "CUDA")

def test_tiles():
  """Experts: 16 tokens x 128 rows; dense: 64 rows and 64 tokens, fewer where that leaves two workgroups per SM."""
  q = GGMLType.Q4_0
  assert gemm.GemmShape(q, 128, 2816, 2048, 6, 64).tile == (16, 128)
  assert gemm.GemmShape(q, 128, 12288, 2048).tile == (64, 64) and gemm.GemmShape(q, 128, 5632, 2048).tile == (32, 64)
  assert gemm.GemmShape(q, 128, 2048, 2048).tile == (16, 64) and gemm.GemmShape(q, 128, 512, 128, 16, 16, True, True).tile == (32, 64)

def test_mma_tiles_steps_and_occupancy():
  """Tensor-core tiles: SwiGLU 64 tokens x 128 rows; other dense products 32 tokens (fewer until a workgroup per SM) x 128
  rows, 64 where N is an odd multiple of 64; experts 64 x 128 or 16 x 256. Two sub-steps a step, registers for three
  workgroups an SM (__launch_bounds__(128, 3)), one sub-step where K has an odd number of blocks."""
  q, S = GGMLType.Q4_0, gemm.GemmShape
  assert gemm.mma_tile(S(q, 512, 6144, 2048, glu=True)) == (64, 128) and gemm.mma_tile(S(q, 512, 3072, 1536)) == (32, 128)
  assert gemm.mma_tile(S(q, 512, 2112, 2048)) == (32, 64) and gemm.mma_tile(S(q, 512, 1344, 2048)) == (32, 64)
  assert gemm.mma_tile(S(q, 128, 2048, 2048)) == (8, 128) and gemm.mma_tile(S(q, 512, 512, 128, 16, 16, True, True)) == (32, 128)
  assert gemm.mma_tile(S(q, 512, 1408, 2048, 6, 64, glu=True)) == (64, 128) and gemm.mma_tile(S(q, 128, 1408, 2048, 6, 64)) == (16, 256)
  for s in (S(q, 512, 2048, 2048), S(GGMLType.Q5_K, 512, 2816, 2048, glu=True), S(GGMLType.Q6_K, 512, 2048, 2816, residual=True)):
    k = gemm.build_mma(s)
    assert gemm._mma_steps(s, gemm.mma_tile(s)) == 2 and k.min_blocks == 3 and "__launch_bounds__(128, 3)" in render(k, "CUDA")
  assert gemm._mma_steps(S(q, 20, 40, 96), (8, 64)) == 1
  # a few tokens of a wide product (a batched step's output head): a tile of the tokens, not 32 of which 24 are padding
  assert gemm.mma_tile(S(GGMLType.Q6_K, 8, 102400, 2048)) == (8, 128) and gemm.mma_tile(S(q, 12, 16384, 2048, glu=True)) == (16, 128)

def test_mma_experts_long_chunk_takes_two_sub_steps():
  """An experts kernel's x records are dynamic workgroup memory, so DeepSeek-V2-Lite's routed products of a 2048-token chunk
  (a listing of 12,288 entries: 24 KB) take two sub-steps a step (28 KB of records: 53.8 KB in all, past the 48 KB a
  static declaration may take); a dense product keeps its records static."""
  q, S = GGMLType.Q4_0, gemm.GemmShape
  for s in (S(q, 2048, 1408, 2048, 6, 64, glu=True), S(q, 2048, 2048, 1408, 6, 64)):
    k = gemm.build_mma(s)
    assert gemm._mma_steps(s, gemm.mma_tile(s)) == 2 and gemm.mma_shared_bytes(s) > 48 * 1024, s
    assert k.smem == 2 * 2 * 64 * gemm.XQ_VECS * 16 and "DYN_SHARED(uint4, xs4);" in k.body and k.min_blocks == 3
  k = gemm.build_mma(S(q, 512, 2048, 2048))
  assert k.smem == 0 and "DYN_SHARED" not in k.body

def test_bench_gemm_shapes_are_the_kernels():
  """tools/bench_gemm.py's products of a chunk are shapes the tensor-core GEMM serves, and its variants start with the rule;
  so are those of the longest chunk (DeepSeek-V2-Lite's experts at 2048 tokens list 12,288 entries: 16-bit, or they fall
  back to the matvecs, 4x slower a prompt)."""
  from tools.bench_gemm import MODELS, shape_of, variants
  from apps.model import LONG_PREFILL_CHUNKS
  for model, products in MODELS.items():
    for name, typ, N, K, form in products:
      assert gemm.mma_supports(shape_of(typ, max(LONG_PREFILL_CHUNKS), N, K, form)), (model, name)
      s = shape_of(typ, 512, N, K, form)
      assert gemm.mma_supports(s), (model, name)
      v = variants(s, True)
      assert v[0] == (gemm.mma_tile(s), gemm._mma_steps(s, gemm.mma_tile(s)), 3, 1) and len(set(v)) == len(v) > 1, (model, name)
  # a batched step's products: the rule's K slices first (gemm.split_k's), then every slice count that is whole steps
  s = gemm.split_k(shape_of(GGMLType.Q4_0, 8, 1408, 2048, "e64j6glu"))
  v = variants(s, False, (2, 4), (3,), (1, 2, 4, 8))
  assert s.split > 1 and v[0][3] == s.split and {sp for *_, sp in v} == {1, 2, 4, 8}
  assert all((s.K // gemm.KB // sb) % sp == 0 for _, sb, _, sp in v)

def test_parts_order_matches_the_packed_format():
  """The kernel's weight parameters are the packed format's parts, in order (d, qs)."""
  for typ in TYPES:
    k = gemm.build(gemm.GemmShape(typ, 8, 8, k_of(typ, 1)))
    assert [p.name for p in k.params[2:]] == [n for n, _, _ in format_for(typ, k_of(typ, 1)).parts]

def test_provider_takes_only_what_it_can():
  dev = Device.DEFAULT.split(":")[0]
  fmt = format_for(GGMLType.Q4_0, 256)
  spec = lambda **kw: KernelSpec(**{**dict(op="linear", fmt=fmt, B=64, J=1, N=32, K=256, E=1, x_per_slot=False, has_index=False,
                                           device=dev), **kw})
  assert gemm.provider(spec(B=4)) is None                                # decode: the matvecs
  mma = gemm.mma_supports(gemm.GemmShape(GGMLType.Q4_0, 64, 32, 256), Device.DEFAULT)   # CUDA sm_80+: the tensor-core GEMM
  assert (gemm.provider(spec(norm=True)) is not None) == mma             # the norm in x's quantization, else separate ops
  assert (gemm.provider(spec(norm=True, glu=True)) is not None) == mma   # and SwiGLU in the store
  assert gemm.provider(spec(glu=True, residual=True)) is None
  # a strided input (rows read in place by the x quantization): the tensor-core kernel's only
  assert (gemm.provider(spec(op="batched", J=4, E=4, x_per_slot=True, x_stride=300)) is not None) == mma
  assert (gemm.provider(spec(norm=True, x_stride=300)) is not None) == mma
  assert gemm.provider(spec(fmt=format_for(GGMLType.Q4_1, 256))) is None             # no GEMM for that type
  on_kernels = language_of(Device.DEFAULT) is not None
  assert (gemm.provider(spec()) is not None) == on_kernels
  assert (gemm.provider(spec(residual=True)) is not None) == on_kernels                # the residual add in the store
  assert gemm.provider(spec(op="experts", J=6, E=64, has_index=True, residual=True, mix=True)) is None
  experts = lambda **kw: spec(op="experts", J=6, E=64, has_index=True, **kw)
  assert (gemm.provider(experts(norm=True, glu=True)) is not None) == mma   # a chunk's routed gate_up in one kernel
  assert gemm.provider(experts(norm=True, glu=True, x_per_slot=True)) is None   # one x per slot: no shared norm
  assert (gemm.provider(spec(fmt=format_for(GGMLType.Q6_K, 256))) is not None) == on_kernels
  assert (gemm.provider(spec(op="experts", J=6, E=64, has_index=True)) is not None) == on_kernels
  assert (gemm.provider(spec(op="batched", J=4, E=4, x_per_slot=True)) is not None) == on_kernels

COMPILE = r"""
import os, apps
from concurrent.futures import ThreadPoolExecutor
from tinygrad import Device
from apps.gguf import GGMLType, BLOCK
from apps.kernels import gemm, render
ren = Device["NULL"].renderer
shapes = [gemm.GemmShape(t, 128, 6144, 2048) for t in gemm.TYPES] + \
         [gemm.GemmShape(t, 128, 2816, 2048, 6, 64, False) for t in gemm.TYPES] + \
         [gemm.GemmShape(t, 128, 2048, 1408 if BLOCK[t][0] == 32 else 1536, 6, 64, True) for t in gemm.TYPES]
pool = ThreadPoolExecutor(os.cpu_count())   # an nvcc process a core
list(pool.map(lambda s: ren.compiler.compile(render(gemm.build(s), "CUDA")), shapes))
print("COMPILED", len(shapes))
mma = shapes + [gemm.GemmShape(t, 512, 2048, 2048, residual=True) for t in gemm.TYPES] + \
      [gemm.GemmShape(t, 512, 512, 128, 16, 16, True, True) for t in gemm.MMA_TYPES if BLOCK[t][0] == 32] + \
      [gemm.GemmShape(t, 128, 6144, 2048, glu=True) for t in gemm.MMA_TYPES] + \
      [gemm.split_k(gemm.GemmShape(GGMLType.Q4_0, 16, 2048, 6144, residual=True)),
       gemm.split_k(gemm.GemmShape(GGMLType.Q6_K, 9, 2816, 2048, glu=True)),
       gemm.split_k(gemm.GemmShape(GGMLType.Q4_0, 8, 1408, 2048, 6, 64, glu=True)),   # a batched step's routed experts
       gemm.split_k(gemm.GemmShape(GGMLType.Q5_K, 8, 2048, 1536, 4, 64, True))]
assert all(s.split > 1 for s in mma[-4:])
list(pool.map(lambda s: ren.compiler.compile(render(gemm.build_mma(s), "CUDA")), mma))
xq = ((128, 2048, None), (768, 1408, None), (2048, 128, None), (128, 2048, 1e-6), (128, 1536, 1e-6))
list(pool.map(lambda a: ren.compiler.compile(render(gemm.build_xq(*a), "CUDA")), xq))
print("MMA COMPILED", len(mma) + 5)
"""

SEAM = r"""
import apps
from apps.gguf import GGMLType
from apps.dispatch import KernelSpec, kernel_for
from apps.packed import format_for
from apps.kernels import gemm, matvec
fmt = format_for(GGMLType.Q4_0, 2048)
spec = lambda B: KernelSpec("linear", fmt, B, 1, 512, 2048, 1, False, False, "NULL")
print("PREFILL", kernel_for(spec(128)) is gemm.kernel(gemm.GemmShape(GGMLType.Q4_0, 128, 512, 2048), "NULL"))   # past gemm.SPLIT_TOKENS: K whole
print("MMA", hasattr(kernel_for(spec(64)), "x_form"))   # sm_90: the tensor-core GEMM, x quantized first
print("DECODE", kernel_for(spec(1)) is matvec.kernel(matvec.MatvecShape("linear", GGMLType.Q4_0, 1, 1, 512, 2048, 1, False), 0.0, "NULL"))
# a batched step of 5-8 sequences: plain, per-slot and routed-expert products on the tensor cores
experts = lambda B: KernelSpec("experts", fmt, B, 6, 512, 2048, 64, False, True, "NULL")
batched = lambda B: KernelSpec("batched", format_for(GGMLType.Q8_0, 128), B, 4, 512, 128, 4, True, False, "NULL")
on = lambda f: getattr(f, "x_form", None) is not None
print("FEW", [(on(kernel_for(spec(B))), on(kernel_for(batched(B))), on(kernel_for(experts(B)))) for B in (4, 5, 8, 9)])
# v_b of 5-8 sequences: 128 values a head on the matvecs, 256 on the tensor cores; 9 sequences on them either way
v_b = lambda B, N: KernelSpec("batched", format_for(GGMLType.Q4_0, 512), B, 16, N, 512, 16, True, False, "NULL")
print("HEADS", [on(kernel_for(v_b(B, N))) for B, N in ((8, 128), (9, 128), (8, 256))])
# a strided input at 8 sequences (q_b's normed q_a inside [q_a; kv_a], k_b's q_nope inside q): the tensor cores, x read in place
from dataclasses import replace
qb = lambda B: replace(spec(B), norm=True, x_stride=2112, eps=1e-6)
kb = lambda B: replace(batched(B), K=128, x_stride=192, fmt=format_for(GGMLType.Q4_0, 128))
xq_rows = lambda f: f.x_form[0] // gemm.XQ_WORDS   # the records of x's rows that the x form makes
print("STRIDED", [(on(kernel_for(qb(B))), on(kernel_for(kb(B)))) for B in (4, 8, 64)], xq_rows(kernel_for(qb(8))), xq_rows(kernel_for(kb(8))))
# routed experts from gemm.SPLIT_EXPERT_PICKS (token, expert) picks: 8 tokens of 6 experts, not of 4
print("PICKS", [on(kernel_for(KernelSpec("experts", fmt, B, J, 512, 2048, 64, False, True, "NULL"))) for B, J in ((8, 6), (7, 6), (8, 4), (9, 4))])
print("SPLIT", getattr(kernel_for(spec(8)), "split", None))
# a routed down's expert mix: the matvecs' up to 4 sequences, past that the GEMM's product with the mix as tensor ops (None)
print("MIX", [kernel_for(replace(experts(B), x_per_slot=True, mix=True, residual=True)) is None for B in (4, 8)])
"""

@needs_nvcc
def test_seam_routes_prefill_to_the_gemm_and_decode_to_the_matvecs():
  out = run_nvcc_script(SEAM)
  assert "PREFILL True" in out and "DECODE True" in out and "MMA True" in out, out
  assert "FEW [(False, False, False), (True, True, False), (True, True, True), (True, True, True)]" in out, out
  assert "PICKS [True, False, False, True]" in out, out
  assert "HEADS [False, True, True]" in out, out
  assert "STRIDED [(False, False), (True, True), (True, True)] 512 128" in out, out
  assert "SPLIT (16, 512)" in out and "MIX [False, True]" in out, out

@needs_nvcc
def test_cuda_sources_compile():
  out = run_nvcc_script(COMPILE)
  assert f"COMPILED {3 * len(TYPES)}" in out and f"MMA COMPILED {5 * len(TYPES) + 2 + 5 + 4}" in out

def test_metal_sources_render():
  for t in TYPES:
    src = render(gemm.build(gemm.GemmShape(t, 128, 2048, 2048)), "METAL")
    assert "kernel void" in src and "SHARED float4 xs4" in src

@pytest.mark.skipif(language_of(Device.DEFAULT) is None, reason="no hand-written kernels on this device")
@pytest.mark.parametrize("typ", TYPES, ids=lambda t: t.name)
def test_device_prefill_product(typ):
  """70-token products on the device (the GEMM's): linear, routed experts, per slot; at the fp32 bound of the float
  product, or where the tensor-core GEMM serves (CUDA sm_80+) of the product of x rounded to 24 bits per block (x24)."""
  D.kernel_cached.cache_clear()
  try:
    rng = np.random.default_rng(3)
    K, N, T = 256, 96, 70
    mma = gemm.mma_supports(gemm.GemmShape(typ, T, N, K), Device.DEFAULT)
    seen = lambda v: x24(v) if mma else v.astype(np.float64)
    raw = random_tensor(typ, (K, N), rng)
    W = ref_weight(raw, typ, (K, N)).astype(np.float64)
    lin = QuantizedLinear(PackedTensor.from_bytes(raw, typ, (K, N)))
    x = rng.standard_normal((T, K)).astype(np.float32)
    assert relerr(lin(Tensor(x)).numpy(), seen(x) @ W.T) < fp32_bound(K)
    res = rng.standard_normal((T, N)).astype(np.float32)
    assert relerr(lin(Tensor(x), residual=Tensor(res)).numpy(), seen(x) @ W.T + res) < fp32_bound(K)
    T, J, E, N = 70, 3, 5, 40                                               # routed experts, x shared by the slots
    sel = rng.integers(0, E, (T, J))
    bufs, ref = expert_case(typ, T, J, E, N, K, False, sel, seed=4, seen=seen)
    ex = QuantizedExpertWeights(*[[PackedTensor.from_bytes(random_tensor(typ, (K, N, E), np.random.default_rng(4)), typ, (K, N, E))], [N]])
    assert relerr(ex(Tensor(sel.astype(np.int32)), Tensor(bufs[1])).numpy(), ref) < fp32_bound(K)
    Wb = ref_weight(random_tensor(typ, (K, N, E), np.random.default_rng(4)), typ, (K, N, E)).astype(np.float64)  # per slot
    xb = rng.standard_normal((T, E, K)).astype(np.float32)
    assert relerr(ex.batched(Tensor(xb)).numpy(), np.einsum("enk,tek->ten", Wb, seen(xb))) < fp32_bound(K)
  finally: D.kernel_cached.cache_clear()

def test_ab_tool_runs(capsys):
  """`tools.ab prefill` on a tiny preset (on the CPU both variants are the portable kernels): one line per variant, the
  same first token, and the seam's providers untouched (the variants are the model's kernel modules)."""
  from tools import ab
  before = list(D._PROVIDERS)
  assert ab.main(["prefill", "--presets", "youtu-llm-2b-tiny", "--prefill", "20", "--rounds", "1"]) == 0
  out = capsys.readouterr().out
  lines = [l for l in out.splitlines() if "prefill 20 tokens" in l]
  assert len(lines) == 2 and "portable" in lines[0] and "gemm" in lines[1]
  assert lines[0].split("first token ")[1] == lines[1].split("first token ")[1]
  assert D._PROVIDERS == before
  summary = [l for l in out.splitlines() if " summary " in l]   # the medians of the rounds and B against A
  assert len(summary) == 3 and "median" in summary[0] and "gemm / portable:" in summary[2] and "% in medians" in summary[2]

def test_ab_summary():
  """The summary's arithmetic: medians over rounds, the difference in percent, within or past half the first's spread."""
  from tools.ab import summary
  out = summary("m", {"A": [10.0, 12.0, 11.0], "B": [10.4, 10.6, 10.5]})
  assert out[0] == "m summary A       : median 11.00 ms, min 10.00, max 12.00 over 3 rounds"
  assert out[2] == "m summary B / A: -4.5% in medians (within half the spread of A's rounds, 9.1%)"
  assert "past" in summary("m", {"A": [10.0, 10.2, 10.1], "B": [11.0, 11.0]})[2]
  assert summary("m", {"A": [10.0], "B": [11.0]})[2].endswith("(too few rounds to judge the spread)")

def test_ab_tool_chunks_and_fusions(capsys):
  """`tools.ab prefill --chunks`: one line per variant of chunk lengths, the same first token (chunking changes no result), and
  the model's chunk the last one; --off: variant A with those fusions off; the three A/Bs are one at a time."""
  from tools import ab
  assert ab.main(["prefill", "--presets", "youtu-llm-2b-tiny", "--prefill", "20", "--rounds", "1", "--chunks", "8,32+8"]) == 0
  assert ab.main(["prefill", "--presets", "youtu-llm-2b-tiny", "--prefill", "20", "--rounds", "1", "--off", "trigger"]) == 0
  lines = [l for l in capsys.readouterr().out.splitlines() if "prefill 20 tokens" in l]
  assert [l.split(":")[0].split(" 1 ", 1)[1].strip() for l in lines] == ["chunks 8", "chunks 32+8", "A", "B"]
  assert len({l.split("first token ")[1] for l in lines}) == 1
  for bad in (["--chunks", "0,8"], ["--off", "nothing"], ["--chunks", "8", "--off", "trigger"]):
    with pytest.raises(SystemExit): ab.main(["prefill", "--presets", "youtu-llm-2b-tiny", *bad])

def test_ab_tool_variant_file(tmp_path, capsys):
  """`tools.ab prefill --a`: variant A is another apps/kernels/gemm.py (here a copy with a marker), B the checked-out one;
  the package's module untouched."""
  import apps.kernels
  from tools import ab
  mod = apps.kernels.gemm
  (tmp_path / "gemm.py").write_text(Path(mod.__file__).read_text() + "\nVARIANT_A = True\n")
  assert ab.main(["prefill", "--presets", "youtu-llm-2b-tiny", "--prefill", "20", "--rounds", "1", "--a", str(tmp_path / "gemm.py")]) == 0
  lines = [l for l in capsys.readouterr().out.splitlines() if "prefill 20 tokens" in l]
  assert [l.split(":")[0].split()[-1] for l in lines] == ["A", "B"]
  assert apps.kernels.gemm is mod and not hasattr(mod, "VARIANT_A")

def test_ab_tool_variant_file_in_a_fresh_process(tmp_path):
  """`python3 -m tools.ab prefill --a` as the GPU machine runs it: a fresh interpreter, where nothing has imported
  apps.kernels.gemm before variant A's model uses it."""
  import subprocess, sys
  root = Path(__file__).resolve().parent.parent
  (tmp_path / "gemm.py").write_text((root / "apps" / "kernels" / "gemm.py").read_text())
  r = subprocess.run([sys.executable, "-m", "tools.ab", "prefill", "--presets", "youtu-llm-2b-tiny", "--prefill", "12", "--rounds", "1",
                      "--a", str(tmp_path / "gemm.py")], cwd=root, capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stderr[-2000:]
  assert [l.split(":")[0].split()[-1] for l in r.stdout.splitlines() if "prefill 12 tokens" in l] == ["A", "B"]
