"""One test per patch in patches/series: each check fails on the tree without that patch and passes with it."""
import shutil
import pytest
from patchtest import assert_patch_needed

@pytest.fixture(scope="module")
def trees(tmp_path_factory): return tmp_path_factory.mktemp("trees")

def test_0001_llm_model_imports(trees):
  assert_patch_needed(trees, "0001", "import tinygrad.llm.model as m; assert m.amd_custom_kernels_supported('CPU') is False")

CUDA_GRAPH_SYMBOLIC_GRID = """
# Build tinygrad's real CUDAGraph on the NULL device with the driver calls faked: the fake rejects 0-sized launch dims
# exactly as cuGraphAddKernelNode does (CUDA_ERROR_INVALID_VALUE = 1), so this runs without a GPU.
import types, numpy as np
from tinygrad import Tensor, TinyJit, UOp, Device
import tinygrad.runtime.graph.cuda as g
from tinygrad.runtime.ops_null import NullProgram
def dims_ok(params): return min(params.gridDimX, params.gridDimY, params.gridDimZ, params.blockDimX, params.blockDimY, params.blockDimZ) >= 1
fake = {"cuGraphCreate": lambda *a: 0, "cuGraphInstantiate_v2": lambda *a: 0, "cuGraphLaunch": lambda *a: 0, "cuGraphDestroy": lambda *a: 0,
        "cuGraphExecDestroy": lambda *a: 0, "cuGraphAddMemcpyNode": lambda *a: 0, "cuGraphExecMemcpyNodeSetParams": lambda *a: 0,
        "cuGraphAddKernelNode": lambda node, graph, deps, n, params: 0 if dims_ok(params._obj) else 1,
        "cuGraphExecKernelNodeSetParams": lambda inst, node, params: 0 if dims_ok(params._obj) else 1}
for k, v in fake.items(): setattr(g.cuda, k, v)
def check(status):
  if status != 0: raise RuntimeError(f"CUDA Error {status}, invalid argument")
g.check, g.cu_time_execution = check, lambda cb, enable=False: cb()
g.encode_args = lambda args, vals, signature: (types.SimpleNamespace(), None)
NullProgram.prg, NullProgram.smem, NullProgram.signature = None, 0, None
Device["NULL"].graph = g.CUDAGraph

p, n = UOp.variable("start_pos", 0, 127), UOp.variable("n_tokens", 1, 128)
@TinyJit
def f(x): return ((x * 2 + 1).contiguous() * 3).realize()  # two kernels with an n_tokens-sized grid, batched into one graph
for s, k in ((0, 3), (3, 5), (8, 7), (15, 2)):
  buf = Tensor(np.arange(256 * 64, dtype=np.float32).reshape(256, 64))
  f(buf[p.bind(s):p.bind(s) + n.bind(k)])
assert f.captured is not None
print("ok")
"""

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc for DEV=NULL:NVCC:sm_90 (CUDA kernels compiled, nothing run)")
def test_0002_cuda_graph_symbolic_grid(trees):
  # tinygrad's real CUDAGraph builds its nodes from CUDA-rendered kernels on the NULL device; only the driver calls are faked,
  # rejecting a 0-sized launch like cuGraphAddKernelNode did on the H100 ("CUDA Error 1, invalid argument")
  assert_patch_needed(trees, "0002", CUDA_GRAPH_SYMBOLIC_GRID, env={"DEV": "NULL:NVCC:sm_90"})
