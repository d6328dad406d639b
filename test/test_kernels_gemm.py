"""The prefill GEMM (apps/kernels/gemm.py): its rendered CUDA and Metal sources RUN on the dialect's CPU emulator against
gguf-py's dequantization in float64 (token and row counts that are not multiples of the 64 x 64 tile, several k blocks),
the CUDA source compiles with nvcc here, apps/quantized.py's seam gives it the prefill products of CUDA and Metal devices
(the decode matvecs keep B <= 4), and on such a device it serves QuantizedLinear's prefill products at the fp32 bound."""
import numpy as np
from pathlib import Path
import pytest
from tinygrad import Tensor, Device
from apps.gguf import GGMLType, BLOCK
import apps.quantized as Q
from apps.quantized import PackedTensor, QuantizedLinear, QuantizedExpertWeights, KernelSpec, format_for
from apps.kernels import gemm, render, language_of
from test_quantized import random_tensor, ref_weight, relerr, fp32_bound
from nvcc import needs_nvcc, run_nvcc_script
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

def expert_case(typ, T, J, E, N, K, per_slot, sel, seed=0):
  rng = np.random.default_rng(seed)
  raw = random_tensor(typ, (K, N, E), rng)
  W = ref_weight(raw, typ, (K, N, E)).astype(np.float64)                     # (E, N, K)
  x = rng.standard_normal((T, J, K) if per_slot else (T, K)).astype(np.float32)
  xs = x if per_slot else np.broadcast_to(x[:, None], (T, J, K))
  ref = np.einsum("tjnk,tjk->tjn", W[np.clip(sel, 0, E - 1)], xs.astype(np.float64))
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

def test_emulated_residual(tmp_path):
  """out = W . x + residual: the residual added in the store (a layer's residual add at prefill, no kernel of its own)."""
  typ, T, N, K = GGMLType.Q4_0, 70, 72, 96
  rng = np.random.default_rng(6)
  raw = random_tensor(typ, (K, N), rng)
  W = ref_weight(raw, typ, (K, N)).astype(np.float64)
  x, res = rng.standard_normal((T, K)).astype(np.float32), rng.standard_normal((T, N)).astype(np.float32)
  fmt, host = PackedTensor.pack_host(raw, typ, (K, N))
  out = np.full((T, N), np.nan, np.float32)
  emulate(gemm.build(gemm.GemmShape(typ, T, N, K, residual=True)), "CUDA", [out, x, res] + [np.ascontiguousarray(host[p]) for p, _, _ in fmt.parts], tmp_path)
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

def test_tiles():
  """Experts: 16 tokens x 128 rows; dense: 64 rows and 64 tokens, fewer where that leaves two workgroups per SM."""
  q = GGMLType.Q4_0
  assert gemm.GemmShape(q, 128, 2816, 2048, 6, 64).tile == (16, 128)
  assert gemm.GemmShape(q, 128, 12288, 2048).tile == (64, 64) and gemm.GemmShape(q, 128, 5632, 2048).tile == (32, 64)
  assert gemm.GemmShape(q, 128, 2048, 2048).tile == (16, 64) and gemm.GemmShape(q, 128, 512, 128, 16, 16, True, True).tile == (32, 64)

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
  assert gemm.provider(spec(norm=True)) is None                          # fused: done as separate ops around the plain product
  assert gemm.provider(spec(op="batched", J=4, E=4, x_per_slot=True, x_stride=300)) is None   # a strided input: the matvecs' (decode)
  assert gemm.provider(spec(fmt=format_for(GGMLType.Q4_1, 256))) is None             # no GEMM for that type
  on_kernels = language_of(Device.DEFAULT) is not None
  assert (gemm.provider(spec()) is not None) == on_kernels
  assert (gemm.provider(spec(residual=True)) is not None) == on_kernels                # the residual add in the store
  assert gemm.provider(spec(op="experts", J=6, E=64, has_index=True, residual=True, mix=True)) is None
  assert (gemm.provider(spec(fmt=format_for(GGMLType.Q6_K, 256))) is not None) == on_kernels
  assert (gemm.provider(spec(op="experts", J=6, E=64, has_index=True)) is not None) == on_kernels
  assert (gemm.provider(spec(op="batched", J=4, E=4, x_per_slot=True)) is not None) == on_kernels

COMPILE = r"""
import apps
from tinygrad import Device
from apps.gguf import GGMLType, BLOCK
from apps.kernels import gemm, render
ren = Device["NULL"].renderer
shapes = [gemm.GemmShape(t, 128, 6144, 2048) for t in gemm.TYPES] + \
         [gemm.GemmShape(t, 128, 2816, 2048, 6, 64, False) for t in gemm.TYPES] + [gemm.GemmShape(t, 128, 2048, 1408 if BLOCK[t][0] == 32 else 1536, 6, 64, True) for t in gemm.TYPES]
for s in shapes: ren.compiler.compile(render(gemm.build(s), "CUDA"))
print("COMPILED", len(shapes))
"""

SEAM = r"""
import apps
from apps.gguf import GGMLType
from apps.quantized import KernelSpec, format_for, kernel_for
from apps.kernels import gemm, matvec
fmt = format_for(GGMLType.Q4_0, 2048)
spec = lambda B: KernelSpec("linear", fmt, B, 1, 512, 2048, 1, False, False, "NULL")
print("PREFILL", kernel_for(spec(64)) is gemm.kernel(gemm.GemmShape(GGMLType.Q4_0, 64, 512, 2048), "NULL"))
print("DECODE", kernel_for(spec(1)) is matvec.kernel(matvec.MatvecShape("linear", GGMLType.Q4_0, 1, 1, 512, 2048, 1, False), 0.0, "NULL"))
"""

