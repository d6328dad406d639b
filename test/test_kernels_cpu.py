"""The CPU's hand-written decode product (apps/kernels/cpu.py): one token's Q4_0 product with or without its residual, and
its per-slot product (MLA's per-head k_b / v_b: each head its weights and input, the input read in place from a longer row),
against gguf-py's dequantization in float64, alone and replayed in a TinyJit on new inputs; and the seam giving it the
products it takes, and nothing else."""
import shutil
import numpy as np
import pytest
from tinygrad import Tensor, TinyJit
from apps.gguf import GGMLType
from apps.packed import PackedTensor, format_for
from apps.quantized import QuantizedLinear, QuantizedExpertWeights
from apps.dispatch import KernelSpec, kernel_for
from apps.kernels import cpu
from test_quantized import random_tensor, ref_weight, relerr, fp32_bound, expert_file

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

@pytest.mark.parametrize("H,N,K,stride", [(3, 40, 128, 0), (4, 16, 256, 320), (2, 7, 128, 192)])   # rows split mid-slot; in place
def test_cpu_per_slot_product(tmp_path, H, N, K, stride):
  gf, W = expert_file(tmp_path, [("attn_k_b.weight", GGMLType.Q4_0, (K, N, H))], seed=H)
  kb = QuantizedExpertWeights.from_gguf(gf, "attn_k_b.weight", device="CPU")
  rng = np.random.default_rng(K)
  fn = (lambda x: kb.batched(x, slot_stride=stride).contiguous()) if stride else (lambda x: kb.batched(x).contiguous())
  step = TinyJit(fn)
  for i in range(4):
    xs = rng.standard_normal((1, H * stride) if stride else (1, H, K)).astype(np.float32)
    x = xs.reshape(1, H, stride)[..., :K] if stride else xs
    want = np.einsum("hnk,thk->thn", W["attn_k_b.weight"], x.astype(np.float64))
    assert relerr(fn(Tensor(xs, device="CPU")).numpy().reshape(1, H, N), want) < fp32_bound(K), i
    assert relerr(step(Tensor(xs, device="CPU")).numpy().reshape(1, H, N), want) < fp32_bound(K), i
  spec = KernelSpec("batched", kb.groups[0].fmt, 1, H, N, K, H, True, False, "CPU", x_stride=stride)
  assert kernel_for(spec) is cpu.kernel(N, K, False, "CPU", H, stride)

def test_seam_gives_the_cpu_product_one_token_q4_0_products():
  """Q4_0, one token, K a multiple of 128, the residual or none, on the CPU and the hand-written path: the CPU product;
  more tokens, another type, a K of 3 blocks, a fused norm or SwiGLU, another device or the generated path: not it."""
  q4, q8 = format_for(GGMLType.Q4_0, 256), format_for(GGMLType.Q8_0, 256)
  spec = lambda fmt=q4, B=1, K=256, device="CPU", **kw: KernelSpec("linear", fmt, B, 1, 64, K, 1, False, False, device, **kw)
  mine = lambda k, K=256: k is not None and k in (cpu.kernel(64, K, False, "CPU"), cpu.kernel(64, K, True, "CPU"))   # (cached)
  assert kernel_for(spec()) is cpu.kernel(64, 256, False, "CPU") and kernel_for(spec(residual=True)) is cpu.kernel(64, 256, True, "CPU")
  for other in (spec(B=2), spec(fmt=q8), spec(norm=True, eps=1e-6), spec(glu=True), spec(kernels="generated"), spec(device="NULL")):
    assert not mine(kernel_for(other)), other
  assert not mine(kernel_for(spec(fmt=format_for(GGMLType.Q4_0, 96), K=96)), K=96)

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
  assert mla_attention.decodes("CPU", Tensor(cache0, device="CPU"), False, H, L, R)
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
