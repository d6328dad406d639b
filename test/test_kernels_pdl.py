"""Programmatic dependent launch in the hand-written kernels (apps/kernels: GRID_WAIT()): the emulator enforces the contract
(nothing but weights touched before the wait, every workgroup waits), and every kernel family opts in as it should."""
import numpy as np
import pytest
from tinygrad import dtypes
from apps.gguf import GGMLType
from apps.kernels import SourceKernel, Param, render, matvec, mla_attention, router, gemm
from emulator import emulate

def _copy(body: str) -> SourceKernel:
  params = (Param("out", dtypes.float32, True), Param("x", dtypes.float32), Param("w", dtypes.float32, weight=True))
  return SourceKernel("pdl_probe", params, body, (2, 1, 1), (32, 1, 1))

GOOD = """  int i = GID_X * 32 + LID_X;
  float wv = w[i];              // a weight: fine before the wait
  GRID_WAIT();
  out[i] = x[i] + wv;"""

def _run(body, tmp_path):
  x, w = np.arange(64, dtype=np.float32), np.full(64, 0.5, np.float32)
  out = np.zeros(64, np.float32)
  emulate(_copy(body), "CUDA", [out, x, w], tmp_path)
  return out, x + w

def test_contract_kept(tmp_path):
  out, want = _run(GOOD, tmp_path)
  np.testing.assert_array_equal(out, want)

@pytest.mark.parametrize("body,why", [
  (GOOD.replace("  GRID_WAIT();\n", "").replace("out[i] = x[i] + wv;", "float xv = x[i];\n  GRID_WAIT();\n  out[i] = xv + wv;"),
   "read before the wait"),
  (GOOD.replace("  GRID_WAIT();\n", "  out[i] = 1.0f;\n  GRID_WAIT();\n"), "written before the wait"),
  (GOOD.replace("  GRID_WAIT();\n", "  if (GID_X == 0) GRID_WAIT();\n"), "a workgroup that never waits"),
])
def test_contract_broken_is_caught(tmp_path, body, why):
  with pytest.raises(AssertionError):
    out, want = _run(body, tmp_path)
    np.testing.assert_array_equal(out, want)  # a read of poison gives NaN here; a write or a missing wait fails the emulator

def _kernels():
  s = lambda op, **kw: matvec.MatvecShape(op=op, type=GGMLType.Q4_0, B=1, J=kw.pop("J", 1), N=256, K=2048, E=kw.pop("E", 1),
                                          x_per_slot=kw.pop("xps", False), **kw)
  yield "linear", matvec.build(s("linear", norm=True))
  yield "batched", matvec.build(s("batched", J=4, E=4, xps=True))
  yield "experts", matvec.build(s("experts", J=2, E=8, mix=True, residual=True))
  a = mla_attention.AttentionShape(16, 512, 128, 64)
  yield "attend", mla_attention.attend_kernel(a, 0.1, 1e-6)
  yield "combine", mla_attention.combine_kernel(a)
  yield "router", router.build(1, 64, 6, 1, False, False, 1.0)
  yield "gemm", gemm.build(gemm.GemmShape(GGMLType.Q4_0, 128, 256, 2048))

@pytest.mark.parametrize("name,k", list(_kernels()))
def test_every_family_waits_in_its_cuda_source(name, k):
  src = render(k, "CUDA")
  assert "griddepcontrol.wait" in src  # what the CUDA graph patch keys on
  assert "griddepcontrol" not in render(k, "METAL")
  # no __restrict__: ptxas keeps ordinary loads in program order around the wait (read-only nc loads it moves across it)
  assert "__restrict__" not in src.split(k.function_name + "(")[1].split(")")[0]
  if name in ("linear", "batched"):  # weights prefetched: the first weight load comes before the wait
    assert 0 < k.body.index("((const GLOBAL uint4*)qs)") < k.body.index("GRID_WAIT();")
  # the first statement of a decode kernel lets the next kernel launch (its launch and weight loads overlap this kernel);
  # the prefill GEMM (many waves) does not
  body = src.split(k.function_name + "(")[1].split("{", 1)[1]
  assert body.lstrip().startswith("GRID_TRIGGER();") == k.trigger == (name != "gemm")
  assert ("griddepcontrol.launch_dependents" in src) and render(k, "METAL").count("GRID_TRIGGER()") == 1 + k.trigger

def test_sources_without_pdl_do_not_mention_it():
  src = render(_copy("  out[GID_X * 32 + LID_X] = x[GID_X * 32 + LID_X];"), "CUDA")
  assert "griddepcontrol" not in src and "GRID_TRIGGER" not in src and "__restrict__" in src
