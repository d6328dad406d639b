"""The CPU's hand-written Q4_0 products (apps/kernels/cpu.py): one token's or several tokens' (a batched step's sequences, a
prompt's chunk) with or without its residual, and the per-slot product (MLA's per-head k_b / v_b: each head its weights and
input, the input read in place from a longer row), against gguf-py's dequantization in float64, alone and replayed in a
TinyJit on new inputs; the seam giving it the products it takes, and nothing else; and MLA's decode attention of one
sequence's token or of a batched step's rows, and its attention of a prefill chunk."""
import shutil
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tinygrad import Tensor, TinyJit, UOp
from apps.gguf import GGMLType
from apps.packed import PackedTensor, format_for
from apps.quantized import QuantizedLinear, QuantizedExpertWeights
from apps.dispatch import KernelSpec, kernel_for
from apps.kernels import cpu
from test_quantized import random_tensor, ref_weight, relerr, relerr_terms, fp32_bound, expert_file, expert_ref

pytestmark = pytest.mark.skipif(shutil.which("clang") is None, reason="tinygrad's CPU device needs clang")

@pytest.mark.parametrize("N,K", [(77, 256), (3, 128), (300, 1024)])   # rows not a multiple of the threads; 4 to 32 blocks
def test_cpu_product(N, K):
  rng = np.random.default_rng(N)
  raw = random_tensor(GGMLType.Q4_0, (K, N), rng)
  W = ref_weight(raw, GGMLType.Q4_0, (K, N)).astype(np.float64)
  lin = QuantizedLinear(PackedTensor.from_bytes(raw, GGMLType.Q4_0, (K, N), device="CPU"))
  assert cpu.kernel(N, K, False, "CPU") is kernel_for(KernelSpec("linear", lin.w.fmt, 1, 1, N, K, 1, False, False, "CPU"))
  step = TinyJit(lambda x, r: lin(x, residual=r).contiguous())
  for i in range(4):   # the first calls alone, then replays of the capture
    x, r = rng.standard_normal((1, K)).astype(np.float32), rng.standard_normal((1, N)).astype(np.float32)
    assert relerr(lin(Tensor(x, device="CPU")).numpy(), x.astype(np.float64) @ W.T) < fp32_bound(K)
    assert relerr(step(Tensor(x, device="CPU"), Tensor(r, device="CPU")).numpy(), x.astype(np.float64) @ W.T + r) < fp32_bound(K), i
  xl = rng.standard_normal((1, K + 64)).astype(np.float32)   # the input the first K of a longer row, read in place
  assert cpu.kernel(N, K, False, "CPU") is kernel_for(KernelSpec("linear", lin.w.fmt, 1, 1, N, K, 1, False, False, "CPU", x_stride=K + 64))
  assert relerr(lin(Tensor(xl, device="CPU"), prefix=True).numpy(), xl[:, :K].astype(np.float64) @ W.T) < fp32_bound(K)

@pytest.mark.parametrize("typ", [GGMLType.Q5_K, GGMLType.Q6_K], ids=lambda t: t.name)
# rows not a multiple of the threads; more than 8 tokens in the buffer form: tiles of 4 / 2 / 1 (32, 10, 9), K in chunks of 4
# blocks and a shorter last one (1280), 8192 x 32 tokens in four panels of 8, 2816 x 24 in panels of 20 and 4
@pytest.mark.parametrize("N,K,T", [(77, 256, 1), (300, 1024, 1), (5, 2048, 1), (40, 512, 3), (9, 256, 8), (77, 256, 32), (6, 1280, 10),
                                   (13, 512, 9), (5, 8192, 32), (6, 2816, 24)])
def test_cpu_k_quant_product(typ, N, K, T):
  """The Q5_K and Q6_K products of any number of tokens (the MoE models' output head and shared experts) with and without
  the residual, against gguf-py's dequantization in float64, alone and replayed; a product read from a longer row is not theirs."""
  rng = np.random.default_rng(N)
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  lin = QuantizedLinear(PackedTensor.from_bytes(raw, typ, (K, N), device="CPU"))
  for res in (False, True):
    want = cpu.kernel_k(typ.name.lower(), N, K, res, "CPU", *((T,) if T > 1 else ()))
    assert kernel_for(KernelSpec("linear", lin.w.fmt, T, 1, N, K, 1, False, False, "CPU", residual=res)) is want
  asked = cpu.kernel_k.cache_info()
  kernel_for(KernelSpec("linear", lin.w.fmt, T, 1, N, K, 1, False, False, "CPU", x_stride=K + 64))   # the portable kernel
  assert cpu.kernel_k.cache_info() == asked
  step = TinyJit(lambda x, r: lin(x, residual=r).contiguous())
  for i in range(3):
    x, r = rng.standard_normal((T, K)).astype(np.float32), rng.standard_normal((T, N)).astype(np.float32)
    assert relerr(lin(Tensor(x, device="CPU")).numpy(), x.astype(np.float64) @ W.T) < fp32_bound(K)
    assert relerr(step(Tensor(x, device="CPU"), Tensor(r, device="CPU")).numpy(), x.astype(np.float64) @ W.T + r) < fp32_bound(K), i

