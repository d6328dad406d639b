"""The fused decode matvecs (norm before, SwiGLU / expert mix / residual after) against float64 references.

On the CPU the layers run the fusions as separate ops around the portable kernels; on a CUDA or Metal device the same
calls run the hand-written kernels of apps/kernels/matvec.py (the GPU machine runs this file with DEV=CUDA). Here the
rendered CUDA and Metal sources of the kernels also RUN, on the dialect's CPU emulator (test/emulator.py), against
gguf-py's dequantization in float64: every type, every fusion, 1/2/4 rows per warp, chunk counts that are not a multiple
of the 32 lanes and several load batches. The CUDA sources of every variant are compiled with nvcc here
(DEV=NULL:NVCC:sm_90) and the Metal ones rendered."""
import numpy as np
import pytest
from apps.gguf import GGUFFile, GGMLType, BLOCK
from apps.quantized import QuantizedLinear, QuantizedExpertWeights
from apps.dispatch import KernelSpec, kernel_for
from apps.kernels import matvec, render, language_of
from tinygrad import Tensor, Device, GlobalCounters
from test_quantized import random_tensor, ref_weight, write_gguf, relerr, fp32_bound, x24, near_tie_case, top_k_sets
from nvcc import needs_nvcc, run_nvcc_script, sm90_registers
from emulator import emulate
from apps.packed import PackedTensor

TYPES = list(matvec.TYPES)
EPS = 1e-6

def rms(x: np.ndarray, g: np.ndarray) -> np.ndarray:
  x = x.astype(np.float64)
  return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * g

def seen(typ, x: np.ndarray, g: np.ndarray | None = None, kernels: bool = True) -> np.ndarray:
  """x as a kernel for weights of type `typ` multiplies it: rms_norm(x) * g with `g`. The xint types round x * g (fp32) to
  24 bits per block (test_quantized.x24) and apply the norm's scale after the product; `kernels`=False: the portable path,
  which does neither."""
  if not (kernels and matvec.TYPES[typ].xint): return x.astype(np.float64) if g is None else rms(x, g)
  if g is None: return x24(x)
  x64 = x.astype(np.float64)
  return x24(x * g) / np.sqrt((x64 * x64).mean(-1, keepdims=True) + EPS)

def test_x24_is_within_two_steps():
  """The rounding the references apply: every value within two steps (max |v| / 8323072) of its block, zeros exact (half a
  step of rounding; d, 1 / d and v / d in fp32 add up to half a step each at X ~ 2^23: 2^-22 of the block's max)."""
  v = np.random.default_rng(9).standard_normal((3, 128)).astype(np.float32) * np.float32([[1e-3], [1.0], [1e4]])
  v[0, :32] = 0
  b, r = v.reshape(3, 4, 32).astype(np.float64), x24(v).reshape(3, 4, 32)
  step = np.abs(b).max(-1, keepdims=True) / 8323072
  assert (np.abs(r - b) <= 2 * step).all() and (r[0, 0] == 0).all()
  assert np.abs(r).max(-1).ravel().tolist() == pytest.approx(np.abs(b).max(-1).ravel().tolist(), rel=1e-6)

ON_KERNELS = language_of(Device.DEFAULT) is not None  # the device runs the hand-written kernels (tests below on the device)

def silu(v):
  with np.errstate(over="ignore"): return v / (1 + np.exp(-v))

# fused results: an rms scale (K squares summed), the product, and for glu a second product and the silu: each step adds
# at most the fp32 rounding of a K-term sum, so a few times the plain bound
BOUND = lambda K: 4 * fp32_bound(K)

def weight_file(tmp_path, typ, ne, seed=0, name="w.weight"):
  raw = random_tensor(typ, ne, np.random.default_rng(seed))
  write_gguf(tmp_path / "w.gguf", [(name, ne, typ, raw)])
  return GGUFFile(tmp_path / "w.gguf"), ref_weight(raw, typ, ne).astype(np.float64)