@needs_nvcc
def test_seam_routes_prefill_to_the_gemm_and_decode_to_the_matvecs():
  out = run_nvcc_script(SEAM)
  assert "PREFILL True" in out and "DECODE True" in out, out

@needs_nvcc
def test_cuda_sources_compile():
  assert f"COMPILED {3 * len(TYPES)}" in run_nvcc_script(COMPILE)

def test_metal_sources_render():
  for t in TYPES:
    src = render(gemm.build(gemm.GemmShape(t, 128, 2048, 2048)), "METAL")
    assert "kernel void" in src and "SHARED float4 xs4" in src

@pytest.mark.skipif(language_of(Device.DEFAULT) is None, reason="no hand-written kernels on this device")
@pytest.mark.parametrize("typ", TYPES, ids=lambda t: t.name)
def test_device_prefill_product(typ):
  """70-token products on the device (the GEMM's): linear, routed experts, per slot; at the fp32 bound."""
  Q._kernel_cached.cache_clear()
  try:
    rng = np.random.default_rng(3)
    K, N, T = 256, 96, 70
    raw = random_tensor(typ, (K, N), rng)
    W = ref_weight(raw, typ, (K, N)).astype(np.float64)
    lin = QuantizedLinear(PackedTensor.from_bytes(raw, typ, (K, N)))
    x = rng.standard_normal((T, K)).astype(np.float32)
    assert relerr(lin(Tensor(x)).numpy(), x.astype(np.float64) @ W.T) < fp32_bound(K)
    res = rng.standard_normal((T, N)).astype(np.float32)
    assert relerr(lin(Tensor(x), residual=Tensor(res)).numpy(), x.astype(np.float64) @ W.T + res) < fp32_bound(K)
    T, J, E, N = 70, 3, 5, 40                                               # routed experts, x shared by the slots
    sel = rng.integers(0, E, (T, J))
    bufs, ref = expert_case(typ, T, J, E, N, K, False, sel, seed=4)
    ex = QuantizedExpertWeights(*[[PackedTensor.from_bytes(random_tensor(typ, (K, N, E), np.random.default_rng(4)), typ, (K, N, E))], [N]])
    assert relerr(ex(Tensor(sel.astype(np.int32)), Tensor(bufs[1])).numpy(), ref) < fp32_bound(K)
    Wb = ref_weight(random_tensor(typ, (K, N, E), np.random.default_rng(4)), typ, (K, N, E)).astype(np.float64)  # per slot
    xb = rng.standard_normal((T, E, K)).astype(np.float32)
    assert relerr(ex.batched(Tensor(xb)).numpy(), np.einsum("enk,tek->ten", Wb, xb.astype(np.float64))) < fp32_bound(K)
  finally: Q._kernel_cached.cache_clear()

def test_ab_tool_runs_and_restores_the_providers(capsys):
  """tools/ab_prefill.py on a tiny preset (on the CPU both variants are the portable kernels): one line per variant, the
  same first token, and the providers as they were."""
  from tools import ab_prefill
  before = list(Q._PROVIDERS)
  assert ab_prefill.main(["--presets", "youtu-llm-2b-tiny", "--prefill", "20", "--rounds", "1"]) == 0
  lines = [l for l in capsys.readouterr().out.splitlines() if "prefill 20 tokens" in l]
  assert len(lines) == 2 and "portable" in lines[0] and "gemm" in lines[1]
  assert lines[0].split("first token ")[1] == lines[1].split("first token ")[1]
  assert Q._PROVIDERS == before

def test_ab_tool_variant_file(tmp_path, capsys):
  """tools/ab_prefill.py --a: variant A is another apps/kernels/gemm.py (here a copy with a marker), B the checked-out one;
  the package's module is the checked-out one again afterwards."""
  import apps.kernels
  from tools import ab_prefill
  mod = apps.kernels.gemm
  (tmp_path / "gemm.py").write_text(Path(mod.__file__).read_text() + "\nVARIANT_A = True\n")
  assert ab_prefill.main(["--presets", "youtu-llm-2b-tiny", "--prefill", "20", "--rounds", "1", "--a", str(tmp_path / "gemm.py")]) == 0
  lines = [l for l in capsys.readouterr().out.splitlines() if "prefill 20 tokens" in l]
  assert [l.split(":")[0].split()[-1] for l in lines] == ["A", "B"]
  assert apps.kernels.gemm is mod and not hasattr(mod, "VARIANT_A")

def test_ab_tool_variant_file_in_a_fresh_process(tmp_path):
  """tools/ab_prefill.py --a as the GPU machine runs it: a fresh interpreter, where nothing has imported apps.kernels.gemm
  before variant A swaps it in."""
  import subprocess, sys
  root = Path(__file__).resolve().parent.parent
  (tmp_path / "gemm.py").write_text((root / "apps" / "kernels" / "gemm.py").read_text())
  r = subprocess.run([sys.executable, "tools/ab_prefill.py", "--presets", "youtu-llm-2b-tiny", "--prefill", "12", "--rounds", "1",
                      "--a", str(tmp_path / "gemm.py")], cwd=root, capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stderr[-2000:]
  assert [l.split(":")[0].split()[-1] for l in r.stdout.splitlines() if "prefill 12 tokens" in l] == ["A", "B"]