# tokens in tiles of 4 / 2 / 1 (32, 6, 3); rows not a multiple of the 4 a thread unpacks at once, nor of the threads; K in
# chunks of 64 vectors and a shorter last one (1152); 8192 x 32 tokens: x in four panels of 8 tokens, each its own pass;
# 2304 x 32: a panel of 28 tokens and a short last one of 4
@pytest.mark.parametrize("N,K,T", [(77, 256, 32), (6, 1152, 6), (300, 1024, 3), (5, 8192, 32), (6, 2304, 32), (9, 96, 17)])
def test_cpu_product_of_tokens(N, K, T):
  rng = np.random.default_rng(T)
  raw = random_tensor(GGMLType.Q4_0, (K, N), rng)
  W = ref_weight(raw, GGMLType.Q4_0, (K, N)).astype(np.float64)
  lin = QuantizedLinear(PackedTensor.from_bytes(raw, GGMLType.Q4_0, (K, N), device="CPU"))
  assert cpu.kernel(N, K, True, "CPU", 1, 0, T) is kernel_for(KernelSpec("linear", lin.w.fmt, T, 1, N, K, 1, False, False, "CPU", residual=True))
  step = TinyJit(lambda x, r: lin(x, residual=r).contiguous())
  for i in range(3):
    x, r = rng.standard_normal((T, K)).astype(np.float32), rng.standard_normal((T, N)).astype(np.float32)
    assert relerr(step(Tensor(x, device="CPU"), Tensor(r, device="CPU")).numpy(), x.astype(np.float64) @ W.T + r) < fp32_bound(K), i
  xl = rng.standard_normal((T, K + 64)).astype(np.float32)   # each token's input the first K of a longer row
  assert relerr(lin(Tensor(xl, device="CPU"), prefix=True).numpy(), xl[:, :K].astype(np.float64) @ W.T) < fp32_bound(K)

# rows split mid-slot; in place; several tokens (a slot's rows in groups of 4 and fewer at its end; panels of 28 and 4 tokens);
# K of 6 blocks read in place (GLM-4.7-Flash's per-head k_b: 192 of a head's 256) and 3 blocks, a short last group of blocks;
# short rows of 16 or more tokens, 16 a vector (20: one group of 32 lanes, part of it past the tokens; 40: two; 192 in place)
@pytest.mark.parametrize("H,N,K,stride,T", [(3, 40, 128, 0, 1), (4, 16, 256, 320, 1), (2, 7, 128, 192, 1), (3, 10, 256, 0, 8), (2, 7, 2304, 0, 32),
                                            (4, 16, 192, 256, 1), (2, 7, 96, 0, 8), (2, 9, 160, 0, 20), (3, 10, 128, 0, 40),
                                            (4, 16, 192, 256, 17)])
def test_cpu_per_slot_product(tmp_path, H, N, K, stride, T):
  gf, W = expert_file(tmp_path, [("attn_k_b.weight", GGMLType.Q4_0, (K, N, H))], seed=H)
  kb = QuantizedExpertWeights.from_gguf(gf, "attn_k_b.weight", device="CPU")
  rng = np.random.default_rng(K)
  fn = (lambda x: kb.batched(x, slot_stride=stride).contiguous()) if stride else (lambda x: kb.batched(x).contiguous())
  step = TinyJit(fn)
  for i in range(4):
    xs = rng.standard_normal((T, H * stride) if stride else (T, H, K)).astype(np.float32)
    x = xs.reshape(T, H, stride)[..., :K] if stride else xs
    want = np.einsum("hnk,thk->thn", W["attn_k_b.weight"], x.astype(np.float64))
    assert relerr(fn(Tensor(xs, device="CPU")).numpy().reshape(T, H, N), want) < fp32_bound(K), i
    assert relerr(step(Tensor(xs, device="CPU")).numpy().reshape(T, H, N), want) < fp32_bound(K), i
  spec = KernelSpec("batched", kb.groups[0].fmt, T, H, N, K, H, True, False, "CPU", x_stride=stride)
  assert kernel_for(spec) is cpu.kernel(N, K, False, "CPU", H, stride, *((T,) if T > 1 else ()))

