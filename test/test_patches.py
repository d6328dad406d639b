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

HOST_READ_DIRECT = """
# a host read of a realized buffer must not schedule anything: run_linear is made to fail, the read still has to work
import numpy as np
from tinygrad import Tensor, dtypes
import tinygrad.engine.realize as realize
t = Tensor([7, 8, 9], dtype=dtypes.int32).contiguous().realize()
def no_schedule(*a, **k): raise RuntimeError("host read went through run_linear")
realize.run_linear = no_schedule
assert t.uop.buffer.numpy().tolist() == [7, 8, 9]
view = t.uop.buffer.view(1, dtypes.int32, 4)  # a view copies out its own bytes
view.ensure_allocated()
assert view.as_memoryview().cast("i").tolist() == [8]
print("ok")
"""

def test_0003_host_read_skips_the_scheduler(trees):
  assert_patch_needed(trees, "0003", HOST_READ_DIRECT, env={"DEV": "CPU"})

CUDA_GRAPH_PDL = """
# tinygrad's real CUDAGraph on the NULL device (CUDA renderer, nvcc, sm_90) with the driver calls faked and recorded: two
# source kernels a -> b -> c in one TinyJit; the second waits on its grid dependencies (griddepcontrol.wait), the third not
import types
from tinygrad import Tensor, TinyJit, Device, dtypes
from tinygrad.uop.ops import UOp, Ops, ProgramInfo, KernelInfo
import tinygrad.runtime.graph.cuda as g
from tinygrad.runtime.ops_null import NullProgram
added, edges = [], []
def add_kernel(node, graph, deps, n, params): added.append(n); return 0
fake = {"cuGraphCreate": lambda *a: 0, "cuGraphInstantiate_v2": lambda *a: 0, "cuGraphLaunch": lambda *a: 0, "cuGraphDestroy": lambda *a: 0,
        "cuGraphExecDestroy": lambda *a: 0, "cuGraphAddMemcpyNode": lambda *a: 0, "cuGraphExecMemcpyNodeSetParams": lambda *a: 0,
        "cuGraphAddKernelNode": add_kernel, "cuGraphExecKernelNodeSetParams": lambda *a: 0}
for k, v in fake.items(): setattr(g.cuda, k, v)
def add_deps(graph, src, dst, data, n): edges.append(n); return 0
g.cuda.dll = types.SimpleNamespace(cuGraphAddDependencies_v2=add_deps)
g.check, g.cu_time_execution = (lambda st: None), (lambda cb, enable=False: cb())
g.encode_args = lambda args, vals, signature: (types.SimpleNamespace(), None)
NullProgram.prg, NullProgram.smem, NullProgram.signature = None, 0, None
Device["NULL"].graph = g.CUDAGraph

def source_kernel(name, wait):
  pdl = 'asm volatile("griddepcontrol.wait;" ::: "memory");' if wait else ""
  src = f'extern "C" __global__ void {name}(float* out, const float* x) {{ {pdl} out[threadIdx.x] = x[threadIdx.x] + 1.0f; }}'
  def fxn(out, x):
    params = [out, x]
    while any(p.op is not Ops.PARAM for p in params): params = [p if p.op is Ops.PARAM else p.src[0] for p in params]
    sink = UOp.sink(*params, arg=KernelInfo(name=name))
    info = ProgramInfo(name, (1, 1, 1), (32, 1, 1), (), tuple(p.arg.slot for p in params), outs=(params[0].arg.slot,),
                       ins=(params[1].arg.slot,), target=Device["NULL"].renderer.target)
    return UOp(Ops.PROGRAM, src=(sink, UOp(Ops.LINEAR, src=(*params, sink)), UOp(Ops.SOURCE, arg=src)), arg=info)
  return fxn

@TinyJit
def f(x):
  a = Tensor.empty(32).custom_kernel(x, fxn=source_kernel("first", False))[0]
  b = Tensor.empty(32).custom_kernel(a, fxn=source_kernel("waits", True))[0]
  return Tensor.empty(32).custom_kernel(b, fxn=source_kernel("plain", False))[0].realize()
for _ in range(3): f(Tensor.ones(32).contiguous().realize())
# nodes in order: first (no deps), waits (its edge from first is programmatic), plain (a full edge from waits)
assert added == [0, 0, 1] and edges == [1], (added, edges)
print("ok")
"""

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc for DEV=NULL:NVCC:sm_90 (CUDA kernels compiled, nothing run)")
def test_0004_cuda_graph_programmatic_edges(trees):
  assert_patch_needed(trees, "0004", CUDA_GRAPH_PDL, env={"DEV": "NULL:NVCC:sm_90"})
