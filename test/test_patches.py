"""One test per patch in patches/series: each check fails on the tree without that patch and passes with it."""
import os
import pytest
from patchtest import assert_patch_needed

@pytest.fixture(scope="module")
def trees(tmp_path_factory): return tmp_path_factory.mktemp("trees")

def test_0001_llm_model_imports(trees):
  assert_patch_needed(trees, "0001", "import tinygrad.llm.model as m; assert m.amd_custom_kernels_supported('CPU') is False")

SYMBOLIC_GRID_JIT = """
from tinygrad import Tensor, TinyJit, UOp, Device
assert Device.DEFAULT == "CUDA", Device.DEFAULT
n = UOp.variable("n_tokens", 1, 128)
buf = Tensor.arange(128 * 64).float().reshape(128, 64).contiguous().realize()
@TinyJit
def f(x): return ((x * 2 + 1).contiguous() * 3).realize()  # two kernels with an n-sized grid: batched into one CUDA graph
for k in (3, 5, 7, 2):
  out = f(buf[:n.bind(k)])
  assert out.shape[1] == 64
print("ok")
"""

@pytest.mark.skipif(os.environ.get("DEV", "").split(":")[0] != "CUDA", reason="needs DEV=CUDA (a CUDA graph)")
def test_0002_cuda_graph_symbolic_grid(trees):
  assert_patch_needed(trees, "0002", SYMBOLIC_GRID_JIT)