# a decode step's entries (one or 3 tokens' experts; ids past the experts clamped) and a chunk's, which go in tiles of 16
# entries an expert (8 or more entries an expert on average; an expert with none; a symbolic chunk length; K of 4608: a
# tile's 16 entries in panels of 12 and 4)
@pytest.mark.parametrize("B,J,E,K", [(1, 3, 6, 256), (3, 2, 6, 256), (40, 3, 6, 256), (40, 3, 6, 4608)])
def test_cpu_routed_experts(tmp_path, B, J, E, K):
  N = 24
  gf, W = expert_file(tmp_path, [("e", GGMLType.Q4_0, (K, N, E))], seed=B)
  ex = QuantizedExpertWeights.from_gguf(gf, "e", device="CPU")
  rng = np.random.default_rng(J)
  sel = rng.integers(0, E - 1, (B, J)).astype(np.int32)   # (expert E - 1 unused)
  step = TinyJit(lambda s, x: ex(s, x).contiguous())
  for x in (rng.standard_normal((B, K)).astype(np.float32), rng.standard_normal((B, J, K)).astype(np.float32)):   # x shared; a slot's
    assert relerr(ex(Tensor(sel, device="CPU"), Tensor(x, device="CPU")).numpy(), expert_ref(W["e"], sel, x)) < fp32_bound(K)
  for i in range(3):   # new routings replayed
    sel = rng.integers(0, E + 2, (B, J)).astype(np.int32)
    x = rng.standard_normal((B, K)).astype(np.float32)
    assert relerr(step(Tensor(sel, device="CPU"), Tensor(x, device="CPU")).numpy(), expert_ref(W["e"], np.minimum(sel, E - 1), x)) < fp32_bound(K), i
  fmt = ex.groups[0].fmt
  if B * J >= 8 * E:
    spec = KernelSpec("experts", fmt, -(-B * J // 16) + E, 16, N, K, E, True, True, "CPU", per_tile=True)
    assert kernel_for(spec) is cpu.kernel(N, K, False, "CPU", spec.B, 0, 16, ("tiles", E))
    v, t = UOp.variable("n_tokens", 1, B), 33
    xb = Tensor(rng.standard_normal((B, J, K)).astype(np.float32), device="CPU").realize()
    y = ex(Tensor(sel, device="CPU")[:v.bind(t)], xb[:v.bind(t)])
    out = y.pad(((0, B - y.shape[0]), None, None)).numpy()[:t]
    assert relerr(out, expert_ref(W["e"], np.minimum(sel, E - 1)[:t], xb.numpy()[:t])) < fp32_bound(K)
  else:
    entries = cpu.kernel(N, K, False, "CPU", B * J, 0, 1, ("entries", E, J, False))
    assert kernel_for(KernelSpec("experts", fmt, B, J, N, K, E, False, True, "CPU")) is entries

def test_seam_gives_the_cpu_product_q4_0_products():
  """Q4_0, any number of tokens, any K (3 blocks too), the residual or none, on the CPU and the hand-written path: the CPU
  product; another type, a fused norm or SwiGLU, another device or the generated path: not it."""
  q4, q8 = format_for(GGMLType.Q4_0, 256), format_for(GGMLType.Q8_0, 256)
  spec = lambda fmt=q4, B=1, K=256, device="CPU", **kw: KernelSpec("linear", fmt, B, 1, 64, K, 1, False, False, device, **kw)
  mine = lambda k, K=256: k is not None and k in (cpu.kernel(64, K, False, "CPU"), cpu.kernel(64, K, True, "CPU"))   # (cached)
  assert kernel_for(spec()) is cpu.kernel(64, 256, False, "CPU") and kernel_for(spec(residual=True)) is cpu.kernel(64, 256, True, "CPU")
  for B in (2, 512): assert kernel_for(spec(B=B)) is cpu.kernel(64, 256, False, "CPU", 1, 0, B)
  for other in (spec(fmt=q8), spec(norm=True, eps=1e-6), spec(glu=True), spec(kernels="generated"), spec(device="NULL")):
    assert not mine(kernel_for(other)), other
  assert kernel_for(spec(fmt=format_for(GGMLType.Q4_0, 96), K=96)) is cpu.kernel(64, 96, False, "CPU")

@pytest.mark.parametrize("H,L,R,kv_offset,positions", [(4, 64, 32, 0, (0, 1, 9)), (3, 512, 64, 8, (5, 40))])   # heads split unevenly
def test_cpu_decode_attention(H, L, R, kv_offset, positions):
  """MLA decode attention of one token on the CPU against the tinygrad-ops reference: the output and the cache row it
  writes, at several positions (the new row its own key), with the sequence's rows past a base, replayed in a TinyJit."""
  from apps.kernels import mla_attention
  from apps.mla import decode_attention_reference
  rng = np.random.default_rng(H)
  nope, ctx, base = 16, 48, 48   # the sequence's rows start at cache row 48 (a second slot)
  f = lambda *s: Tensor(rng.standard_normal(s).astype(np.float32), device="CPU").realize()
  cache0 = rng.standard_normal((2 * ctx, L + R)).astype(np.float32)
  ang = rng.uniform(0, 6.28, (ctx, R // 2)).astype(np.float32)
  cos, sin = Tensor(np.cos(ang), device="CPU").realize(), Tensor(np.sin(ang), device="CPU").realize()
  kw = dict(n_head=H, kv_lora=L, qk_nope=nope, qk_rope=R, scale=0.11, eps=1e-6)
  assert mla_attention.decodes("CPU", Tensor(cache0, device="CPU"), H, L, R)
  cache = Tensor(cache0, device="CPU").realize()
  pos = Tensor(np.array([[0, base]], np.int32), device="CPU").realize()
  attend = lambda ql, qr, kv, w: mla_attention.mla_decode_attention(ql, qr, kv, w, cache, cos, sin, pos, kv_offset=kv_offset, **kw)
  step = TinyJit(lambda *a: attend(*a).realize())
  for p in positions:
    q_lat, q_raw, kv_raw, w = f(1, H, L), f(1, H * (nope + R)), f(1, kv_offset + L + R), f(L)
    pos.assign(Tensor(np.array([[p, base]], np.int32), device="CPU")).realize()
    ref_cache = Tensor(cache.numpy()[base:base + ctx], device="CPU").realize()
    want = decode_attention_reference(q_lat, q_raw, kv_raw[:, kv_offset:], w, ref_cache, cos, sin, p, **kw)
    got = step(q_lat, q_raw, kv_raw, w)
    assert relerr(got.numpy().reshape(H, L), want.numpy()) < 1e-5, p
    np.testing.assert_allclose(cache.numpy()[base + p], ref_cache.numpy()[p], rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("H,B,q_pad", [(4, 3, 0), (3, 4, 40)])   # (row, head) pairs split mid-row; rows longer than their heads
def test_cpu_decode_attention_rows(H, B, q_pad):
  """A batched step's rows on the CPU, each its own sequence (slot), position and input rows, replayed in a TinyJit: each
  row's output and cache row as the tensor-ops reference makes them for that sequence alone; the other slots' rows untouched."""
  from apps.kernels import mla_attention
  from apps.mla import decode_attention_reference
  rng = np.random.default_rng(B)
  L, R, nope, ctx, kv_offset = 64, 32, 16, 24, 8
  f = lambda *s: Tensor(rng.standard_normal(s).astype(np.float32), device="CPU").realize()
  cache0 = rng.standard_normal((B * ctx, L + R)).astype(np.float32)
  ang = rng.uniform(0, 6.28, (ctx, R // 2)).astype(np.float32)
  cos, sin = Tensor(np.cos(ang), device="CPU").realize(), Tensor(np.sin(ang), device="CPU").realize()
  kw = dict(n_head=H, kv_lora=L, qk_nope=nope, qk_rope=R, scale=0.11, eps=1e-6)
  cache = Tensor(cache0, device="CPU").realize()
  pos = Tensor(np.zeros((B, 2), np.int32), device="CPU").realize()
  step = TinyJit(lambda ql, qr, kv, w: mla_attention.mla_decode_attention(ql, qr, kv, w, cache, cos, sin, pos, kv_offset=kv_offset, **kw).realize())
  for rnd, base_pos in enumerate((0, 5, 17)):
    slots = rng.permutation(B)   # row b continues the sequence in slot slots[b], at a position of its own
    table = np.array([[base_pos + b, s * ctx] for b, s in enumerate(slots)], np.int32)
    pos.assign(Tensor(table, device="CPU")).realize()
    q_lat, q_raw, kv_raw, w = f(B, H, L), f(B, H * (nope + R) + q_pad), f(B, kv_offset + L + R), f(L)
    before = cache.numpy().copy()
    got = step(q_lat, q_raw, kv_raw, w).numpy().reshape(B, H, L)
    after = cache.numpy()
    for b, (p, base) in enumerate(table):
      ref_cache = Tensor(before[base:base + ctx], device="CPU").realize()
      want = decode_attention_reference(q_lat[b:b + 1], q_raw[b:b + 1, :H * (nope + R)], kv_raw[b:b + 1, kv_offset:], w, ref_cache,
                                        cos, sin, int(p), **kw)
      assert relerr(got[b], want.numpy().reshape(H, L)) < 1e-5, (rnd, b)
      np.testing.assert_allclose(after[base + p], ref_cache.numpy()[p], rtol=1e-5, atol=1e-6)
    written = {int(base + p) for p, base in table}
    untouched = [i for i in range(B * ctx) if i not in written]
    np.testing.assert_array_equal(after[untouched], before[untouched])

@pytest.mark.parametrize("H,T,starts", [(4, 32, (0, 40, 200)), (3, 7, (9, 60, 250))])   # 4 heads a unit, then 1; a chunk reaching the end
def test_cpu_prefill_attention(H, T, starts):
  """A prefill chunk's causal attention on the CPU against the tensor-op latent attention of the same rows: chunks of
  several lengths, each replayed in a TinyJit at several positions of a sequence whose rows start at cache row 256 (a
  second slot); a chunk's rows past the sequence's last row (a padded chunk's) are computed and left out."""
  from apps.kernels import mla_attention
  from apps.mla import latent_attention
  rng = np.random.default_rng(H)
  L, R, ctx, base = 64, 32, 256, 256
  cache = Tensor(rng.standard_normal((2 * ctx, L + R)).astype(np.float32), device="CPU").realize()
  pos = Tensor(np.zeros(2, np.int32), device="CPU").realize()
  assert mla_attention.prefills("CPU", cache, H, L, R)
  for t in sorted({1, T // 2 + 1, T}):
    step = TinyJit(lambda q, q_pe: mla_attention.mla_prefill_attention(q, q_pe, cache, pos, kv_lora=L, qk_rope=R, scale=0.11,
                                                                       max_context=ctx).realize())
    for start in starts:
      q, q_pe = (rng.standard_normal((t, H, d)).astype(np.float32) for d in (L, R))
      pos.assign(Tensor(np.array([start, base], np.int32), device="CPU")).realize()
      got, n = step(Tensor(q, device="CPU"), Tensor(q_pe, device="CPU")).numpy(), min(t, ctx - start)
      want = latent_attention(Tensor(np.concatenate([q, q_pe], -1)[:n], device="CPU"), cache[base:base + ctx], start, L, 0.11).numpy()
      assert relerr(got[:n], want) < 1e-5, (start, t)

@settings(max_examples=12, deadline=None)
@given(typ=st.sampled_from([GGMLType.Q4_0, GGMLType.Q5_K, GGMLType.Q6_K]), N=st.integers(1, 24), blocks=st.integers(1, 96),
       T=st.integers(1, 140), seed=st.integers(0, 2**16))
def test_cpu_products_of_any_shape(typ, N, blocks, T, seed):
  """Any number of rows, tokens and blocks of K (1-96 blocks, 1-140 tokens: tiles, chunks of K, panels and Q4_0's groups of 4
  blocks of every length, short last ones included) against gguf-py's dequantization in float64."""
  K = blocks * (32 if typ == GGMLType.Q4_0 else 256)
  rng = np.random.default_rng(seed)
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  lin = QuantizedLinear(PackedTensor.from_bytes(raw, typ, (K, N), device="CPU"))
  many = (T,) if T > 1 else ()
  mine = cpu.kernel(N, K, False, "CPU", *((1, 0) + many if many else ())) if typ == GGMLType.Q4_0 else \
    cpu.kernel_k(typ.name.lower(), N, K, False, "CPU", *many)
  assert kernel_for(KernelSpec("linear", lin.w.fmt, T, 1, N, K, 1, False, False, "CPU")) is mine
  x = rng.standard_normal((T, K)).astype(np.float32)
  assert relerr_terms(lin(Tensor(x, device="CPU")).numpy(), x, W) < fp32_bound(K)   # one row's terms may cancel: not relerr