@pytest.mark.parametrize("typ", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("B", [1, 2])
def test_linear_fusions(tmp_path, typ, B):
  K, F = 512, 40
  gf, W = weight_file(tmp_path, typ, (K, 2 * F))
  lin = QuantizedLinear.from_gguf(gf, "w.weight")
  rng = np.random.default_rng(1)
  x, g = rng.standard_normal((B, K)).astype(np.float32), rng.standard_normal(K).astype(np.float32)
  r = rng.standard_normal((B, 2 * F)).astype(np.float32)
  xn, x64 = seen(typ, x, g, ON_KERNELS), seen(typ, x, kernels=ON_KERNELS)
  cases = {
    "plain": (lin(Tensor(x)), x64 @ W.T),
    "norm": (lin(Tensor(x), norm=(Tensor(g), EPS)), xn @ W.T),
    "residual": (lin(Tensor(x), residual=Tensor(r)), r + x64 @ W.T),
    "norm+glu": (lin(Tensor(x), norm=(Tensor(g), EPS), glu=True), silu(xn @ W[:F].T) * (xn @ W[F:].T)),
  }
  for name, (out, ref) in cases.items():
    out = out.numpy()
    assert out.shape == ref.shape, name
    assert relerr(out, ref) < BOUND(K), (name, relerr(out, ref))

@pytest.mark.parametrize("typ", TYPES, ids=lambda t: t.name)
def test_expert_fusions(tmp_path, typ):
  K, F, E, J, B = 512, 24, 6, 3, 2
  gf, W = weight_file(tmp_path, typ, (K, 2 * F, E))
  ex = QuantizedExpertWeights.from_gguf(gf, "w.weight")
  rng = np.random.default_rng(2)
  sel = np.array([[1, 1, 5], [0, 4, 2]], dtype=np.int32)
  x, g = rng.standard_normal((B, K)).astype(np.float32), rng.standard_normal(K).astype(np.float32)
  xj, mix = rng.standard_normal((B, J, K)).astype(np.float32), rng.random((B, J)).astype(np.float32)
  r = rng.standard_normal((B, 2 * F)).astype(np.float32)
  xn = seen(typ, x, g, ON_KERNELS)
  Ws = W[sel]                                                                   # (B, J, 2F, K)
  ref_glu = silu(np.einsum("bjnk,bk->bjn", Ws[:, :, :F], xn)) * np.einsum("bjnk,bk->bjn", Ws[:, :, F:], xn)
  ref_mix = r + np.einsum("bj,bjnk,bjk->bn", mix.astype(np.float64), Ws, seen(typ, xj, kernels=ON_KERNELS))
  out = ex(Tensor(sel), Tensor(x), norm=(Tensor(g), EPS), glu=True).numpy()
  assert out.shape == (B, J, F) and relerr(out, ref_glu) < BOUND(K), relerr(out, ref_glu)
  out = ex(Tensor(sel), Tensor(xj), mix=Tensor(mix), residual=Tensor(r)).numpy()
  assert out.shape == (B, 2 * F) and relerr(out, ref_mix) < BOUND(K), relerr(out, ref_mix)

def test_run_sum(tmp_path):
  """quantized.run_sum of the routed experts' down (mix + residual) and a shared expert's down (Q6_K): their sum, one kernel
  where the device has hand-written kernels, else each call's kernel (the residual carried into the second); a Tensor
  (a call no kernel served) is added as it is."""
  from apps.dispatch import run_sum
  rng = np.random.default_rng(14)
  K, N, E, J, B = 512, 24, 6, 3, 1
  for name, typ, ne in (("r.weight", GGMLType.Q4_0, (K, N, E)), ("s.weight", GGMLType.Q6_K, (2 * K, N))):
    raw = random_tensor(typ, ne, rng)
    write_gguf(tmp_path / f"{name}.gguf", [(name, ne, typ, raw)])
  routed = QuantizedExpertWeights.from_gguf(GGUFFile(tmp_path / "r.weight.gguf"), "r.weight")
  shared = QuantizedLinear.from_gguf(GGUFFile(tmp_path / "s.weight.gguf"), "s.weight")
  Wr = ref_weight(GGUFFile(tmp_path / "r.weight.gguf").tensor_data("r.weight"), GGMLType.Q4_0, (K, N, E)).astype(np.float64)
  Ws = ref_weight(GGUFFile(tmp_path / "s.weight.gguf").tensor_data("s.weight"), GGMLType.Q6_K, (2 * K, N)).astype(np.float64)
  sel = np.array([[5, 0, 2]], dtype=np.int32)
  xj, mix = rng.standard_normal((B, J, K)).astype(np.float32), rng.random((B, J)).astype(np.float32)
  xs, r = rng.standard_normal((B, 2 * K)).astype(np.float32), rng.standard_normal((B, N)).astype(np.float32)
  ref = r + np.einsum("bj,bjnk,bjk->bn", mix.astype(np.float64), Wr[sel], seen(GGMLType.Q4_0, xj, kernels=ON_KERNELS)) + \
        xs.astype(np.float64) @ Ws.T
  ts = [Tensor(a).realize() for a in (sel, xj, mix, r, xs)]
  calls = lambda: (routed.call(ts[0], ts[1], mix=ts[2], residual=ts[3]), shared.call(ts[4]))
  GlobalCounters.reset()
  out = run_sum(*calls()).numpy()
  assert out.shape == (B, N) and relerr(out, ref) < BOUND(3 * K), relerr(out, ref)
  if ON_KERNELS: assert GlobalCounters.kernel_count == 1
  a, b = calls()
  out = run_sum(a, run_sum(b)).numpy()  # the second as a Tensor
  assert relerr(out, ref) < BOUND(3 * K), relerr(out, ref)

@pytest.mark.parametrize("typ", TYPES, ids=lambda t: t.name)
def test_batched(tmp_path, typ):
  K, N, H = 256, 40, 5
  gf, W = weight_file(tmp_path, typ, (K, N, H))
  ex = QuantizedExpertWeights.from_gguf(gf, "w.weight")
  x = np.random.default_rng(3).standard_normal((1, H, K)).astype(np.float32)
  out = ex.batched(Tensor(x)).numpy()
  ref = np.einsum("hnk,bhk->bhn", W, seen(typ, x, kernels=ON_KERNELS))
  assert relerr(out, ref) < fp32_bound(K)

def test_fused_is_one_kernel_on_source_devices(tmp_path):
  """Where hand-written kernels exist, a fused call is one kernel; elsewhere the seam says no fused kernel exists."""
  gf, _ = weight_file(tmp_path, GGMLType.Q4_0, (256, 64))
  lin = QuantizedLinear.from_gguf(gf, "w.weight")
  spec = KernelSpec("linear", lin.w.fmt, 1, 1, 32, 256, 1, False, False, Device.DEFAULT.split(":")[0], norm=True, glu=True, eps=EPS)
  if language_of(Device.DEFAULT) is None:
    assert kernel_for(spec) is None
    return
  x, g, r = Tensor.randn(1, 256).realize(), Tensor.randn(256).realize(), Tensor.randn(1, 32).realize()
  GlobalCounters.reset()
  lin(x, norm=(g, EPS), glu=True, residual=r).realize()
  assert GlobalCounters.kernel_count == 1

def _variants():
  for t in TYPES:
    K = 512
    yield matvec.MatvecShape("linear", t, 1, 1, 2048, 2048, 1, False, norm=True, residual=True)
    yield matvec.MatvecShape("linear", t, 2, 1, 96, K, 1, False, norm=True, glu=True)
    yield matvec.MatvecShape("experts", t, 1, 4, 1536, 2048, 64, False, norm=True, glu=True)
    yield matvec.MatvecShape("experts", t, 1, 6, 2048, 1536, 64, True, mix=True, residual=True)
    yield matvec.MatvecShape("batched", t, 1, 16, 512, 256, 16, True)
    yield matvec.MatvecShape("batched", t, 1, 16, 512, 256, 16, True, x_stride=320)

def test_metal_sources_render():
  """Every kernel variant renders as MSL (not compiled here: no Metal toolchain; unverified on real Metal hardware)."""
  for s in _variants():
    src = render(matvec._with_eps(matvec.build(s), EPS), "METAL")
    assert "kernel void" in src and "simd_sum" in src and "EPS_VALUE" not in src

COMPILE = r"""
import os, apps
from tinygrad import Device
from apps.kernels import matvec, render
import test_kernels_matvec as T
from concurrent.futures import ThreadPoolExecutor
ren = Device["NULL"].renderer
with ThreadPoolExecutor(os.cpu_count()) as pool:   # an nvcc process a core
  n = len(list(pool.map(lambda s: ren.compiler.compile(render(matvec._with_eps(matvec.build(s), T.EPS), "CUDA")), T._variants())))
print("COMPILED", n)
"""

@pytest.mark.slow  # ~25 s on one core: nvcc compiles 35 kernels
@needs_nvcc
def test_cuda_sources_compile():
  assert f"COMPILED {len(list(_variants()))}" in run_nvcc_script(COMPILE)

# ---------------------------------------------------------------- the rendered sources, run on the CPU emulator

def emulated(s: matvec.MatvecShape, rows: int, language: str, W_raw, ne, x, sel=None, mix=None, g=None, r=None, work=None, warps=4):
  """Output of the kernel for shape s (rows per warp `rows`) run by the emulator on the packed parts of W_raw."""
  fmt, host = PackedTensor.pack_host(W_raw, s.type, ne)
  k = matvec._with_eps(matvec.build(s, matvec.Plan(warps, rows)), EPS)
  shape = (s.B, s.N) if s.mix or s.op == "linear" else (s.B, s.J, s.N)
  bufs = [np.full(shape, np.nan, np.float32), np.ascontiguousarray(x, np.float32)]
  bufs += [np.ascontiguousarray(a) for a in (sel, mix, g, r) if a is not None]
  bufs += [np.ascontiguousarray(host[p]) for p, _, _ in fmt.parts]
  emulate(k, language, bufs, work)
  return bufs[0]

def _k_for(typ, chunks):  # a K with about this many lane chunks per row (whole packed blocks)
  tc = matvec.TYPES[typ]
  cpb = tc.block // tc.ch
  return -(-chunks // cpb) * tc.block

@pytest.mark.parametrize("typ", TYPES, ids=lambda t: t.name)
def test_emulated_linear(tmp_path, typ):
  """norm + glu + residual at 4 rows per warp (8 accumulators, load batches split across chunks); plain at 1 row per warp
  and 16 warps with 33 chunks (a second, partial chunk per lane); norm + residual at 2 rows and 8 warps, N not a multiple
  of the rows of a workgroup; the same for 9 tokens (a batched decode step: the tokens fastest in the grid)."""
  rng = np.random.default_rng(4)
  for (B, F, chunks, rows, warps, fus) in [(2, 20, 64, 4, 4, ("norm", "glu", "residual")), (1, 7, 33, 1, 16, ()),
                                           (1, 13, 40, 2, 8, ("norm", "residual")), (9, 13, 40, 2, 8, ("norm", "residual"))]:
    K = _k_for(typ, chunks)
    N = 2 * F if "glu" in fus else F
    raw = random_tensor(typ, (K, N), rng)
    W = ref_weight(raw, typ, (K, N)).astype(np.float64)
    s = matvec.MatvecShape("linear", typ, B, 1, F, K, 1, False, norm="norm" in fus, residual="residual" in fus, glu="glu" in fus)
    x, g = rng.standard_normal((B, K)).astype(np.float32), rng.standard_normal(K).astype(np.float32)
    r = rng.standard_normal((B, F)).astype(np.float32)
    xn = seen(typ, x, g if s.norm else None)
    ref = silu(xn @ W[:F].T) * (xn @ W[F:].T) if s.glu else xn @ W.T
    if s.residual: ref = ref + r
    out = emulated(s, rows, "CUDA", raw, (K, N), x, g=g if s.norm else None, r=r if s.residual else None, work=tmp_path / "cuda",
                   warps=warps)
    assert relerr(out, ref) < BOUND(K), (typ.name, fus, relerr(out, ref))

@pytest.mark.parametrize("typ", TYPES, ids=lambda t: t.name)
def test_emulated_experts_and_batched(tmp_path, typ):
  """routed experts: norm + glu (one slot per workgroup), mix + residual (all slots staged in one workgroup), a batched
  (per-head) product; sel out of range clamps."""
  rng = np.random.default_rng(5)
  K, F, E, J, B = _k_for(typ, 36), 12, 5, 3, 2
  raw = random_tensor(typ, (K, 2 * F, E), rng)
  W = ref_weight(raw, typ, (K, 2 * F, E)).astype(np.float64)
  sel = np.array([[1, 1, 4], [0, 3, 2]], dtype=np.int32)
  x, g = rng.standard_normal((B, K)).astype(np.float32), rng.standard_normal(K).astype(np.float32)
  xj, mix = rng.standard_normal((B, J, K)).astype(np.float32), rng.random((B, J)).astype(np.float32)
  r = rng.standard_normal((B, 2 * F)).astype(np.float32)
  Ws, xn = W[sel], seen(typ, x, g)
  s = matvec.MatvecShape("experts", typ, B, J, F, K, E, False, norm=True, glu=True)
  ref = silu(np.einsum("bjnk,bk->bjn", Ws[:, :, :F], xn)) * np.einsum("bjnk,bk->bjn", Ws[:, :, F:], xn)
  out = emulated(s, 2, "CUDA", raw, (K, 2 * F, E), x, sel=sel, g=g, work=tmp_path / "glu")
  assert relerr(out, ref) < BOUND(K), relerr(out, ref)
  s = matvec.MatvecShape("experts", typ, B, J, 2 * F, K, E, True, mix=True, residual=True)
  ref = r + np.einsum("bj,bjnk,bjk->bn", mix.astype(np.float64), Ws, seen(typ, xj))
  out = emulated(s, 1, "CUDA", raw, (K, 2 * F, E), xj, sel=sel, mix=mix, r=r, work=tmp_path / "mix", warps=8)
  assert relerr(out, ref) < BOUND(K), relerr(out, ref)
  s = matvec.MatvecShape("batched", typ, 1, E, 2 * F, K, E, True)
  xh = rng.standard_normal((1, E, K)).astype(np.float32)
  out = emulated(s, 4, "CUDA", raw, (K, 2 * F, E), xh, work=tmp_path / "batched")
  assert relerr(out, np.einsum("hnk,bhk->bhn", W, seen(typ, xh))) < BOUND(K)

def test_emulated_keeps_near_tie_routing(tmp_path):
  """A decode token's routing after a matvec is the fp32 routing wherever the router's top-k margin is above fp32 rounding:
  test_quantized.near_tie_case's 12 tokens one at a time (a GLM-4.7-Flash-tiny attn_output matvec with its residual, then
  a router whose 2nd and 3rd logits are 3e-6 apart). x rounded to 16 bits moved the logits by ~1e-5 and flipped some of
  these choices (and full-size DeepSeek-V2-Lite's decode logits by 2e-3); at 24 bits the product is fp32-accurate."""
  T, N, K = 12, 256, 256
  raw, x, res, R, h = near_tie_case(22, T, N, K)
  s = matvec.MatvecShape("linear", GGMLType.Q4_0, 1, 1, N, K, 1, False, residual=True)
  out = np.concatenate([emulated(s, 1, "CUDA", raw, (K, N), x[t:t + 1], r=res[t:t + 1], work=tmp_path / str(t)) for t in range(T)])
  assert top_k_sets(out.astype(np.float64) @ R.T) == top_k_sets(h @ R.T)

def _zero_column(raw: np.ndarray, typ: GGMLType, K: int, N: int, k: np.ndarray) -> np.ndarray:
  """Q4_0 / Q8_0 bytes (K, N) with the weights of inputs k set to exactly 0 in every row (nibble 8, byte 0)."""
  blocks = raw.copy().reshape(N, K // 32, BLOCK[typ][1])
  kb, kk = k // 32, k % 32
  if typ == GGMLType.Q8_0: blocks[:, kb, 2 + kk] = 0
  else: blocks[:, kb, 2 + kk % 16] = np.where(kk < 16, (blocks[:, kb, 2 + kk % 16] & 0xF0) | 8, (blocks[:, kb, 2 + kk % 16] & 0x0F) | 0x80)
  return blocks.reshape(-1)

@pytest.mark.parametrize("typ", [t for t in TYPES if matvec.TYPES[t].xint], ids=lambda t: t.name)
def test_emulated_integer_x_blocks(tmp_path, typ):
  """Which x values share a scale: one large value per 32 (in alternating halves; its weights 0, so the product sees only
  the others) makes the rounding of the others coarse inside its block only. The kernel matches x rounded in blocks of
  32 to ~1e-7; x rounded in blocks of 16, or not rounded, is ~1e-3 away."""
  rng = np.random.default_rng(11)
  K, N = _k_for(typ, 40), 16
  big = np.arange(0, K, 32) + 16 * (np.arange(K // 32) % 2)
  raw = _zero_column(random_tensor(typ, (K, N), rng), typ, K, N, big)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  assert (W[:, big] == 0).all()
  x = rng.standard_normal((1, K)).astype(np.float32)
  x[0, big] = 3e5
  s = matvec.MatvecShape("linear", typ, 1, 1, N, K, 1, False)
  out = emulated(s, 1, "CUDA", raw, (K, N), x, work=tmp_path)
  ref = seen(typ, x) @ W.T
  other = x24(x, 16) @ W.T
  assert relerr(out, ref) < BOUND(K), relerr(out, ref)
  assert 20 * relerr(out, ref) < min(relerr(out, other), relerr(out, x.astype(np.float64) @ W.T))

@pytest.mark.parametrize("typ", [t for t in TYPES if matvec.TYPES[t].xint], ids=lambda t: t.name)
def test_emulated_integer_products_are_exact(tmp_path, typ):
  """Given x rounded to 24 bits, the integer kernels' block products are exact integers (the sums of x's bytes that the
  nibbles' offset needs included): what remains is the fp32 sum of a row's blocks, far inside the float kernels' bound.
  A sum of x's low bytes over half a block, off by ~1e-5 of the result, is inside that looser bound, not inside this one."""
  rng = np.random.default_rng(16)
  K, N, B = 1024, 24, 2
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  x = rng.standard_normal((B, K)).astype(np.float32)
  out = emulated(matvec.MatvecShape("linear", typ, B, 1, N, K, 1, False), 2, "CUDA", raw, (K, N), x, work=tmp_path)
  assert relerr(out, seen(typ, x) @ W.T) < fp32_bound(K // 32), relerr(out, seen(typ, x) @ W.T)

@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q6_K], ids=lambda t: t.name)
def test_emulated_x_stride(tmp_path, typ):
  """x rows (slots) wider than K: the kernel reads the first K of each, in place (a stacked layer's output; q_nope in q)."""
  rng = np.random.default_rng(7)
  K, N, H, B = _k_for(typ, 8), 24, 3, 2
  raw = random_tensor(typ, (K, N, H), rng)
  W = ref_weight(raw, typ, (K, N, H)).astype(np.float64)
  x = rng.standard_normal((B, K + 64)).astype(np.float32)
  g = rng.standard_normal(K).astype(np.float32)
  s = matvec.MatvecShape("linear", typ, B, 1, N, K, 1, False, norm=True, x_stride=K + 64)
  raw0 = raw[:raw.size // H]                                                   # expert 0 as a plain 2-D weight
  out = emulated(s, 2, "CUDA", raw0, (K, N), x, g=g, work=tmp_path / "linear")
  assert relerr(out, seen(typ, x[:, :K], g) @ W[0].T) < BOUND(K)
  xh = rng.standard_normal((1, H, K + 32)).astype(np.float32)
  s = matvec.MatvecShape("batched", typ, 1, H, N, K, H, True, x_stride=K + 32)
  out = emulated(s, 1, "CUDA", raw, (K, N, H), xh, work=tmp_path / "batched")
  assert relerr(out, np.einsum("hnk,bhk->bhn", W, seen(typ, xh[..., :K]))) < BOUND(K)
  # several tokens' heads inside rows of a stacked output (x_row: the rows L apart, the heads K + 32 apart), read in place:
  # the bits of the same heads taken out first
  L = H * (K + 32) + 40
  xs = rng.standard_normal((B, L)).astype(np.float32)
  s = matvec.MatvecShape("batched", typ, B, H, N, K, H, True, x_stride=K + 32, x_row=L)
  assert matvec.supports(s) and not matvec.supports(matvec.MatvecShape("batched", typ, B, H, N, K, H, True, x_stride=K + 32, x_row=L - 40 - 4))
  out = emulated(s, 1, "CUDA", raw, (K, N, H), xs, work=tmp_path / "rows")
  heads = np.ascontiguousarray(xs[:, :H * (K + 32)].reshape(B, H, K + 32))
  alone = emulated(matvec.MatvecShape("batched", typ, B, H, N, K, H, True, x_stride=K + 32), 1, "CUDA", raw, (K, N, H), heads,
                   work=tmp_path / "heads")
  assert not np.isnan(out).any() and out.tobytes() == alone.tobytes()

def test_prefix_inputs_match_sliced(tmp_path):
  """prefix=True: the layer's input is the first in_features of a wider x; same result as slicing it first."""
  gf, _ = weight_file(tmp_path, GGMLType.Q4_0, (256, 40))
  lin = QuantizedLinear.from_gguf(gf, "w.weight")
  x, g = Tensor.randn(1, 320).realize(), Tensor.randn(256).realize()
  np.testing.assert_allclose(lin(x, norm=(g, EPS), prefix=True).numpy(), lin(x[:, :256], norm=(g, EPS)).numpy(), rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match="in_features"): lin(x[:, :200], prefix=True)
  gf, _ = weight_file(tmp_path, GGMLType.Q4_0, (128, 32, 4), name="e.weight")
  ex = QuantizedExpertWeights.from_gguf(gf, "e.weight")
  xh = Tensor.randn(1, 4, 192).realize()
  np.testing.assert_allclose(ex.batched(xh, prefix=True).numpy(), ex.batched(xh[..., :128]).numpy(), rtol=1e-5, atol=1e-5)
  # slot_stride: the 4 slots of 192 at the head of a longer flat row (a stacked [q; kv_a] output), read in place
  xf = Tensor.randn(1, 4 * 192 + 96).realize()
  np.testing.assert_allclose(ex.batched(xf, slot_stride=192).numpy(), ex.batched(xf[:, :768].reshape(1, 4, 192)[..., :128]).numpy(),
                             rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match="holds no 4 slots of 192"): ex.batched(xf[:, :700], slot_stride=192)

def test_emulated_metal(tmp_path):
  """The MSL twins run the same math (one type of each family, the fusions with the most code)."""
  rng = np.random.default_rng(6)
  for typ in (GGMLType.Q4_0, GGMLType.Q5_K, GGMLType.Q6_K):
    K, F, B = _k_for(typ, 33), 9, 2
    raw = random_tensor(typ, (K, 2 * F), rng)
    W = ref_weight(raw, typ, (K, 2 * F)).astype(np.float64)
    x, g = rng.standard_normal((B, K)).astype(np.float32), rng.standard_normal(K).astype(np.float32)
    r = rng.standard_normal((B, F)).astype(np.float32)
    xn = seen(typ, x, g)
    s = matvec.MatvecShape("linear", typ, B, 1, F, K, 1, False, norm=True, residual=True, glu=True)
    out = emulated(s, 2, "METAL", raw, (K, 2 * F), x, g=g, r=r, work=tmp_path / typ.name)
    assert relerr(out, r + silu(xn @ W[:F].T) * (xn @ W[F:].T)) < BOUND(K)

def test_ab_kernel_tool_runs(tmp_path, capsys):
  """`tools.ab kernel` on a tiny preset with A = a copy of the module (on the CPU both variants are the portable kernels):
  a line per variant, identical greedy tokens, the package's module untouched; a missing A file is a one-line error."""
  import apps.kernels
  from pathlib import Path
  from tools import ab
  a = tmp_path / "matvec.py"
  a.write_text(Path(matvec.__file__).read_text())
  assert ab.main(["kernel", "--a", str(a), "--presets", "youtu-llm-2b-tiny", "--decode", "6", "--rounds", "1"]) == 0
  out = capsys.readouterr().out
  assert "round 1 A: median" in out and "round 1 B: median" in out and "greedy tokens A vs B: 10/10 the same" in out, out
  assert apps.kernels.matvec is matvec
  with pytest.raises(SystemExit): ab.main(["kernel", "--a", str(tmp_path / "none.py")])
  assert "no such file" in capsys.readouterr().err

def test_fusions_are_switches_the_model_takes():
  """apps.kernels.Fusions: stack_q decides at load whether DeepSeek-V2-Lite's direct attn_q is stacked with kv_a (the logits
  the same to fp32 either way), a loaded model switches the other fusions (set_fusions) but not that one, and an unknown fusion is
  an error that names the fusions."""
  from apps import synth
  from apps.kernels import Fusions, FUSIONS
  from apps.model import Transformer
  path = synth.generate("deepseek-v2-lite-tiny", "release", progress=False)
  on, off = (Transformer.from_gguf(path, max_context=32, fusions=f) for f in (Fusions(), Fusions(stack_q=False)))
  assert all(b.attn_qkv_a is not None and b.attn_q is None for b in on.blocks)
  assert all(b.attn_qkv_a is None and b.attn_q is not None for b in off.blocks)
  assert relerr(off.logits([1, 2, 3]), on.logits([1, 2, 3])) < 1e-5   # the same math, fp32 sums in another order
  with pytest.raises(ValueError, match="stack_q"): on.set_fusions(Fusions(stack_q=False))
  on.set_fusions(Fusions().without("trigger", "sum"))
  assert all(layer.fusions == Fusions(trigger=False, sum=False) for b in on.blocks for layer in b.layers())
  with pytest.raises(ValueError, match="fusions are " + ", ".join(FUSIONS)): Fusions().without("nothing")

AB_MODULES = r"""
import dataclasses
import apps, apps.kernels
from apps.gguf import GGMLType
from apps.packed import format_for
from apps.dispatch import KernelSpec, kernel_for
from apps.kernels import matvec, KernelModules
from tools import ab
spec = KernelSpec("linear", format_for(GGMLType.Q4_0, 256), 1, 1, 64, 256, 1, False, False, "NULL")
shape = lambda m: m.MatvecShape("linear", GGMLType.Q4_0, 1, 1, 64, 256, 1, False)
a = ab.load_variant(matvec.__file__, "matvec")
spec_a = dataclasses.replace(spec, modules=KernelModules(matvec=a))
print("A", kernel_for(spec_a) is a.kernel(shape(a), 0.0, "NULL"), kernel_for(spec_a) is not matvec.kernel(shape(matvec), 0.0, "NULL"))
print("B", kernel_for(spec) is matvec.kernel(shape(matvec), 0.0, "NULL"), apps.kernels.matvec is matvec)
"""

@needs_nvcc
def test_kernel_modules_reach_the_seam():
  """On a device with hand-written kernels (DEV=NULL:NVCC), a spec whose kernel modules name another version of matvec
  (what `tools.ab kernel` sets on the model for variant A) gets its kernel from that module, and a spec with the default
  modules from the checked-out one, which nothing replaced."""
  out = run_nvcc_script(AB_MODULES)
  assert "A True True" in out and "B True True" in out, out

@pytest.mark.parametrize("language", ["CUDA", "METAL"])
def test_emulated_side_by_side(tmp_path, language):
  """Two matvecs of one input in one launch (apps.kernels.side_by_side: a shared expert's Q5_K gate_up beside the routed
  experts' Q4_0 gate_up): each output bit for bit what its kernel gives alone, in the CUDA and the Metal source."""
  from apps.kernels import side_by_side
  rng = np.random.default_rng(12)
  K, F, E, J, B = 512, 24, 5, 3, 1
  shared_raw, routed_raw = random_tensor(GGMLType.Q5_K, (K, 2 * F), rng), random_tensor(GGMLType.Q4_0, (K, 2 * F, E), rng)
  x, g = rng.standard_normal((B, K)).astype(np.float32), rng.standard_normal(K).astype(np.float32)
  sel = np.array([[4, 0, 2]], dtype=np.int32)
  shapes = [matvec.MatvecShape("linear", GGMLType.Q5_K, B, 1, F, K, 1, False, norm=True, glu=True),
            matvec.MatvecShape("experts", GGMLType.Q4_0, B, J, F, K, E, False, norm=True, glu=True)]
  ks = [matvec._with_eps(matvec.build(s, matvec.Plan(4, r)), EPS) for s, r in zip(shapes, (2, 4))]
  parts = [PackedTensor.pack_host(raw, s.type, ne) for raw, s, ne in zip((shared_raw, routed_raw), shapes, ((K, 2 * F), (K, 2 * F, E)))]
  def bufs(i):
    fmt, host = parts[i]
    return [np.full((B, F) if i == 0 else (B, J, F), np.nan, np.float32), x] + ([sel] if i else []) + [g] + \
           [np.ascontiguousarray(host[p]) for p, _, _ in fmt.parts]
  alone = []
  for i, k in enumerate(ks):
    b = bufs(i)
    emulate(k, language, b, tmp_path / f"alone{i}")
    alone.append(b[0])
  both = side_by_side("shared_and_routed", ks)
  assert both.global_size == (sum(k.global_size[0] * k.global_size[1] * k.global_size[2] for k in ks), 1, 1)
  b0, b1 = bufs(0), bufs(1)
  emulate(both, language, b0 + b1, tmp_path / "both")
  assert b0[0].tobytes() == alone[0].tobytes() and b1[0].tobytes() == alone[1].tobytes()
  assert not np.isnan(alone[0]).any() and not np.isnan(alone[1]).any()

@needs_nvcc
def test_expert_mix_of_several_rows_fits_two_workgroups_an_sm(tmp_path):
  """A batched step's routed down with its mix, summed with the shared Q6_K down (DeepSeek-V2-Lite's and GLM-4.7-Flash's
  shapes at 2, 3, 4 and 8 rows): compiled for sm_90 in at most 128 registers a thread, so two of its workgroups share an SM
  (hoisting every load, it took 246 and 160: one an SM). Two rows a warp spill nothing; four (the plan from 3 tokens, eight
  accumulators) at most DeepSeek-V2-Lite's one word (its six mix weights; batches of 32 registers spilled 96 bytes). One
  row keeps its plan and bounds."""
  for J, F, KS in ((6, 1408, 2816), (4, 1536, 1536)):
    for B in (1, 2, 3, 4, 8):
      terms = (matvec.MatvecShape("experts", GGMLType.Q4_0, B, J, 2048, F, 64, True, residual=True, mix=True),
               matvec.MatvecShape("linear", GGMLType.Q6_K, B, 1, 2048, KS, 1, False))
      k = matvec._with_eps(matvec.build(terms), EPS)
      if B == 1: assert k.min_blocks == 1; continue
      n, stack = sm90_registers(render(k, "CUDA"), tmp_path)
      assert matvec.plan(terms).rows == (2 if B == 2 else 4), (J, B, matvec.plan(terms))
      assert k.min_blocks == 2 and n <= 65536 // (2 * k.local_size[0] * k.local_size[1]), (J, B, n)
      assert stack <= (0 if B == 2 else 8), (J, B, stack)   # an 8-byte frame holds the one spilled word

def test_plans():
  """Decode plans on the H100's 132 SMs: Youtu-LLM-2B's gate_up (384 workgroups at four rows a warp) runs as two rows at
  eight warps; its down (2048 rows of K = 6144) one row at sixteen warps (x's staging dominates)."""
  gate_up = matvec.MatvecShape("linear", GGMLType.Q4_0, 1, 1, 6144, 2048, 1, False, norm=True, glu=True)
  down = matvec.MatvecShape("linear", GGMLType.Q4_0, 1, 1, 2048, 6144, 1, False, residual=True)
  assert matvec.plan(gate_up) == matvec.Plan(8, 2) and matvec.plan(down) == matvec.Plan(16, 1)

def test_rows_with_a_short_last_chunk_take_half_warps():
  """A row whose last lane chunk is at most 16 steps (DeepSeek-V2-Lite's routed down: K = 1408, 44 Q4_0 blocks) runs on
  half a warp where the warp has an even number of rows: 48 lane slots a row against 64, whose last chunk idled 20 lanes;
  K = 2048 (64 blocks), one row a warp and a step of one token keep the whole warp."""
  down = lambda B, K: (matvec.MatvecShape("experts", GGMLType.Q4_0, B, 6, 2048, K, 64, True, residual=True, mix=True),
                       matvec.MatvecShape("linear", GGMLType.Q6_K, B, 1, 2048, 2816, 1, False))
  body = lambda s: matvec.build(s).body
  gate_up = matvec.MatvecShape("experts", GGMLType.Q4_0, 4, 6, 1408, 2048, 64, False, norm=True, glu=True)
  assert "sub = lane % 16" in body(down(4, 1408)) and "sub = lane % 32" in body(gate_up)
  assert matvec.plan(down(1, 1408)).rows == 1 and "sub = lane % 32" in body(down(1, 1408))
  q_b = lambda B: matvec.MatvecShape("linear", GGMLType.Q4_0, B, 1, 3072, 1536, 1, False)
  assert matvec.plan(q_b(1)).rows == 2 and "sub = lane % 32" in body(q_b(1)) and "sub = lane % 16" in body(q_b(2))

def test_batched_routed_experts_take_four_rows_at_eight_warps():
  """A batched step's routed experts: DeepSeek-V2-Lite's gate_up (each token its six experts) at four rows a warp and eight
  warps from 2 tokens (528 workgroups: 4 waves of two an SM), the down with its mix from 3 tokens (192 workgroups; at 2 its
  128 would leave SMs idle); GLM-4.7-Flash's (four experts a token) from 3, through 8 tokens; one token keeps its plan."""
  def shapes(B, J, F, KS):
    return (matvec.MatvecShape("experts", GGMLType.Q4_0, B, J, F, 2048, 64, False, norm=True, glu=True),
            (matvec.MatvecShape("experts", GGMLType.Q4_0, B, J, 2048, F, 64, True, residual=True, mix=True),
             matvec.MatvecShape("linear", GGMLType.Q6_K, B, 1, 2048, KS, 1, False)))
  rows = lambda J, F, KS: [tuple(matvec.plan(s).rows for s in shapes(B, J, F, KS)) for B in (1, 2, 3, 4, 5, 8)]
  assert rows(6, 1408, 2816) == [(2, 1), (4, 2), (4, 4), (4, 4), (4, 4), (4, 4)]
  assert rows(4, 1536, 1536) == [(2, 1), (2, 2), (4, 4), (4, 4), (4, 4), (4, 4)]
  assert all(matvec.plan(s).warps == 8 for B in (2, 4, 8) for s in shapes(B, 6, 1408, 2816))

@pytest.mark.parametrize("typ", [GGMLType.Q4_0, GGMLType.Q6_K], ids=lambda t: t.name)
def test_emulated_plans_agree_bit_for_bit(tmp_path, typ):
  """A row's arithmetic does not depend on the plan: four rows at four warps and two at eight (what plan() now picks
  instead) give the same bits, for a glu with the norm and for routed experts (the CUDA source on the emulator)."""
  rng = np.random.default_rng(14)
  K, F, E = _k_for(typ, 40), 16, 5
  x, g = rng.standard_normal((1, K)).astype(np.float32), rng.standard_normal(K).astype(np.float32)
  lin = matvec.MatvecShape("linear", typ, 1, 1, F, K, 1, False, norm=True, glu=True)
  raw = random_tensor(typ, (K, 2 * F), rng)
  a, b = (emulated(lin, r, "CUDA", raw, (K, 2 * F), x, g=g, work=tmp_path / f"lin{w}", warps=w) for r, w in ((4, 4), (2, 8)))
  assert not np.isnan(a).any() and a.tobytes() == b.tobytes()
  exp = matvec.MatvecShape("experts", typ, 1, 3, F, K, E, False, norm=True, glu=True)
  raw = random_tensor(typ, (K, 2 * F, E), rng)
  sel = np.array([[4, 0, 2]], dtype=np.int32)
  a, b = (emulated(exp, r, "CUDA", raw, (K, 2 * F, E), x, sel=sel, g=g, work=tmp_path / f"exp{w}", warps=w) for r, w in ((4, 4), (2, 8)))
  assert not np.isnan(a).any() and a.tobytes() == b.tobytes()

def test_side_by_side_plans():
  """DeepSeek-V2-Lite's decode gate_up, the shared expert's Q5_K beside the routed experts' Q4_0: the routed term keeps its
  own plan (2 rows a warp), the shared one takes one row (at its own plan's two, the launch needed 168 registers a lane),
  both at the most warps either plans."""
  shared = matvec.MatvecShape("linear", GGMLType.Q5_K, 1, 1, 2816, 2048, 1, False, norm=True, glu=True)
  routed = matvec.MatvecShape("experts", GGMLType.Q4_0, 1, 6, 1408, 2048, 64, False, norm=True, glu=True)
  assert matvec.plan(shared) == matvec.Plan(4, 2) and matvec.plan(routed) == matvec.Plan(8, 2)
  assert matvec.side_by_side_plans((shared, routed)) == [matvec.Plan(8, 1), matvec.Plan(8, 2)]

@pytest.mark.parametrize("language", ["CUDA", "METAL"])
def test_emulated_sum(tmp_path, language):
  """Two matvecs of one output summed in one kernel (matvec.build of terms: the routed experts' Q4_0 down with the mix and
  the residual, plus a shared expert's Q6_K down of its own x), 2 rows per warp, against float64 references; the sum is
  refused where the terms cannot share an output."""
  rng = np.random.default_rng(13)
  N, E, J, B = 20, 5, 3, 2
  Kr, Ks = _k_for(GGMLType.Q4_0, 36), _k_for(GGMLType.Q6_K, 9)
  routed_raw, shared_raw = random_tensor(GGMLType.Q4_0, (Kr, N, E), rng), random_tensor(GGMLType.Q6_K, (Ks, N), rng)
  Wr, Ws = (ref_weight(r, t, ne).astype(np.float64) for r, t, ne in ((routed_raw, GGMLType.Q4_0, (Kr, N, E)), (shared_raw, GGMLType.Q6_K, (Ks, N))))
  sel = np.array([[1, 4, 4], [0, 3, 2]], dtype=np.int32)
  xj, mix = rng.standard_normal((B, J, Kr)).astype(np.float32), rng.random((B, J)).astype(np.float32)
  xs, r = rng.standard_normal((B, Ks)).astype(np.float32), rng.standard_normal((B, N)).astype(np.float32)
  terms = (matvec.MatvecShape("experts", GGMLType.Q4_0, B, J, N, Kr, E, True, residual=True, mix=True),
           matvec.MatvecShape("linear", GGMLType.Q6_K, B, 1, N, Ks, 1, False))
  assert matvec.supports(terms, language)
  (fr, hr), (fs, hs) = (PackedTensor.pack_host(raw, s.type, ne)
                        for raw, s, ne in ((routed_raw, terms[0], (Kr, N, E)), (shared_raw, terms[1], (Ks, N))))
  bufs = [np.full((B, N), np.nan, np.float32), xj, sel, mix, r, *(np.ascontiguousarray(hr[p]) for p, _, _ in fr.parts),
          xs, *(np.ascontiguousarray(hs[p]) for p, _, _ in fs.parts)]
  emulate(matvec._with_eps(matvec.build(terms, matvec.Plan(4, 2)), EPS), language, bufs, tmp_path)
  ref = r + np.einsum("bj,bjnk,bjk->bn", mix.astype(np.float64), Wr[sel], seen(GGMLType.Q4_0, xj)) + xs.astype(np.float64) @ Ws.T
  assert relerr(bufs[0], ref) < BOUND(Kr + Ks), relerr(bufs[0], ref)
  # four rows a warp at eight warps (a batched step's plan from 4 tokens; its loads in smaller batches): the same bits
  four = [np.full((B, N), np.nan, np.float32)] + bufs[1:]
  emulate(matvec._with_eps(matvec.build(terms, matvec.Plan(8, 4)), EPS), language, four, tmp_path / "four")
  assert four[0].tobytes() == bufs[0].tobytes()
  # what cannot be one sum: outputs of other shapes, a residual on a later term, a norm (each term has its own x)
  other = matvec.MatvecShape("linear", GGMLType.Q6_K, B, 1, N + 1, Ks, 1, False)
  assert not matvec.supports((terms[0], other)) and not matvec.supports((terms[1], terms[0]))
  assert not matvec.supports((terms[0], matvec.MatvecShape("linear", GGMLType.Q6_K, B, 1, N, Ks, 1, False, norm=True)))

def test_f32_products_take_the_matvec_to_64_tokens():
  """supports(): an f32 product (the MoE router) up to MAX_ROWS_F32 tokens, a packed one up to MAX_ROWS (more: the GEMMs)."""
  lin = lambda typ, B: matvec.MatvecShape("linear", typ, B, 1, 64, 2048, 1, False, norm=True)
  assert matvec.MAX_ROWS_F32 == 64 and matvec.supports(lin(GGMLType.F32, 64)) and not matvec.supports(lin(GGMLType.F32, 65))
  assert matvec.supports(lin(GGMLType.Q4_0, matvec.MAX_ROWS)) and not matvec.supports(lin(GGMLType.Q4_0, matvec.MAX_ROWS + 1))

@pytest.mark.parametrize("B", [40, matvec.MAX_ROWS_F32])
def test_emulated_router_rows_at_full_size(tmp_path, B):
  """The MoE router's f32 product with its norm at its full size (64 experts x 2048) for the rows of a mixed step (8 sequences
  and a 32-token chunk) and MAX_ROWS_F32, in the plan the kernel takes, against float64; every row's top 6 experts kept."""
  rng = np.random.default_rng(B)
  N, K = 64, 2048
  raw = random_tensor(GGMLType.F32, (K, N), rng)
  W = ref_weight(raw, GGMLType.F32, (K, N)).astype(np.float64)
  s = matvec.MatvecShape("linear", GGMLType.F32, B, 1, N, K, 1, False, norm=True)
  p = matvec.plan(s)
  x, g = rng.standard_normal((B, K)).astype(np.float32), rng.standard_normal(K).astype(np.float32)
  out, ref = emulated(s, p.rows, "CUDA", raw, (K, N), x, g=g, work=tmp_path, warps=p.warps), rms(x, g) @ W.T
  assert relerr(out, ref) < BOUND(K), relerr(out, ref)
  assert top_k_sets(out.astype(np.float64), 6) == top_k_sets(ref, 6)
