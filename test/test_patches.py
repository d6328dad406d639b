"""One test per patch in patches/series: each check fails on the tree without that patch and passes with it."""
import platform, shutil
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

CUDA_GRAPH_FAKE = """
# tinygrad's real CUDAGraph on the NULL device (CUDA renderer, nvcc, sm_90) with the driver calls faked and recorded
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
"""

CUDA_GRAPH_PDL = CUDA_GRAPH_FAKE + """
# two source kernels a -> b -> c in one TinyJit; the second waits on its grid dependencies (griddepcontrol.wait), the third not
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

SM90_OPTS = """
# the opts tinygrad's heuristics choose for a tensor's last kernel on a CUDA sm_90 renderer: no GPU needed, nothing runs
from tinygrad.uop.ops import Ops
from tinygrad.codegen.opt import OptOps
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler
from tinygrad.renderer.cstyle import NVCCRenderer
from tinygrad.helpers import Target
def sm90_opts(out) -> list:
  ast = out.linear_with_vars()[0].src[-1].src[0]
  assert ast.op is Ops.SINK
  k = Scheduler(ast, NVCCRenderer(Target(device="CUDA", arch="sm_90")))
  k.convert_loop_to_global()
  return hand_coded_optimizations(k).applied_opts
"""

Q4_MATVEC = SM90_OPTS + """
# rows of 32-weight blocks: 4 uint32 words of 8 nibbles and one fp16 scale a block, x (blocks, 32), as Tensor ops; the opts
# tinygrad's heuristics choose for it on a CUDA renderer without a GPU, and the product run on DEV=PYTHON (GPU-style kernels
# with locals) against numpy
import numpy as np
from tinygrad import Tensor, dtypes

def q4_matvec(qs:Tensor, d:Tensor, x:Tensor) -> Tensor:
  nib = (qs.unsqueeze(-1) >> Tensor([0, 4, 8, 12, 16, 20, 24, 28], dtype=dtypes.uint32, device=qs.device)) & 15
  w = (nib.cast(dtypes.float32) - 8) * d.cast(dtypes.float32).reshape(*d.shape, 1, 1)
  return (w * x.reshape(1, -1, 4, 8)).sum((1, 2, 3))

def chosen_opts(rows:int, blocks:int) -> list:
  out = q4_matvec(Tensor.empty(rows, blocks, 4, dtype=dtypes.uint32, device="NULL"),
                  Tensor.empty(rows, blocks, dtype=dtypes.half, device="NULL"), Tensor.empty(blocks, 32, device="NULL"))
  return sm90_opts(out)

def check_product(rows:int, blocks:int):
  rng = np.random.default_rng(0)
  qs, d = rng.integers(0, 2**32, (rows, blocks, 4), dtype=np.uint32), rng.standard_normal((rows, blocks)).astype(np.float16)
  x = rng.standard_normal((blocks, 32)).astype(np.float32)
  w = ((qs[..., None] >> (np.arange(8, dtype=np.uint32) * 4)) & 15).astype(np.float32) - 8
  ref = ((w * d.astype(np.float32)[..., None, None]).reshape(rows, blocks, 32) * x).sum((1, 2))
  got = q4_matvec(Tensor(qs, device="PYTHON"), Tensor(d, device="PYTHON"), Tensor(x, device="PYTHON")).numpy()
  np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
"""

MATVEC_THROUGH_DEQUANT = Q4_MATVEC + """
# a matvec over 4-bit weights dequantized inside the product: tinygrad gives it a grouped reduction (threads share a row).
# 4096 rows: more outputs than GROUPTOP takes, so only a matvec rule gives the rows a cooperative reduction
opts = chosen_opts(4096, 16)
assert any(o.op in (OptOps.GROUP, OptOps.GROUPTOP) for o in opts), opts
assert any(o.op is OptOps.UPCAST for o in opts), opts
check_product(64, 8)   # and the kernel those opts make computes the product
print("ok")
"""

def test_0005_matvec_rule_for_dequantized_weights(trees):
  assert_patch_needed(trees, "0005", MATVEC_THROUGH_DEQUANT)

DEBUG_PRINT_DURING_SPAWN = """
# tinygrad's worker pool hides __main__.__file__ (sets it to None) while it spawns a worker, on the pool's own thread when it
# replaces a finished worker; a schedule printed at DEBUG>=1 at that moment must still find its caller
import sys
from tinygrad import Tensor
from tinygrad.helpers import Context
run = compile("with Context(DEBUG=1): (Tensor.ones(4).contiguous() + n).contiguous().sum().realize()", "<generated>", "exec")
main = sys.modules["__main__"]
main.__file__ = "main.py"  # as when a script runs
exec(run, {"Context": Context, "Tensor": Tensor, "n": 1})   # frames of generated code: inspect scans sys.modules for them
main.__file__ = None       # tinygrad.engine.worker._without_main, during a spawn
exec(run, {"Context": Context, "Tensor": Tensor, "n": 2})
print("ok")
"""

def test_0006_debug_print_while_the_worker_pool_spawns(trees):
  assert_patch_needed(trees, "0006", DEBUG_PRINT_DURING_SPAWN, env={"DEV": "CPU"})

SYMBOLIC_ELEMENTWISE = SM90_OPTS + """
# an elementwise kernel over a symbolic length merged into one dim (a token count times a width) gets an upcast and a workgroup
import numpy as np
from tinygrad import Tensor, UOp, TinyJit

n = UOp.variable("n_tokens", 1, 512)
opts = sm90_opts((Tensor.empty(512 * 2048, device="NULL")[:n.bind(7) * 2048] * 2).contiguous())
assert {o.op for o in opts} >= {OptOps.UPCAST, OptOps.LOCAL}, opts

# those opts on a GPU-style device (PYTHON runs kernels with locals): the right values at every n, nothing written past n
m = UOp.variable("n_tokens", 1, 64)
a = Tensor(np.arange(64 * 96, dtype=np.float32), device="PYTHON").realize()
out = Tensor.zeros(64 * 96, device="PYTHON").contiguous().realize()
@TinyJit
def f(v): out[:v * 96].assign(a[:v * 96] * 2 + 1).realize()
for s in (5, 7, 64, 3):
  out.assign(Tensor.zeros(64 * 96, device="PYTHON")).realize()
  f(m.bind(s))
  got = out.numpy()
  assert np.array_equal(got[:s * 96], np.arange(s * 96, dtype=np.float32) * 2 + 1) and not got[s * 96:].any(), s
print("ok")
"""

def test_0007_symbolic_elementwise_gets_upcast_and_local(trees):
  assert_patch_needed(trees, "0007", SYMBOLIC_ELEMENTWISE)

MATVEC_PADDED_GROUP = Q4_MATVEC + """
# a matvec of 4-bit weights whose block count no warp-sized group divides (342 blocks of 32: a 10944-long row) pads its
# block range and groups 32 threads on it; the padded blocks add nothing to the product
opts = chosen_opts(2048, 342)
assert any(o.op is OptOps.PADTO for o in opts) and any(o.op is OptOps.GROUP and o.arg == 32 for o in opts), opts
check_product(64, 62)  # 62 blocks padded to 64
print("ok")
"""

def test_0008_matvec_rule_pads_the_grouped_range(trees):
  assert_patch_needed(trees, "0008", MATVEC_PADDED_GROUP)

SYMBOLIC_LENGTH_GROUP = SM90_OPTS + """
# a max and a sum of exp over a symbolic length (attention's softmax over the keys cached so far) take a grouped reduction:
# the length padded, masked, to a multiple of the group; the padding must reduce as -inf for the max and 0 for the sum
import numpy as np
from tinygrad import Tensor, TinyJit, UOp

n = UOp.variable("n", 1, 256)
def softmax_sums(x:Tensor) -> Tensor:
  m = x.max(axis=1, keepdim=True)
  return (x - m).exp().sum(axis=1) + m[:, 0]
opts = sm90_opts(softmax_sums(Tensor.empty(16, 256, device="NULL")[:, :n.bind(100)]))
assert any(o.op is OptOps.PADTO for o in opts) and any(o.op is OptOps.GROUPTOP for o in opts), opts

# those opts on a GPU-style device (PYTHON runs kernels with locals), all-negative data: a padding read as 0 would win the max
data = -np.abs(np.random.default_rng(0).standard_normal((16, 256)).astype(np.float32)) - 5
x = Tensor(data, device="PYTHON").realize()
@TinyJit
def f(v): return softmax_sums(v).realize()
for s in (3, 17, 100, 33, 256):
  ref = data[:, :s]
  want = np.exp(ref - ref.max(1, keepdims=True)).sum(1) + ref.max(1)
  np.testing.assert_allclose(f(x[:, :n.bind(s)]).numpy(), want, rtol=1e-5, atol=1e-5)
print("ok")
"""

def test_0009_symbolic_length_reduction_is_grouped(trees):
  assert_patch_needed(trees, "0009", SYMBOLIC_LENGTH_GROUP)

SYMBOLIC_LENGTH_VALUE_PRODUCT = SM90_OPTS + """
# attention's value product for one token, out[h, c] = sum_s p[h, s] v[s, c] over the keys so far (a symbolic length): a thread
# an output, no upcast, workgroups of at most 32
import numpy as np
from tinygrad import Tensor, TinyJit, UOp
from tinygrad.helpers import prod

def value_product(p:Tensor, v:Tensor) -> Tensor: return (p.unsqueeze(2) * v.unsqueeze(0)).sum(axis=1)
s = UOp.variable("n", 1, 512).bind(100)
opts = sm90_opts(value_product(Tensor.empty(16, 512, device="NULL")[:, :s], Tensor.empty(512, 256, device="NULL")[:s]))
assert not any(o.op is OptOps.UPCAST for o in opts), opts
assert any(o.op is OptOps.LOCAL for o in opts) and prod(o.arg for o in opts if o.op is OptOps.LOCAL) <= 32, opts

# those opts on a GPU-style device (PYTHON runs kernels with locals): the products at several lengths
rng = np.random.default_rng(0)
pd, vd = rng.standard_normal((16, 64)).astype(np.float32), rng.standard_normal((64, 32)).astype(np.float32)
p, v, m = Tensor(pd, device="PYTHON").realize(), Tensor(vd, device="PYTHON").realize(), UOp.variable("n", 1, 64)
@TinyJit
def f(a, b): return value_product(a, b).realize()
for length in (3, 17, 64, 40):
  np.testing.assert_allclose(f(p[:, :m.bind(length)], v[:m.bind(length)]).numpy(), pd[:, :length] @ vd[:length], rtol=1e-4, atol=1e-4)
print("ok")
"""

def test_0010_symbolic_length_product_keeps_a_thread_an_output(trees):
  assert_patch_needed(trees, "0010", SYMBOLIC_LENGTH_VALUE_PRODUCT)

CHUNK_SCORES = SM90_OPTS + """
# attention scores of a chunk of queries over the keys so far (a symbolic length): scores[h, t, s] = sum_d q[h, t, d] k[s, d];
# the keys' dim, which q does not index, padded to a multiple of 4 and upcast, so a key row serves 4 keys' worth of outputs
import numpy as np
from tinygrad import Tensor, TinyJit, UOp

def scores(q:Tensor, k:Tensor) -> Tensor: return (q.unsqueeze(2) * k.unsqueeze(0).unsqueeze(0)).sum(-1)
s = UOp.variable("n", 1, 512).bind(100)
opts = sm90_opts(scores(Tensor.empty(16, 256, 8, device="NULL"), Tensor.empty(512, 8, device="NULL")[:s]))
assert any(o.op is OptOps.PADTO for o in opts) and sum(o.op is OptOps.UPCAST for o in opts) >= 2, opts

# those opts on a GPU-style device (PYTHON runs kernels with locals): the scores at lengths 4 does not divide
rng = np.random.default_rng(0)
qd, kd = rng.standard_normal((16, 256, 8)).astype(np.float32), rng.standard_normal((40, 8)).astype(np.float32)
q, k, m = Tensor(qd, device="PYTHON").realize(), Tensor(kd, device="PYTHON").realize(), UOp.variable("n", 1, 40)
@TinyJit
def f(a, b): return scores(a, b).realize()
for length in (3, 17, 22):
  got = f(q, k[:m.bind(length)])
  np.testing.assert_allclose(got[:, :, :length].numpy(), qd @ kd[:length].T, rtol=1e-4, atol=1e-4)
print("ok")
"""

def test_0011_chunk_scores_upcast_the_symbolic_keys(trees):
  assert_patch_needed(trees, "0011", CHUNK_SCORES)

FEW_OUTPUTS_LONG_REDUCTION = SM90_OPTS + """
# an rms norm's sum of squares over a row of 2048 or 1536: GROUPTOP 256 / 128 (8 and 12 elements a thread), not 16
import numpy as np
from tinygrad import Tensor

for n, group in ((2048, 256), (1536, 128)):
  opts = sm90_opts(Tensor.empty(n, device="NULL").square().sum())
  assert [o.arg for o in opts if o.op is OptOps.GROUPTOP] == [group], (n, opts)
  # the grouped sum on a GPU-style device (PYTHON runs kernels with locals) against numpy
  xd = np.random.default_rng(n).standard_normal(n).astype(np.float32)
  np.testing.assert_allclose(Tensor(xd, device="PYTHON").square().sum().item(), (xd.astype(np.float64) ** 2).sum(), rtol=1e-5)
print("ok")
"""

def test_0012_few_outputs_of_a_long_reduction_group_wider(trees):
  assert_patch_needed(trees, "0012", FEW_OUTPUTS_LONG_REDUCTION)

WIDE_NARROW_MATMUL = Q4_MATVEC + """
# a matmul of fp32 activations (T, blocks, 32) and 4-bit weights dequantized in the product (rows, blocks of 4 uint32 words):
# each dequantized weight serves 16 tokens and each activation 4 rows, the lanes split a block's 4 words (GROUP) and span 8
# rows and 2 tokens, where tinygrad's matmul upcasts give 4 x 3 and its workgroup 8 tokens x 16 rows
from tinygrad.codegen.opt import Opt
def q4_matmul(qs:Tensor, d:Tensor, x:Tensor) -> Tensor:
  nib = (qs.unsqueeze(-1) >> Tensor([0, 4, 8, 12, 16, 20, 24, 28], dtype=dtypes.uint32, device=qs.device)) & 15
  w = (nib.cast(dtypes.float32) - 8) * d.cast(dtypes.float32).reshape(*d.shape, 1, 1)
  return (w.unsqueeze(0) * x.reshape(x.shape[0], 1, -1, 4, 8)).sum((2, 3, 4))

opts = sm90_opts(q4_matmul(Tensor.empty(12288, 64, 4, dtype=dtypes.uint32, device="NULL"),
                           Tensor.empty(12288, 64, dtype=dtypes.half, device="NULL"), Tensor.empty(512, 64, 32, device="NULL")))
assert Opt(OptOps.UPCAST, 0, 16) in opts and Opt(OptOps.UPCAST, 1, 4) in opts and Opt(OptOps.GROUP, 1, 0) in opts, opts
assert Opt(OptOps.LOCAL, 1, 8) in opts and Opt(OptOps.LOCAL, 0, 2) in opts, opts
# a matmul of two fp32 operands is left to tinygrad's matmul heuristics
plain = sm90_opts(Tensor.empty(512, 2048, device="NULL") @ Tensor.empty(2048, 2048, device="NULL"))
assert not any(o.op is OptOps.GROUP for o in plain) and Opt(OptOps.UPCAST, 0, 16) not in plain, plain

# the product on a GPU-style device (PYTHON runs kernels with locals) against numpy
rng = np.random.default_rng(0)
T, rows, blocks = 32, 64, 4
qs, d = rng.integers(0, 2**32, (rows, blocks, 4), dtype=np.uint32), rng.standard_normal((rows, blocks)).astype(np.float16)
x = rng.standard_normal((T, blocks, 32)).astype(np.float32)
w = ((qs[..., None] >> (np.arange(8, dtype=np.uint32) * 4)) & 15).astype(np.float32) - 8
ref = x.reshape(T, -1).astype(np.float64) @ (w * d.astype(np.float32)[..., None, None]).reshape(rows, -1).T.astype(np.float64)
got = q4_matmul(Tensor(qs, device="PYTHON"), Tensor(d, device="PYTHON"), Tensor(x, device="PYTHON")).numpy()
np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
print("ok")
"""

def test_0013_matmul_of_a_wide_and_a_narrow_operand(trees):
  assert_patch_needed(trees, "0013", WIDE_NARROW_MATMUL)

PADDED_REDUCTION_OF_INDICES = """
# a reduction whose input is computed from its own range, not loaded (a count of indices): PADTO of that range must leave the
# padded lanes out of it, as it does for the loads it masks
import numpy as np
from tinygrad import Tensor, TinyJit, UOp, dtypes
from tinygrad.helpers import Context
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.uop.ops import AxisType
import tinygrad.codegen.opt.heuristic as heuristic

# a constant range padded as BEAM or a tensor core may pad it, on the CPU: (j >= i) counted over 33 js, padded to 48
def padded(k):
  if k.reduceop is None: return k
  (k := k.copy()).apply_opt(Opt(OptOps.PADTO, k.axes_of(AxisType.REDUCE)[0], 48))
  assert any(o.op is OptOps.PADTO for o in k.applied_opts)
  return k
chosen, heuristic.hand_coded_optimizations = heuristic.hand_coded_optimizations, padded
with Context(DEV="CPU"):
  a, one = Tensor.arange(33), Tensor.ones(33).contiguous().realize()
  np.testing.assert_equal(((a.reshape(1, 33) >= a.reshape(33, 1)).cast(dtypes.float32).sum(1) + one).numpy(), 34 - np.arange(33))
heuristic.hand_coded_optimizations = chosen

# Tensor.arange of a symbolic length (a reduction over that length, grouped with the length padded to a multiple of the group
# on a GPU-style device: PYTHON runs kernels with locals) under TinyJit at lengths the group does not divide
n = UOp.variable("n", 1, 64)
out = Tensor.zeros(64, dtype=dtypes.int32).contiguous().realize()
@TinyJit
def f(n): return Tensor(out.uop.after(out[:n].uop.store(Tensor.arange(n).cast(dtypes.int32).uop))).realize()
for s in (16, 5, 9, 3, 40):
  assert f(n.bind(s)).numpy()[:s].tolist() == list(range(s)), s
print("ok")
"""

def test_0014_padded_reduction_of_indices(trees):
  assert_patch_needed(trees, "0014", PADDED_REDUCTION_OF_INDICES, env={"DEV": "PYTHON"})

VALUE_PRODUCT_LANES = SM90_OPTS + """
# attention's value product for a chunk of queries, out[h, t, c] = sum_s p[h, t, s] v[s, c] over the keys so far (a symbolic
# length): the workgroup's lanes all go to the columns c, along which v is contiguous and which p does not index
import numpy as np
from tinygrad import Tensor, TinyJit, UOp
from tinygrad.helpers import prod

n = UOp.variable("n", 1, 512).bind(100)
opts = sm90_opts(Tensor.empty(16, 512, 512, device="NULL")[:, :n, :n] @ Tensor.empty(512, 512, device="NULL")[:n])
locals_ = [o for o in opts if o.op is OptOps.LOCAL]
assert len(locals_) == 1 and locals_[0].arg == 128, opts

# the rule on a GPU-style device (PYTHON runs kernels with locals), 32 lanes on 128 columns: the products at several lengths
rng = np.random.default_rng(0)
pd, vd = rng.standard_normal((32, 8, 8)).astype(np.float32), rng.standard_normal((8, 128)).astype(np.float32)
p, v, m = Tensor(pd).realize(), Tensor(vd).realize(), UOp.variable("n", 1, 8)
out = Tensor.empty(32, 8, 128).realize()   # 32 x 128 outputs a token: no grouped reduction
@TinyJit
def f(a, b, k): return Tensor(out.uop.after(out[:, :k].uop.store((a[:, :k, :k] @ b[:k]).uop))).realize()
for s in (3, 8, 5):
  np.testing.assert_allclose(f(p, v, m.bind(s)).numpy()[:, :s], pd[:, :s, :s] @ vd[:s], rtol=1e-4, atol=1e-4)
print("ok")
"""

def test_0015_value_product_lanes_along_the_contiguous_dim(trees):
  assert_patch_needed(trees, "0015", VALUE_PRODUCT_LANES, env={"DEV": "PYTHON"})

GENERATED_KERNELS_WAIT = CUDA_GRAPH_FAKE + """
# kernels tinygrad generates for sm_90 wait on their grid dependencies first thing, so a graph of them takes programmatic edges
# (patch 0004); for sm_80 they do not wait
from tinygrad.renderer.cstyle import CUDARenderer
from tinygrad.helpers import Target
from tinygrad.codegen import to_program
@TinyJit
def f(x): return ((x * 2 + 1).contiguous() * 3).realize()   # two kernels, the second reading the first's output
for _ in range(3): f(Tensor.ones(32).contiguous().realize())
assert added == [0, 0] and edges == [1], (added, edges)
ast = (Tensor.empty(32, device="NULL") + 1).schedule_linear().src[-1].src[0]
for arch, waits in (("sm_90", True), ("sm_80", False)):
  body = to_program(ast, CUDARenderer(Target(device="CUDA", arch=arch), use_nvcc=True)).src[2].arg.split("__global__", 1)[1].split(") {", 1)[1]
  assert body.lstrip().startswith('asm volatile("griddepcontrol.wait;"') == waits, (arch, body)
print("ok")
"""

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc for DEV=NULL:NVCC:sm_90 (CUDA kernels compiled, nothing run)")
def test_0016_generated_kernels_wait_on_their_grid(trees):
  assert_patch_needed(trees, "0016", GENERATED_KERNELS_WAIT, env={"DEV": "NULL:NVCC:sm_90"})

PROGRAMS_ON_DISK = """
# a second process lowers nothing the first one lowered: the programs come from the disk cache (CACHEDB shared by both)
import os, subprocess, sys, tempfile
env = {**os.environ, "CACHEDB": os.path.join(tempfile.mkdtemp(), "cache.db"), "DEV": "CPU"}
prog = '''
import sys, tinygrad.codegen as cg
from tinygrad import Tensor, Device
Device[Device.DEFAULT]  # the device's own start-up programs are lowered as they always are
if sys.argv[1] == "second":
  def no_lowering(*a): raise RuntimeError("lowered again")
  cg.do_to_program = no_lowering
assert (Tensor.arange(16).reshape(4, 4).sum(1) * 3).tolist() == [18, 66, 114, 162]
'''
for run in ("first", "second"): subprocess.run([sys.executable, "-c", prog, run], env=env, check=True)
print("ok")
"""

def test_0017_programs_cached_on_disk(trees):
  assert_patch_needed(trees, "0017", PROGRAMS_ON_DISK)

REDUCTIONS_SHARING_RANGES = """
# two reductions over one set of ranges (one loop, two accumulators: the gate and up rows of a packed-weight product) whose
# indices simplify differently: simplify_merge_adjacent merged a pair of ranges in one REDUCE and not the other, leaving
# two RANGEs of one axis with different sizes, and the linearizer failed (KeyError / CFGContext assertion)
import numpy as np
from tinygrad import Tensor, dtypes, UOp
from tinygrad.helpers import Context
from tinygrad.uop.ops import KernelInfo, AxisType, Ops
N = 4
def kernel(out:UOp, x:UOp, q:UOp, sc:UOp) -> UOp:
  n, R = UOp.range(N, 0), UOp.range(4, 1, AxisType.REDUCE)
  s4h, s4l, lw, b = [UOp.range(s, 2+i, AxisType.REDUCE) for i, s in enumerate((2, 2, 4, 4))]
  i, lh = R // 2, R - (R // 2) * 2
  k = i*128 + s4h*64 + s4l*32 + lh*16 + lw*4 + b
  def w(row:UOp) -> UOp:   # a 4-bit weight times an 8-bit scale, each picked from a word by shifts
    v = (q[row, i*16 + s4l*8 + lh*4 + lw] >> (b*8 + s4h*4).cast(dtypes.uint32)) & 15
    s = (sc[row, i*2 + s4h] >> (s4l*16 + lh*8).cast(dtypes.uint32)) & 255
    return v.cast(dtypes.float32) * s.cast(dtypes.float32)
  gate, up = [(x[k] * w(row)).reduce(R, s4h, s4l, lw, b, arg=Ops.ADD) for row in (n, n + N)]
  return out[n].store(gate * up).end(n).sink(arg=KernelInfo(name="gate_times_up"))
rng = np.random.default_rng(0)
xs = rng.standard_normal(256).astype(np.float32)
qs, scs = rng.integers(0, 2**32, (2*N, 32), dtype=np.uint32), rng.integers(0, 2**32, (2*N, 4), dtype=np.uint32)
i, lh, s4h, s4l, lw, b = np.meshgrid(*[np.arange(n) for n in (2, 2, 2, 2, 4, 4)], indexing="ij")
def ref_w(row):
  w = np.zeros(256)
  w[i*128 + s4h*64 + s4l*32 + lh*16 + lw*4 + b] = ((qs[row, i*16 + s4l*8 + lh*4 + lw] >> (b*8 + s4h*4)) & 15) * \
                                                  ((scs[row, i*2 + s4h] >> (s4l*16 + lh*8)) & 255)
  return w
ref = np.array([(ref_w(n) @ xs) * (ref_w(n + N) @ xs) for n in range(N)])
for noopt in (1, 0):
  with Context(NOOPT=noopt):
    out = Tensor.empty(N).custom_kernel(Tensor(xs), Tensor(qs), Tensor(scs), fxn=kernel)[0].numpy()
  np.testing.assert_allclose(out, ref, rtol=1e-4)
print("ok")
"""

def test_0018_reductions_sharing_ranges(trees):
  # CACHELEVEL=0: each tree lowers the program itself (a copy from an earlier run's disk cache would not show the patch)
  assert_patch_needed(trees, "0018", REDUCTIONS_SHARING_RANGES, env={"DEV": "CPU", "CACHELEVEL": "0"})

MATVEC_FEW_ROWS = SM90_OPTS + """
# a matvec of 2 or 4 rows (K >= 256): the rule upcasts the rows by 4 or 2, which uses the row axis up; its local then
# looked the axis up and raised StopIteration out of the heuristics
import numpy as np
from tinygrad import Tensor
for n in (2, 4, 8):
  opts = sm90_opts(Tensor.empty(n, 1024, device="NULL") @ Tensor.empty(1024, device="NULL"))
  assert any(o.op is OptOps.GROUP for o in opts) and any(o.op is OptOps.UPCAST for o in opts), (n, opts)
rng = np.random.default_rng(0)
for n in (2, 4):   # on DEV=PYTHON (GPU-style kernels with locals) against numpy
  w, x = rng.standard_normal((n, 256)).astype(np.float32), rng.standard_normal(256).astype(np.float32)
  np.testing.assert_allclose((Tensor(w) @ Tensor(x)).numpy(), w @ x, rtol=1e-4, atol=1e-4)
print("ok")
"""

def test_0019_matvec_rule_on_two_or_four_rows(trees):
  assert_patch_needed(trees, "0019", MATVEC_FEW_ROWS, env={"DEV": "PYTHON", "CACHELEVEL": "0"})

MATVEC_FEW_BLOCKS = Q4_MATVEC + """
# a matvec of 8192 rows of 4 blocks (128 weights, an attention head's absorbed product): a row shorter than 256 got no
# grouped reduction, and its 8192 outputs no GROUPTOP, so 2048 threads each walked four rows' blocks in series. The matvec
# rule takes rows from two blocks on, with a workgroup of at least 64 threads where a row's group is small
from math import prod
for blocks in (2, 4, 6):
  opts = chosen_opts(8192, blocks)
  assert any(o.op is OptOps.GROUP for o in opts), (blocks, opts)
  assert prod(o.arg for o in opts if o.op in (OptOps.GROUP, OptOps.LOCAL)) >= 64, (blocks, opts)
check_product(64, 4)   # the kernel those opts make computes the product
check_product(64, 2)
print("ok")
"""

def test_0020_matvec_rule_on_rows_of_a_few_blocks(trees):
  assert_patch_needed(trees, "0020", MATVEC_FEW_BLOCKS, env={"DEV": "PYTHON", "CACHELEVEL": "0"})

MATVEC_FEW_ROWS_GROUPED = SM90_OPTS + """
# a matvec of 64 rows of 2048 fp32 weights (an MoE router): the MV rule's 8 threads a row, 4 rows a thread and 4 row groups a
# workgroup made 4 workgroups of 32 threads on the whole GPU. Under 512 rows the grouped reduction takes it: a wide group a row
import numpy as np
from tinygrad import Tensor
for rows in (64, 256):
  opts = sm90_opts(Tensor.empty(rows, 2048, device="NULL") @ Tensor.empty(2048, device="NULL"))
  assert any(o.op is OptOps.GROUPTOP and o.arg >= 16 for o in opts) and not any(o.op is OptOps.UPCAST for o in opts), (rows, opts)
assert any(o.op is OptOps.GROUP for o in sm90_opts(Tensor.empty(4096, 2048, device="NULL") @ Tensor.empty(2048, device="NULL")))
rng = np.random.default_rng(0)   # on DEV=PYTHON (GPU-style kernels with locals) against numpy
w, x = rng.standard_normal((64, 512)).astype(np.float32), rng.standard_normal(512).astype(np.float32)
np.testing.assert_allclose((Tensor(w) @ Tensor(x)).numpy(), w @ x, rtol=1e-4, atol=1e-4)
print("ok")
"""

def test_0021_matvec_of_few_rows_goes_to_the_grouped_reduction(trees):
  assert_patch_needed(trees, "0021", MATVEC_FEW_ROWS_GROUPED, env={"DEV": "PYTHON", "CACHELEVEL": "0"})

MATVEC_ROWS_A_THREAD = Q4_MATVEC + """
# a matvec's rows a thread: 4 (a load of x serves them all) only where that leaves 32768 threads. 2048 rows of 64 blocks at 4 a
# thread were 128 workgroups of 128 threads, one an SM: too few loads in flight to stream the weights
for rows, upcast in ((8192, 4), (2048, 2), (1024, None)):
  opts = chosen_opts(rows, 64)
  assert any(o.op is OptOps.GROUP and o.arg == 32 for o in opts), (rows, opts)
  assert [o.arg for o in opts if o.op is OptOps.UPCAST] == ([upcast] if upcast else []), (rows, opts)
check_product(512, 4)   # a thread a row: the kernel those opts make computes the product
print("ok")
"""

def test_0022_matvec_rule_fewer_rows_a_thread_where_the_rows_are_few(trees):
  assert_patch_needed(trees, "0022", MATVEC_ROWS_A_THREAD, env={"DEV": "PYTHON", "CACHELEVEL": "0"})

CUDA_L2_SCRUB = """
# CUDA's L2 scrub with the driver calls faked (no GPU): BEAM times a candidate after invalidate_caches where the device has
# it; on CUDA it writes twice the L2's size (one buffer, made on the first call) and waits for the write
import ctypes, types
import tinygrad.runtime.ops_cuda as oc
calls = []
def attribute(ptr, attrib, dev):
  assert attrib == oc.cuda.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
  ctypes.cast(ptr, ctypes.POINTER(ctypes.c_int))[0] = 50 << 20   # an H100's 50 MB
  return 0
fake = {"cuDeviceGetAttribute": attribute, "cuCtxSetCurrent": lambda ctx: 0, "cuCtxSynchronize": lambda: calls.append("sync") or 0,
        "cuMemsetD8_v2": lambda ptr, value, n: calls.append(("memset", ptr, value, n)) or 0}
for name, fn in fake.items(): setattr(oc.cuda, name, fn)
allocs = []
dev = object.__new__(oc.CUDADevice)
dev.cu_device, dev.context, dev.pending_copyin = 0, None, []
dev.allocator = types.SimpleNamespace(alloc=lambda size, options=None: allocs.append(size) or 0x1000)
assert hasattr(dev, "invalidate_caches")   # what search.beam_search tests to clear L2 between timings
dev.invalidate_caches(); dev.invalidate_caches()
assert allocs == [100 << 20], allocs
assert calls == [("memset", 0x1000, 0, 100 << 20), "sync"] * 2, calls
print("ok")
"""

def test_0023_cuda_invalidate_caches(trees):
  assert_patch_needed(trees, "0023", CUDA_L2_SCRUB, env={"DEV": "NULL"})

BEAM_FROM_THE_HEURISTICS = """
# BEAM starts from the heuristics' pick as well as from nothing: with every other candidate timed slower it returns the
# heuristics' opts (a search from nothing alone returns a one-opt kernel here: nothing it times beats another)
from tinygrad import Tensor, Device
from tinygrad.codegen.opt import search
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler, args_from_ast
ast = (Tensor.empty(64, 256) @ Tensor.empty(256, 32)).linear_with_vars()[0].src[-1].src[0]
k = Scheduler(ast, Device[Device.DEFAULT].renderer)
k.convert_loop_to_global()
want = hand_coded_optimizations(k).applied_opts
assert len(want) >= 2, want
timed = []
def fake_time(prg, *a, **kw):
  timed.append(opts := prg.src[0].arg.applied_opts)
  return [0.5e-3 if opts == want else 1e-3] * 3
search._time_program = fake_time
rawbufs, var_vals = args_from_ast(ast, Device.DEFAULT)
got = search.beam_search(k, rawbufs, var_vals, 2, disable_cache=True).applied_opts
assert got == want, (got, want)
assert any(len(o) == 1 for o in timed), "the search from nothing ran too"
print("ok")
"""

def test_0024_beam_starts_from_the_heuristics(trees):
  assert_patch_needed(trees, "0024", BEAM_FROM_THE_HEURISTICS, env={"DEV": "CPU", "CACHELEVEL": "0"})

TC_SYMBOLIC_DIM = """
# tensor cores over a symbolic dim (a sequence length): the heuristics' TC opt pads it, where both sides of the output are
# wide; a thin product (16 rows against the keys) keeps the CUDA cores. Opts picked for sm_90 without a GPU; the padded
# tensor-core kernel run on the sm_80 emulator (DEV=PYTHON::sm_80) against numpy at lengths that are no multiple of its dims
import numpy as np
from tinygrad import Tensor, UOp, TinyJit, Device, dtypes
from tinygrad.codegen.opt import OptOps
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler
from tinygrad.renderer.cstyle import NVCCRenderer
from tinygrad.helpers import Target
N, C = 96, 32
S = UOp.variable("S", 1, N)
def opts(rows, ren=NVCCRenderer(Target(device="CUDA", arch="sm_90"))):
  out = Tensor.empty(rows, C, dtype=dtypes.half).matmul(Tensor.empty(N, C, dtype=dtypes.half)[:S.bind(40)].T, dtype=dtypes.float)
  k = Scheduler(out.linear_with_vars()[0].src[-1].src[0], ren)
  k.convert_loop_to_global()
  return hand_coded_optimizations(k).applied_opts
assert any(o.op is OptOps.TC for o in opts(128)), opts(128)
assert not any(o.op is OptOps.TC for o in opts(16)), opts(16)
rng = np.random.default_rng(0)
xn, cn = rng.standard_normal((128, C)).astype(np.float16), rng.standard_normal((N, C)).astype(np.float16)
x, cache = Tensor(xn).realize(), Tensor(cn).realize()
out = Tensor.zeros(128, N).contiguous().realize()
@TinyJit
def f(s): out[:, :s].assign(x.matmul(cache[:s].T, dtype=dtypes.float)).realize()
for s in (5, 17, 40, 96, 9):
  f(S.bind(s))
  ref = xn.astype(np.float64) @ cn[:s].astype(np.float64).T
  np.testing.assert_allclose(out.numpy()[:, :s], ref, rtol=1e-3, atol=1e-3)
assert any(o.op is OptOps.TC for o in opts(128, Device[Device.DEFAULT].renderer)), "the emulated kernel takes the tensor core"
print("ok")
"""

def test_0025_tensor_cores_over_a_symbolic_dim(trees):
  assert_patch_needed(trees, "0025", TC_SYMBOLIC_DIM, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

TF32_THREE_PRODUCTS = """
# fp32 products on NVIDIA's tf32 tensor cores at ALLOW_TF32=2: three tf32 products a tile (hi.hi + hi.lo + lo.hi, x = hi + lo,
# hi x's top 11 significant bits); the WMMAs of a kernel lowered for sm_90 without a GPU counted, and the product run on the
# sm_80 emulator (DEV=PYTHON::sm_80, which multiplies at fp32) against numpy
import numpy as np
from tinygrad import Tensor
from tinygrad.uop.ops import Ops
from tinygrad.codegen import full_rewrite_to_sink
from tinygrad.renderer.cstyle import NVCCRenderer
from tinygrad.helpers import Target, Context
def wmmas(tf32):
  with Context(ALLOW_TF32=tf32):
    ast = (Tensor.empty(64, 64) @ Tensor.empty(64, 64)).linear_with_vars()[0].src[-1].src[0]
    return sum(u.op is Ops.WMMA for u in full_rewrite_to_sink(ast, NVCCRenderer(Target(device="CUDA", arch="sm_90"))).toposort())
assert wmmas(0) == 0 and wmmas(1) > 0 and wmmas(2) == 3 * wmmas(1), (wmmas(0), wmmas(1), wmmas(2))
rng = np.random.default_rng(0)
a, b = rng.standard_normal((64, 128)).astype(np.float32), rng.standard_normal((128, 32)).astype(np.float32)
with Context(ALLOW_TF32=2): got = (Tensor(a) @ Tensor(b)).numpy()
ref = a.astype(np.float64) @ b.astype(np.float64)
assert np.abs(got - ref).max() / np.abs(ref).max() < 1e-5, np.abs(got - ref).max()
print("ok")
"""

def test_0026_fp32_on_tf32_tensor_cores_as_three_products(trees):
  assert_patch_needed(trees, "0026", TF32_THREE_PRODUCTS, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

ELEMENTWISE_SYMBOLIC_LANES = """
# an elementwise kernel over a dim of symbolic size that its store steps through contiguously (exp of each row of scores over
# the keys so far) takes its lanes along that dim, padded: opts picked for sm_90 without a GPU; the kernel run on DEV=PYTHON
# (GPU-style kernels with locals) against numpy at lengths that are no multiple of 128
import numpy as np
from tinygrad import Tensor, UOp, TinyJit, Device
from tinygrad.codegen.opt import OptOps
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler
from tinygrad.renderer.cstyle import NVCCRenderer
from tinygrad.helpers import Target
R, N = 64, 300
S = UOp.variable("S", 1, N)
def opts(ren):
  out = (Tensor.empty(R, N)[:, :S.bind(40)] - Tensor.empty(R, 1)).exp()
  k = Scheduler(out.linear_with_vars()[0].src[-1].src[0], ren)
  k.convert_loop_to_global()
  return hand_coded_optimizations(k), k
for ren in (NVCCRenderer(Target(device="CUDA", arch="sm_90")), Device[Device.DEFAULT].renderer):
  opt, k = opts(ren)
  sym = next(i for i, s in enumerate(k.full_shape) if not isinstance(s, int))
  assert any(o.op is OptOps.LOCAL and o.axis == sym for o in opt.applied_opts), opt.applied_opts
rng = np.random.default_rng(0)
xn, mn = rng.standard_normal((R, N)).astype(np.float32), rng.standard_normal((R, 1)).astype(np.float32)
x, m = Tensor(xn).realize(), Tensor(mn).realize()
out = Tensor.zeros(R, N).contiguous().realize()
@TinyJit
def f(s): out[:, :s].assign((x[:, :s] - m).exp()).realize()
for s in (5, 130, 256, 300, 77):
  f(S.bind(s))
  np.testing.assert_allclose(out.numpy()[:, :s], np.exp(xn[:, :s] - mn), rtol=1e-5)
print("ok")
"""

def test_0027_lanes_along_a_symbolic_contiguous_dim(trees):
  assert_patch_needed(trees, "0027", ELEMENTWISE_SYMBOLIC_LANES, env={"DEV": "PYTHON", "CACHELEVEL": "0"})

DISK_CACHE_FROM_A_THREAD = """
import threading
from tinygrad.helpers import diskcache_get, diskcache_put
diskcache_put("patchtest_threads", "main", 1)   # the main thread opens the cache
out = []
def worker():
  try: out.append((diskcache_get("patchtest_threads", "main"), diskcache_put("patchtest_threads", "worker", 2),
                   diskcache_get("patchtest_threads", "worker")))
  except Exception as e: out.append(e)
t = threading.Thread(target=worker)
t.start(); t.join()
assert out == [(1, 2, 2)], out
print("ok")
"""

def test_0028_disk_cache_from_any_thread(trees, tmp_path):
  assert_patch_needed(trees, "0028", DISK_CACHE_FROM_A_THREAD, env={"CACHEDB": str(tmp_path / "cache.db")})

INT8_TENSOR_CORES = """
# an int8 matmul written exactly (both operands widened to int32 before the multiply) takes NVIDIA's int8 tensor cores: lowered
# and compiled for sm_90 without a GPU, its source has the s8 mma; run on the sm_80 emulator it equals numpy's int64 product
import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.renderer.cstyle import CUDARenderer
from tinygrad.helpers import Target
from tinygrad.codegen import to_program
def mm(a, b): return a.cast(dtypes.int32) @ b.cast(dtypes.int32).T   # b as weights are stored: (out, in), contiguous along k
a, b = Tensor.empty(64, 128, dtype=dtypes.int8, device="NULL"), Tensor.empty(32, 128, dtype=dtypes.int8, device="NULL")
ast = mm(a, b).schedule_linear().src[-1].src[0]
src = to_program(ast, CUDARenderer(Target(device="CUDA", arch="sm_90"), use_nvcc=True)).src[2].arg
assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in src, src
rng = np.random.default_rng(0)
a, b = rng.integers(-128, 128, (64, 128), dtype=np.int8), rng.integers(-128, 128, (32, 128), dtype=np.int8)
assert np.array_equal(mm(Tensor(a), Tensor(b)).numpy(), a.astype(np.int64) @ b.astype(np.int64).T)
print("ok")
"""

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc for the CUDA source compiled for sm_90 (nothing run)")
def test_0029_int8_tensor_cores_on_cuda(trees):
  assert_patch_needed(trees, "0029", INT8_TENSOR_CORES, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

# the same product's operands load four bytes a load, none a byte a load
INT8_VECTOR_LOADS = INT8_TENSOR_CORES.replace('assert "mma.sync',
                                              'assert "*((signed_char4*)" in src and "signed char val" not in src, src\nassert "mma.sync')

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc for the CUDA source compiled for sm_90 (nothing run)")
def test_0030_8_bit_loads_grouped_into_vector_loads(trees):
  assert_patch_needed(trees, "0030", INT8_VECTOR_LOADS, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

NESTED_INT8_TENSOR_CORES = """
# a block-scaled int8 product (each block's int32 sum, times both blocks' scales, summed over the blocks: a nested reduction,
# one kernel) takes the int8 tensor cores at TC_OPT=0: lowered and compiled for sm_90 without a GPU, its source has the s8
# mma; run on the sm_80 emulator it equals numpy's float64 product
import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.renderer.cstyle import CUDARenderer
from tinygrad.helpers import Target
from tinygrad.codegen import to_program
T, N, B = 64, 16, 4
def prod(xq, wq, sx, sw):
  dots = (xq.reshape(T, 1, B, 32).cast(dtypes.int32) * wq.reshape(1, N, B, 32).cast(dtypes.int32)).sum(-1)
  return (dots.cast(dtypes.float) * sx.reshape(T, 1, B) * sw.reshape(1, N, B)).sum(-1)
e = lambda *s, dt=dtypes.int8: Tensor.empty(*s, dtype=dt, device="NULL")
ast = prod(e(T, B, 32), e(N, B, 32), e(T, B, dt=dtypes.float), e(N, B, dt=dtypes.float)).schedule_linear().src[-1].src[0]
src = to_program(ast, CUDARenderer(Target(device="CUDA", arch="sm_90"), use_nvcc=True)).src[2].arg
assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in src, src
rng = np.random.default_rng(0)
xq, wq = rng.integers(-128, 128, (T, B, 32), dtype=np.int8), rng.integers(-8, 8, (N, B, 32), dtype=np.int8)
sx, sw = rng.random((T, B), dtype=np.float32), rng.random((N, B), dtype=np.float32)
got = prod(Tensor(xq), Tensor(wq), Tensor(sx), Tensor(sw)).numpy()
ref = np.einsum("tbk,nbk,tb,nb->tn", xq.astype(np.float64), wq.astype(np.float64), sx.astype(np.float64), sw.astype(np.float64))
assert np.abs(got - ref).max() / np.abs(ref).max() < 1e-6, np.abs(got - ref).max()
print("ok")
"""

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc for the CUDA source compiled for sm_90 (nothing run)")
def test_0031_tensor_cores_for_the_innermost_reduce_of_nested_reductions(trees):
  assert_patch_needed(trees, "0031", NESTED_INT8_TENSOR_CORES, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

TC_SYMBOLIC_UPCAST = """
# tensor-core kernels upcast a symbolic M: a block-scaled int8 product over a symbolic number of tokens (a prompt chunk of up
# to 128) takes 4x4 tensor-core tiles a warp, as at a constant 128, not 1x4 (each weight fragment then serves four tiles of
# tokens). Lowered for sm_90 without a GPU, its mma counted; run on the sm_80 emulator (DEV=PYTHON::sm_80) at token counts
# that are no multiple of the tiles, against numpy
import numpy as np
from tinygrad import Tensor, UOp, TinyJit, dtypes
from tinygrad.renderer.cstyle import CUDARenderer
from tinygrad.helpers import Target
from tinygrad.codegen import to_program
T, N, B = 128, 64, 2
S = UOp.variable("S", 1, T)
def prod(xq, wq, sx, sw):
  dots = (xq.reshape(-1, 1, B, 32).cast(dtypes.int32) * wq.reshape(1, N, B, 32).cast(dtypes.int32)).sum(-1)
  return (dots.cast(dtypes.float) * sx.reshape(-1, 1, B) * sw.reshape(1, N, B)).sum(-1)
e = lambda *s, dt=dtypes.int8: Tensor.empty(*s, dtype=dt, device="NULL")
def mmas(rows):
  ast = prod(e(T, B, 32)[:rows], e(N, B, 32), e(T, B, dt=dtypes.float)[:rows], e(N, B, dt=dtypes.float)).linear_with_vars()[0].src[-1].src[0]
  return to_program(ast, CUDARenderer(Target(device="CUDA", arch="sm_90"), use_nvcc=True)).src[2].arg.count("__WMMA_8_16_32_signed_char_int(") - 1
assert mmas(T) == mmas(S.bind(40)) == 16, (mmas(T), mmas(S.bind(40)))
rng = np.random.default_rng(0)
xq, wq = rng.integers(-128, 128, (T, B, 32), dtype=np.int8), rng.integers(-8, 8, (N, B, 32), dtype=np.int8)
sx, sw = rng.random((T, B), dtype=np.float32), rng.random((N, B), dtype=np.float32)
X, W, SX, SW = Tensor(xq).realize(), Tensor(wq).realize(), Tensor(sx).realize(), Tensor(sw).realize()
out = Tensor.zeros(T, N).contiguous().realize()
@TinyJit
def f(s): out[:s].assign(prod(X[:s], W, SX[:s], SW)).realize()
for s in (70, 5, 128, 33):
  f(S.bind(s))
  ref = np.einsum("tbk,nbk,tb,nb->tn", xq[:s].astype(np.float64), wq.astype(np.float64), sx[:s].astype(np.float64), sw.astype(np.float64))
  got = out.numpy()[:s]
  assert np.abs(got - ref).max() / np.abs(ref).max() < 1e-6, (s, np.abs(got - ref).max())
print("ok")
"""

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc for the CUDA source compiled for sm_90 (nothing run)")
def test_0032_tensor_core_kernels_upcast_a_symbolic_dim(trees):
  assert_patch_needed(trees, "0032", TC_SYMBOLIC_UPCAST, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

CPU_HELPERS_CACHED = """
# the CPU device's four helper programs (signal, wait, timestamp, worker) are lowered by the first process only: a second one
# with the same disk cache opens the device, and runs a kernel, lowering none of them
import os, subprocess, sys, tempfile
child = '''
import tinygrad.runtime.ops_cpu as cpu
from tinygrad import Device, Tensor
lowered, lower = [], cpu.do_to_program
cpu.do_to_program = lambda *a: lowered.append(a) or lower(*a)
Device["CPU"]
assert (Tensor([1.0, 2.0]) * 3).tolist() == [3.0, 6.0]
print(len(lowered))
'''
env = {**os.environ, "DEV": "CPU", "CACHEDB": os.path.join(tempfile.mkdtemp(), "cache.db")}
runs = [subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True) for _ in range(2)]
assert all(r.returncode == 0 for r in runs), [r.stderr[-2000:] for r in runs]
assert [r.stdout.split()[-1] for r in runs] == ["4", "0"], [r.stdout for r in runs]
print("ok")
"""

def test_0033_cpu_helper_programs_from_the_disk_cache(trees):
  assert_patch_needed(trees, "0033", CPU_HELPERS_CACHED, env={"DEV": "CPU"})

def symbolic_graph(kernels: int) -> str:
  """A TinyJit `f` of `kernels` kernels over symbolic lengths of p and n, captured by three calls on `c`."""
  return f"""
from tinygrad import Tensor, TinyJit, UOp
p, n = UOp.variable("p", 0, 32), UOp.variable("n", 1, 32)
@TinyJit
def f(c:Tensor, p:UOp, n:UOp) -> Tensor:
  y = Tensor.zeros(4).contiguous()
  for i in range({kernels}):
    rows = (p + n, n, p + 2 * n)[i % 3]
    y = (y + (c[:rows] * (i + 2)).sum(0)).contiguous()
  return y.realize()
c = Tensor.ones(128, 4).contiguous().realize()
for v in (8, 9, 10): f(c, p.bind(v), n.bind(3))
"""

GRAPH_ESTIMATES = symbolic_graph(150) + """
# a graph of 150 kernels over symbolic lengths of p and n: its estimates are a short linear form equal to the kernels' own sum
from tinygrad.uop.ops import Ops
from tinygrad.engine.jit import GraphRunner
from tinygrad.engine.realize import estimate_uop
linear = f.captured.linear
gr = GraphRunner(UOp(Ops.LINEAR, src=(linear,)), (c.uop.base,))
ops = gr.estimates.ops
for vv in ({"p": 0, "n": 1}, {"p": 17, "n": 5}, {"p": 32, "n": 32}):
  want = sum(e if isinstance(e, int) else e.sym_infer(vv) for e in (estimate_uop(k).ops for k in linear.src))
  assert ops.sym_infer(vv) == want, (vv, ops.sym_infer(vv), want)
size = len(ops.toposort())
print(len(linear.src), "calls,", size, "nodes")
assert size < 20, size
print("ok")
"""

def test_0034_graph_estimates_summed_as_a_short_linear_form(trees):
  assert_patch_needed(trees, "0034", GRAPH_ESTIMATES, env={"DEV": "CPU"})

PACKED_PRODUCT_ON_A_CPU = """
# a product of packed 4-bit weights on the CPU (no local memory): the reduce over a word's 8 values and a block's 4 words is
# unrolled whole, the 64 blocks stay a loop, and 8 outputs are upcast (4 without the patch, and only the 8 values unrolled);
# the kernel's result equals numpy's
import numpy as np
from tinygrad import Tensor, Device, dtypes
from tinygrad.codegen.opt import OptOps
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler
N, B = 2048, 64
rng = np.random.default_rng(0)
wn = rng.integers(0, 2**32, (N, B, 4), dtype=np.uint32)
xn = rng.standard_normal((B, 4, 8)).astype(np.float32)
w, x = Tensor(wn).realize(), Tensor(xn).realize()
def product(): return (((w.unsqueeze(-1) >> (Tensor.arange(8) * 4).cast(dtypes.uint32)) & 15).float() * x).sum((1, 2, 3))
got = product().numpy()
k = Scheduler(product().linear_with_vars()[0].src[-1].src[0], Device["CPU"].renderer)
k.convert_loop_to_global()
opt = hand_coded_optimizations(k)
assert [s for s, t in zip(opt.full_shape, opt.axis_types) if t.name == "REDUCE"] == [B], (opt.full_shape, opt.axis_types)
assert sorted(s for s, t in zip(opt.full_shape, opt.axis_types) if t.name == "UNROLL") == [4, 8], opt.applied_opts
assert np.prod([s for s, t in zip(opt.full_shape, opt.axis_types) if t.name == "UPCAST"]) == 8, opt.applied_opts
ref = ((wn[..., None] >> (np.arange(8, dtype=np.uint32) * 4)) & 15).astype(np.float64).reshape(N, -1) @ xn.astype(np.float64).reshape(-1)
assert np.abs(got - ref).max() < 1e-5 * np.abs(ref).max(), np.abs(got - ref).max()
print("ok")
"""

def test_0035_packed_product_on_a_cpu_unrolls_a_block(trees):
  assert_patch_needed(trees, "0035", PACKED_PRODUCT_ON_A_CPU, env={"DEV": "CPU", "CACHELEVEL": "0"})

ATTENTION_SCORES_ON_A_CPU = """
# a chunk's attention scores on the CPU (no local memory): queries x keys so far (a symbolic count); the upcast loop counts the
# outputs along the keys at their bound and upcasts the keys (padded, masked, to 4) and the query rows: a 4 x 4 tile of
# outputs a thread, not one (without the patch nothing is upcast and each output reloads both rows); the result equals numpy's
import numpy as np
from tinygrad import Tensor, Device, Variable
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler
H, Q, D, LM, n = 4, 32, 288, 512, 157
rng = np.random.default_rng(0)
qn, cn, vn = (rng.standard_normal(s).astype(np.float32) for s in ((H, Q, D), (LM, D), (LM, 64)))
q, c, v = Tensor(qn).realize(), Tensor(cn).realize(), Tensor(vn).realize()
L = Variable("L", 1, LM).bind(n)
k = Scheduler((q @ c[:L].T).contiguous().linear_with_vars()[0].src[-1].src[0], Device["CPU"].renderer)
k.convert_loop_to_global()
opt = hand_coded_optimizations(k)
up = [(o.axis, o.arg) for o in opt.applied_opts if o.op.name == "UPCAST"]
assert len(up) == 2 and np.prod([a for _, a in up]) == 16, opt.applied_opts
assert any(o.op.name == "PADTO" for o in opt.applied_opts), opt.applied_opts   # the keys, 157 of them, padded to 160
got = ((q @ c[:L].T).contiguous() @ v[:L]).numpy()
ref = (qn.astype(np.float64) @ cn[:n].T.astype(np.float64)) @ vn[:n].astype(np.float64)
assert np.abs(got - ref).max() < 1e-4 * np.abs(ref).max(), np.abs(got - ref).max()
print("ok")
"""

def test_0036_attention_scores_on_a_cpu_upcast_along_the_keys(trees):
  assert_patch_needed(trees, "0036", ATTENTION_SCORES_ON_A_CPU, env={"DEV": "CPU", "CACHELEVEL": "0"})

EMULATED_FLOAT_DENORMALS = """
# conversions of emulated floats on the CPU (the dtypes emulated, as on a device that lacks them) keep denormals: every code
# of half, bfloat16, fp8e4m3 and fp8e5m2 widened to float, and float values at and between half's (ties included) narrowed to
# half and the fp8s, equal numpy's / tinygrad's tables (without the patch the denormals are zero both ways)
import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.dtype import fp8_to_float, float_to_fp8
def same(a, b): return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
h = np.arange(65536, dtype=np.uint16)
assert same(Tensor(h).bitcast(dtypes.half).float().numpy(), h.view(np.float16).astype(np.float32)), "half"
assert same(Tensor(h).bitcast(dtypes.bfloat16).float().numpy(), (h.astype(np.uint32) << 16).view(np.float32)), "bfloat16"
c = np.arange(256, dtype=np.uint8)
for fp8 in (dtypes.fp8e4m3, dtypes.fp8e5m2):
  assert same(Tensor(c).bitcast(fp8).float().numpy(), np.array([fp8_to_float(int(i), fp8) for i in c], np.float32)), fp8
v = np.unique(h.view(np.float16)[np.isfinite(h.view(np.float16))].astype(np.float32))
x = np.concatenate([v, ((v[:-1].astype(np.float64) + v[1:]) / 2).astype(np.float32)])
assert np.array_equal(Tensor(x).cast(dtypes.half).bitcast(dtypes.uint16).numpy(), x.astype(np.float16).view(np.uint16)), "to half"
small = x[np.abs(x) < 2 ** -5]   # the fp8s' denormals and their first normals
for fp8 in (dtypes.fp8e4m3, dtypes.fp8e5m2):
  got = Tensor(small).cast(fp8).bitcast(dtypes.uint8).numpy()
  assert np.array_equal(got, np.array([float_to_fp8(float(f), fp8) for f in small], np.uint8)), f"to {fp8}"
print("ok")
"""

def test_0037_emulated_float_conversions_keep_denormals(trees):
  env = {"DEV": "CPU", "CACHELEVEL": "0", "EMULATED_DTYPES": "half,bfloat16,fp8e4m3,fp8e5m2"}
  assert_patch_needed(trees, "0037", EMULATED_FLOAT_DENORMALS, env=env)

VALUES_ON_A_CPU = """
# attention's values on the CPU (no local memory): probabilities over the keys so far (a symbolic count) times the values, a
# reduce that stays a loop; the heuristics upcast the values' contiguous dim twice (16 outputs along it, the probabilities a
# scalar a step) and no second axis, whose rows a thread would load one strided scalar each a step; the result equals numpy's
import numpy as np
from tinygrad import Tensor, Device, Variable
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler
H, Q, LM, D, n = 4, 32, 512, 64, 157
rng = np.random.default_rng(0)
pn, vn = rng.standard_normal((H, Q, LM)).astype(np.float32), rng.standard_normal((LM, D)).astype(np.float32)
p, v = Tensor(pn).realize(), Tensor(vn).realize()
L = Variable("L", 1, LM).bind(n)
k = Scheduler((p[:, :, :L] @ v[:L]).linear_with_vars()[0].src[-1].src[0], Device["CPU"].renderer)
k.convert_loop_to_global()
opt = hand_coded_optimizations(k)
up = [o for o in opt.applied_opts if o.op.name == "UPCAST"]
assert len(up) == 2 and up[0].axis == up[1].axis and up[0].arg * up[1].arg == 16, opt.applied_opts
got = (p[:, :, :L] @ v[:L]).numpy()
ref = pn[:, :, :n].astype(np.float64) @ vn[:n].astype(np.float64)
assert np.abs(got - ref).max() < 1e-4 * np.abs(ref).max(), np.abs(got - ref).max()
print("ok")
"""

def test_0038_attention_values_on_a_cpu_upcast_one_axis(trees):
  assert_patch_needed(trees, "0038", VALUES_ON_A_CPU, env={"DEV": "CPU", "CACHELEVEL": "0"})

# the opts tinygrad's heuristics pick for a tensor's last kernel (on the default device's renderer, or sm_90's without a GPU):
# what the heuristic patches' programs check, put in front of them
HEURISTIC_OPTS = """
from tinygrad import Device
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler
from tinygrad.renderer.cstyle import NVCCRenderer
from tinygrad.helpers import Target
SM90 = NVCCRenderer(Target(device="CUDA", arch="sm_90"))
def heuristic_opts(t, ren=None):
  k = Scheduler(t.linear_with_vars()[0].src[-1].src[0], ren or Device[Device.DEFAULT].renderer)
  k.convert_loop_to_global()
  return hand_coded_optimizations(k).applied_opts
"""

# a tensor's last kernel run under the given opts instead of the heuristics' (the rest of its schedule as usual): its output;
# and a small product of half tiles under given opts, its error against float64
RUN_WITH_OPTS = """
from tinygrad.uop.ops import KernelInfo, buffers
from tinygrad.engine.realize import run_linear
def run_with_opts(t, opts):
  linear, var_vals = t.linear_with_vars()
  call = linear.src[-1]
  call = call.replace(src=(call.src[0].replace(arg=KernelInfo(name="forced", opts_to_apply=tuple(opts))), *call.src[1:]))
  run_linear(linear.replace(src=(*linear.src[:-1], call)), var_vals)
  return buffers[call.src[1]].numpy().reshape(t.shape)
def tiles_error(opts):  # half tiles 4 x 32 x 64 times 4 x 64 x 256 under opts: the largest error over the largest value
  import numpy as np
  from tinygrad import Tensor
  rng = np.random.default_rng(0)
  an, bn = rng.standard_normal((4, 32, 64)).astype(np.float16), rng.standard_normal((4, 64, 256)).astype(np.float16)
  ref = an.astype(np.float64) @ bn.astype(np.float64)
  return np.abs(run_with_opts((Tensor(an).realize() @ Tensor(bn).realize()).float(), opts) - ref).max() / np.abs(ref).max()
"""

TC_LOCAL_BY_GRID = HEURISTIC_OPTS + """
# the tensor-core rule's local of N follows the grid: a half matmul whose local of 4 would leave fewer than 256 workgroups
# (512 x 2048: 128; 128 x 256: 4) takes a local of 2, a wide one (512 x 16384: 1,024) keeps 4; on the sm_80 emulator, the
# small one's result equals numpy's
import numpy as np
from tinygrad import Tensor, dtypes
def local_n(a, b):
  opts = heuristic_opts((a @ b).float())
  assert opts[0].op.name == "TC", opts
  return [o.arg for o in opts if o.op.name == "LOCAL"]
e = lambda *s: Tensor.empty(*s, dtype=dtypes.half)
assert local_n(e(512, 64), e(64, 2048)) == [2] and local_n(e(512, 64), e(64, 16384)) == [4]
rng = np.random.default_rng(0)
an, bn = rng.standard_normal((128, 64)).astype(np.float16), rng.standard_normal((64, 256)).astype(np.float16)
a, b = Tensor(an).realize(), Tensor(bn).realize()
assert local_n(a, b) == [2]
ref = an.astype(np.float64) @ bn.astype(np.float64)
assert np.abs((a @ b).float().numpy() - ref).max() < 1e-2, "wrong result"
print("ok")
"""

def test_0039_tensor_core_local_follows_the_grid(trees):
  assert_patch_needed(trees, "0039", TC_LOCAL_BY_GRID, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

CPU_GRAPH = """
# a captured CPU step replays its kernels through a graph (CPUGraph: their arguments resolved once), its results those of
# numpy as the step's input buffers and a variable's value change from call to call
import numpy as np
from tinygrad import Tensor, TinyJit, Variable
from tinygrad.uop.ops import Ops
rng = np.random.default_rng(0)
wn = rng.standard_normal((64, 64)).astype(np.float32)
w = Tensor(wn).realize()
@TinyJit
def f(x, n):
  h = (x @ w).relu()
  return ((h[:n].sum(0) + (h * 2).max(0)) * 0.01).softmax().realize()
for i in range(5):
  xn, n = rng.standard_normal((64, 64)).astype(np.float32), 5 + 13 * i
  got = f(Tensor(xn), Variable("n", 1, 64).bind(n)).numpy()
  hn = np.maximum(xn.astype(np.float64) @ wn, 0)
  e = np.exp((s := (hn[:n].sum(0) + 2 * hn.max(0)) * 0.01) - s.max())
  assert np.abs(got - e / e.sum()).max() < 1e-6, (i, np.abs(got - e / e.sum()).max())
calls = f.captured.linear.src
assert any(c.src[0].op is Ops.CUSTOM_FUNCTION and c.src[0].arg == "graph" for c in calls), [c.src[0].op for c in calls]
print("ok")
"""

def test_0040_cpu_steps_replay_through_a_graph(trees):
  assert_patch_needed(trees, "0040", CPU_GRAPH, env={"DEV": "CPU", "CACHELEVEL": "0"})

MATVEC_UPCASTS = HEURISTIC_OPTS + """
import numpy as np
from tinygrad import Tensor
def upcasts(t): return [o.arg for o in heuristic_opts(t) if o.op.name == "UPCAST"]
def matvec_upcasts(rows):
  # a float matvec of rows x 512: the upcasts the heuristics give it, its result checked against numpy's first
  rng = np.random.default_rng(0)
  an, xn = rng.standard_normal((rows, 512)).astype(np.float32), rng.standard_normal(512).astype(np.float32)
  a, x = Tensor(an).realize(), Tensor(xn).realize()
  assert np.abs((a @ x).numpy() - an.astype(np.float64) @ xn).max() < 1e-4, "wrong result"
  return upcasts(a @ x)
"""

SMALL_UPCAST_WITHOUT_LOCALS = MATVEC_UPCASTS + """
# without local memory a small kernel's outputs upcast too: a matvec of 256 rows (under the 1024 outputs a GPU's upcast
# needs) takes an upcast of its rows on the CPU, and its result equals numpy's
assert (u := matvec_upcasts(256)) == [4], u
print("ok")
"""

def test_0041_without_locals_small_kernels_upcast(trees):
  assert_patch_needed(trees, "0041", SMALL_UPCAST_WITHOUT_LOCALS, env={"DEV": "CPU", "CACHELEVEL": "0"})

TC_UPCASTS_BY_GRID = HEURISTIC_OPTS + """
# the tensor-core rule's upcasts keep 256 tiles in the grid: a half 512 x 128 times 128 x 64 (256 tiles of 16 x 8) takes
# no upcast, a half 512 x 64 times 64 x 2048 (8,192 tiles) keeps 4 and 4; on the sm_80 emulator the small one's result
# equals numpy's
import numpy as np
from tinygrad import Tensor, dtypes
def upcasts(a, b):
  opts = heuristic_opts((a @ b).float())
  assert opts[0].op.name == "TC", opts
  return [o.arg for o in opts if o.op.name == "UPCAST"]
assert upcasts(Tensor.empty(512, 64, dtype=dtypes.half), Tensor.empty(64, 2048, dtype=dtypes.half)) == [4, 4]
rng = np.random.default_rng(0)
an, bn = rng.standard_normal((512, 128)).astype(np.float16), rng.standard_normal((128, 64)).astype(np.float16)
a, b = Tensor(an).realize(), Tensor(bn).realize()
assert upcasts(a, b) == [], upcasts(a, b)
ref = an.astype(np.float64) @ bn.astype(np.float64)
assert np.abs((a @ b).float().numpy() - ref).max() < 1e-2, "wrong result"
print("ok")
"""

def test_0042_tensor_core_upcasts_keep_the_grid(trees):
  assert_patch_needed(trees, "0042", TC_UPCASTS_BY_GRID, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

GROUPED_FEW_THOUSAND = HEURISTIC_OPTS + """
# a grouped reduction for a few thousand outputs of a long reduction: an entry's rank among 3072 (3072 outputs of 3072) and
# the row sums of 4096 x 1024 take GROUPTOP 16 on a GPU's renderer, 4096 x 512 and 16384 x 1024 keep the upcast; on the
# sm_80 emulator the sums of 2304 x 1024 equal numpy's
import numpy as np
from tinygrad import Tensor, dtypes
def opts(t): return [(o.op.name, o.arg) for o in heuristic_opts(t)]
def rank(e):
  p = Tensor.arange(e.shape[0])
  return ((e.unsqueeze(0) == e.unsqueeze(1)) & (p.unsqueeze(0) < p.unsqueeze(1))).sum(1)
assert opts(rank(Tensor.empty(3072, dtype=dtypes.int32))) == [("GROUPTOP", 16)]
assert opts(Tensor.empty(4096, 1024).sum(1)) == [("GROUPTOP", 16)]
assert ("GROUPTOP", 16) not in opts(Tensor.empty(4096, 512).sum(1)) and ("GROUPTOP", 16) not in opts(Tensor.empty(16384, 1024).sum(1))
xn = np.random.default_rng(0).integers(-64, 64, (2304, 1024)).astype(np.int32)
x = Tensor(xn).realize()
assert opts(x.sum(1)) == [("GROUPTOP", 16)]
assert (x.sum(1).numpy() == xn.sum(1)).all(), "wrong sums"
print("ok")
"""

def test_0043_grouped_reduction_for_a_few_thousand_outputs(trees):
  assert_patch_needed(trees, "0043", GROUPED_FEW_THOUSAND, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

# the nodes every toposort visits, counted in walked[0]
TOPOSORT_WALKED = """
from tinygrad.uop.ops import UOp
walked, toposort = [0], UOp.toposort
def counting(self, *a, **k):
  walked[0] += len(r:=toposort(self, *a, **k))
  return r
UOp.toposort = counting
"""

STORE_HAZARD_WITHOUT_WALK = TOPOSORT_WALKED + """
# a store's hazard checks do not walk its value's graph: scheduling k blocks, each storing a row of its cache and reading
# the cache back into the value the next block stores, walks a number of nodes linear in k (each check walked every
# earlier block); the checks still answer the same for targets that are a buffer, a param or an earlier assign (AFTER),
# and a value that reads its target only inside a call's body does not read it
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import UOp
from tinygrad.schedule.rangeify import fix_store_hazard
from tinygrad.schedule.indexing import realize_store_after_src, IndexingContext
def schedule_walk(k):
  caches, h = [Tensor.zeros(4, 8).contiguous().realize() for _ in range(k)], Tensor.ones(8).contiguous().realize()
  for c in caches:
    c[1:2].assign(h.reshape(1, 8))
    h = (h * 2 + c.sum(0)).relu()
  walked[0] = 0
  h.schedule_linear(*caches)
  return walked[0]
w16, w32, w64 = schedule_walk(16), schedule_walk(32), schedule_walk(64)
assert w64 < 2.2 * w32 and w32 < 2.2 * w16, f"nodes walked for 16, 32, 64 blocks: {w16}, {w32}, {w64}"
A, B = Tensor.empty(8, 8).uop, Tensor.empty(8, 8).uop
for tgt in (A, A.after(A.store(B + 1)), UOp.param(0, dtypes.float, (8, 8), "CPU")):
  assert fix_store_hazard(tgt, tgt.flip(0) + B) is not None, tgt.base.op
  assert fix_store_hazard(tgt, B.flip(0) + 1) is None and fix_store_hazard(tgt, tgt + B) is None, tgt.base.op
  ctx, srcs = IndexingContext(), [(tgt * 2).sum(1).reshape(8, 1).expand(8, 8), B * 2, (tgt * 2).call(B, ret_dtype=dtypes.float),
                                  (B * 2).call(tgt.flip(0), ret_dtype=dtypes.float)]
  for s in srcs: realize_store_after_src(ctx, tgt, s)
  assert [s in ctx.realize_map for s in srcs] == [True, False, False, True], (tgt.base.op, [s in ctx.realize_map for s in srcs])
# a value that reads its target through a flip is still copied out first: the result is numpy's
a, b = Tensor.arange(64).reshape(8, 8).contiguous().realize(), Tensor.arange(64).reshape(8, 8).contiguous().realize()
want = a.numpy()[::-1] + b.numpy()
assert (a.assign(a.flip(0) + b).numpy() == want).all()
print("ok")
"""

def test_0044_store_hazard_checks_without_a_graph_walk(trees):
  assert_patch_needed(trees, "0044", STORE_HAZARD_WITHOUT_WALK, env={"DEV": "CPU", "CACHELEVEL": "0"})

PROGRAM_SWAP_WITHOUT_WALK = """
# a call of a kernel takes its compiled PROGRAM without a walk of the PROGRAM's graph: swapping the programs into a
# schedule of k calls of one kernel walks a number of nodes that grows by a few a call, not by the program's size
from tinygrad import Tensor
from tinygrad.uop.ops import Ops, RewriteContext
from tinygrad.engine.realize import lower_and_compile
walked, rewrite = [0], RewriteContext.unified_rewrite
def counting(self, root):
  r = rewrite(self, root)
  walked[0] += len(self.replace)
  return r
RewriteContext.unified_rewrite = counting
def walk(k):
  ys = [(Tensor.empty(256).contiguous().realize() * 2 + 1).exp2().sum() for _ in range(k)]
  linear = ys[0].schedule_linear(*ys[1:])
  lower_and_compile(linear)   # the one kernel lowered and compiled before counting
  walked[0] = 0
  out = lower_and_compile(linear)
  assert len(calls:=[u for u in out.toposort() if u.op is Ops.CALL and u.src[0].op is Ops.PROGRAM]) == k, len(calls)
  return walked[0], max(len(c.src[0].toposort()) for c in calls)
(w8, size), (w32, _) = walk(8), walk(32)
assert (per_call:=(w32 - w8) / 24) < size / 4, f"nodes walked a call {per_call:.0f}, the program has {size}"
# the programs run: each sum is numpy's
xs = [Tensor.arange(256).float().contiguous().realize() / 256 + i for i in range(3)]
Tensor.realize(*(ys:=[(x * 2 + 1).exp2().sum() for x in xs]))
got = [y.item() for y in ys]
import numpy as np
want = [float(np.exp2(x.numpy() * 2 + 1).sum()) for x in xs]
assert np.allclose(got, want, rtol=1e-5), (got, want)
print("ok")
"""

def test_0045_program_swap_without_a_walk(trees):
  assert_patch_needed(trees, "0045", PROGRAM_SWAP_WITHOUT_WALK, env={"DEV": "CPU", "CACHELEVEL": "0"})

OPS_OF_A_SLICE_CACHED = TOPOSORT_WALKED + """
# asking whether an op is in a UOp's backward slice does not toposort the graph below it: asking for every node of a chain
# of k nodes walks a number of nodes linear in k (each node's slice was walked whole); the answers are the walk's, a call's
# body included
import random
from tinygrad import Tensor
from tinygrad.uop.ops import UOp, Ops
def walk(k):
  x, chain = UOp.variable("x", 0, 100), []
  for i in range(k): chain.append(x := (x * (i + 2) + 1) % 1000)
  walked[0] = 0
  assert not any(u.op_in_backward_slice_with_self(Ops.INDEX) for u in chain)
  return walked[0]
w100, w400 = walk(100), walk(400)
assert w400 < 6 * w100, f"nodes walked for 100, 400 nodes: {w100}, {w400}"
UOp.toposort = toposort
random.seed(0)
ops = [Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPLT, Ops.WHERE, Ops.INDEX]
for trial in range(20):
  a, b = Tensor.empty(8, 8).uop, Tensor.empty(8, 8).uop
  nodes = [a, b, a.flip(0), b.permute(1, 0)]
  for _ in range(30):
    u, v = random.choice(nodes), random.choice(nodes)
    if u.dtype != v.dtype or u.shape != v.shape: continue
    nodes.append(random.choice([u + v, u * v, u.maximum(v)]))
  body = nodes[-1]
  nodes.append(body.call(a, ret_dtype=body.dtype) if body.op is not Ops.BUFFER else body)
  for u in nodes:
    for op in Ops:
      assert u.op_in_backward_slice_with_self(op) == (op in {x.op for x in u.toposort()}), (u.op, op)
print("ok")
"""

def test_0046_ops_of_a_backward_slice_cached(trees):
  assert_patch_needed(trees, "0046", OPS_OF_A_SLICE_CACHED, env={"DEV": "CPU", "CACHELEVEL": "0"})

ESTIMATES_SHORT = """
# a kernel's estimates over a symbolic range are a short linear form (they go into the kernel's KernelInfo, whose text is
# part of the program's key): their text stays short, and they count what the unreduced sum counts
from tinygrad import Tensor, UOp
from tinygrad.uop.ops import Ops, sym_infer
from tinygrad.engine.realize import lower_and_compile
from tinygrad.renderer import Estimates
n = UOp.variable("n", 1, 256)
x = Tensor.empty(256, 64)[:n.bind(100)]
y = x
for i in range(12): y = (y * (i + 2) + 1).exp2().sin() + y
out = lower_and_compile(y.sum(1).linear_with_vars()[0])
prgs = [u for u in out.toposort() if u.op is Ops.PROGRAM]
for p in prgs:
  est, raw = p.src[0].arg.estimates, Estimates.from_uops(p.src[1].src, ignore_indexing=True)
  for v in (1, 37, 256):
    for a, b in ((est.ops, raw.ops), (est.lds, raw.lds), (est.mem, raw.mem)): assert sym_infer(a, {"n": v}) == sym_infer(b, {"n": v}), (v, a, b)
  assert len(repr(est)) < 10000, f"the estimates' text is {len(repr(est))} characters"
  assert len(repr(p.src[0].arg)) < 20000   # the whole KernelInfo's: name, opts, estimates
print("ok", [len(repr(p.src[0].arg.estimates)) for p in prgs])
"""

def test_0047_kernel_estimates_as_a_short_linear_form(trees):
  assert_patch_needed(trees, "0047", ESTIMATES_SHORT, env={"DEV": "CPU", "CACHELEVEL": "0"})

UPCAST_4_BEFORE_3 = MATVEC_UPCASTS + """
# without local memory, where 3 and 4 both divide the rows: a matvec of 672 rows on the CPU upcasts them by 4 (256 of them,
# as before, by 4 too), and its result equals numpy's
assert (u := matvec_upcasts(672)) == [4], u
assert upcasts(Tensor.empty(256, 512) @ Tensor.empty(512)) == [4]
print("ok")
"""

def test_0048_without_locals_an_upcast_of_4_before_3(trees):
  assert_patch_needed(trees, "0048", UPCAST_4_BEFORE_3, env={"DEV": "CPU", "CACHELEVEL": "0"})

LIBRARY_SEARCH_BY_NAME = """
# a library searched for past a directory of 2,000 other files, then found in the next, is found with a stat of its own file
# only: none of the others' (the search walks the first directory whole)
import os, pathlib, tempfile
from tinygrad.runtime.support.c import DLL
stats, is_file = [0], pathlib.Path.is_file
def counted(self):
  stats[0] += 1
  return is_file(self)
with tempfile.TemporaryDirectory() as o, tempfile.TemporaryDirectory() as w:
  others, d = pathlib.Path(o), pathlib.Path(w)
  for i in range(2000): (others / f"libother{i}.so.1").write_bytes(b"\\x7fELF")
  (d / "libwanted.so.1").write_bytes(b"\\x7fELF")
  os.environ["LD_LIBRARY_PATH"] = f"{others}{os.pathsep}{d}"
  pathlib.Path.is_file = counted
  assert DLL.findlib("wanted", ["wanted"]) == str(d / "libwanted.so.1")
  pathlib.Path.is_file = is_file
assert stats[0] <= 4, stats[0]
"""

def test_0049_library_search_stats_only_matching_files(trees):
  assert_patch_needed(trees, "0049", LIBRARY_SEARCH_BY_NAME)

CUDA_COMPILER_LIBRARIES_LAZY = """
# a CUDA or PTX renderer (which a CUDA device constructs when it opens) loads neither nvrtc nor nvJitLink; its compiler's cache
# key, which finds programs in the disk cache, is the same
import sys
from tinygrad.helpers import Target
from tinygrad.renderer.cstyle import CUDARenderer
from tinygrad.renderer.ptx import PTXRenderer
r, p = CUDARenderer(Target(device="CUDA", arch="sm_90")), PTXRenderer(Target(device="NV", arch="sm_90"))
assert (r.compiler.cachekey, p.compiler.cachekey) == ("compile_cuda_sm_90", "compile_nv_ptx_sm_90")
assert not [m for m in sys.modules if m.endswith((".nvrtc", ".nvjitlink"))], [m for m in sys.modules if "nv" in m]
"""

def test_0050_cuda_compiler_libraries_loaded_at_first_compile(trees):
  assert_patch_needed(trees, "0050", CUDA_COMPILER_LIBRARIES_LAZY)

PICKLED_PROGRAM_KEY = """
# a program pickled in one process and loaded in another has the first's key, and getting it computes no key below it (the
# key of a node is a sha256 over its whole subtree)
import pickle, subprocess, sys
from tinygrad import Tensor, Device
from tinygrad.codegen import to_program
prg = to_program((Tensor.empty(8, 8) + 1).contiguous().schedule_linear().src[-1].src[0], Device["CPU"].renderer)
load = '''
import pickle, sys
prg = pickle.loads(sys.stdin.buffer.read())
key = prg.key
assert not any("_RECURSIVE_PROPERTY_key" in s.__dict__ for s in prg.src), "a key was computed below the program"
sys.stdout.write(key.hex())
'''
r = subprocess.run([sys.executable, "-c", load], input=pickle.dumps(prg), capture_output=True)
assert r.returncode == 0 and r.stdout.decode() == prg.key.hex(), (r.stdout, r.stderr.decode()[-400:])
"""

def test_0051_pickled_program_keeps_its_key(trees):
  assert_patch_needed(trees, "0051", PICKLED_PROGRAM_KEY)

PICKLED_GRAPH_DEVICE = """
# a pickled graph of calls, loaded in another process: its device (which kernels it runs, which device's graph runs it) is the
# one UOp.device gives, found without a device computed for the nodes of its programs
import pickle, subprocess, sys
from tinygrad import Tensor, TinyJit
@TinyJit
def f(x): return ((x + 1).contiguous() * 2).sum()
for _ in range(3): f(Tensor.ones(16, 16).contiguous().realize())
load = '''
import pickle, sys
from tinygrad.uop.ops import Ops
from tinygrad.engine.realize import get_call_kernels
cj = pickle.loads(sys.stdin.buffer.read())
graphs = [c for c in cj.linear.src if c.src[0].op is Ops.CUSTOM_FUNCTION and c.src[0].arg == "graph"]
assert graphs, [c.src[0].op for c in cj.linear.src]
devs = [get_call_kernels(c)[0][0] for c in graphs]
walked = sum("_RECURSIVE_PROPERTY_device" in u.__dict__ for c in graphs for u in c.src[0].toposort())
nodes = sum(1 for c in graphs for u in c.src[0].toposort())
assert walked < nodes // 10, (walked, nodes)
assert devs == [c.src[0].device if isinstance(c.src[0].device, str) else c.src[0].device[0] for c in graphs] == ["CPU"], devs
'''
r = subprocess.run([sys.executable, "-c", load], input=pickle.dumps(f.captured), capture_output=True)
assert r.returncode == 0, r.stderr.decode()[-600:]
"""

def test_0052_graph_device_without_a_walk(trees):
  assert_patch_needed(trees, "0052", PICKLED_GRAPH_DEVICE, env={"DEV": "CPU"})

LANES_ALONG_THE_LAST_LOCAL = """
# a kernel's lanes go along its last local dim, the innermost in memory: threadIdx.x (the SPECIAL lidx0) takes it, so a warp
# stores one run of each row; a tensor-core kernel keeps its warp's lanes on lidx0 as it lays them out. Lowered for sm_90
# without a GPU; both run on the sm_80 emulator against numpy
import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops, KernelInfo
from tinygrad.codegen import full_rewrite_to_sink
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.renderer.cstyle import NVCCRenderer
from tinygrad.helpers import Target
ren = NVCCRenderer(Target(device="CUDA", arch="sm_90"))
def lanes(t, opts=None):
  ast = t.linear_with_vars()[0].src[-1].src[0]
  if opts is not None: ast = ast.replace(arg=KernelInfo(opts_to_apply=opts))
  return {u.arg: int(u.src[0].vmax) for u in full_rewrite_to_sink(ast, ren).toposort() if u.op is Ops.SPECIAL and u.arg.startswith("lidx")}
x, y = Tensor.empty(64, 128), Tensor.empty(64, 1)
l = lanes(x + y, (Opt(OptOps.LOCAL, 0, 8), Opt(OptOps.LOCAL, 1, 16)))   # as the heuristics apply them: outer first
assert l == {"lidx0": 16, "lidx1": 8}, l
mm = lanes((Tensor.empty(64, 64, dtype=dtypes.half) @ Tensor.empty(64, 64, dtype=dtypes.half)).float())
assert mm["lidx0"] % 32 == 0 or mm["lidx0"] * mm.get("lidx1", 1) % 32 == 0, mm
rng = np.random.default_rng(0)
xn, yn = rng.standard_normal((64, 128)).astype(np.float32), rng.standard_normal((64, 1)).astype(np.float32)
np.testing.assert_allclose((Tensor(xn) + Tensor(yn)).numpy(), xn + yn)
an, bn = rng.standard_normal((64, 64)).astype(np.float16), rng.standard_normal((64, 64)).astype(np.float16)
got = (Tensor(an) @ Tensor(bn)).float().numpy()
assert np.abs(got - an.astype(np.float64) @ bn.astype(np.float64)).max() < 1e-1, "wrong tensor-core result"
print("ok")
"""

def test_0053_lanes_along_the_last_local_dim(trees):
  assert_patch_needed(trees, "0053", LANES_ALONG_THE_LAST_LOCAL, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

GROUPED_OUTPUTS_SIDE_BY_SIDE = HEURISTIC_OPTS + """
# a grouped reduction of many outputs puts a few of them side by side in its workgroup: a rank of 3072 entries among
# themselves (3072 outputs, each a count over 3072) and the row sums of 512 x 64 take a LOCAL beside their GROUPTOP of 16 for
# sm_90, 128 and 32 threads a workgroup, while 2048 outputs keep 256 workgroups; few outputs (64 row sums) keep a workgroup
# of one group. On the sm_80 emulator the row sums equal numpy's
import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.codegen.opt import OptOps
def opts(t): return [(o.op, o.arg) for o in heuristic_opts(t, SM90)]
e = Tensor.empty(3072, dtype=dtypes.int32)
p = Tensor.arange(3072)
rank = ((e.unsqueeze(0) == e.unsqueeze(1)) & (p.unsqueeze(0) < p.unsqueeze(1))).sum(1)
got = opts(rank), opts(Tensor.empty(512, 64).sum(1)), opts(Tensor.empty(64, 64).sum(1))
assert got == ([(OptOps.GROUPTOP, 16), (OptOps.LOCAL, 8)], [(OptOps.GROUPTOP, 16), (OptOps.LOCAL, 2)], [(OptOps.GROUPTOP, 16)]), got
xn = np.random.default_rng(0).standard_normal((512, 64)).astype(np.float32)
np.testing.assert_allclose(Tensor(xn).sum(1).numpy(), xn.sum(1), rtol=1e-5, atol=1e-5)
print("ok")
"""

def test_0054_grouped_outputs_side_by_side(trees):
  assert_patch_needed(trees, "0054", GROUPED_OUTPUTS_SIDE_BY_SIDE, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

MERGED_THREAD_DIM_WARP = RUN_WITH_OPTS + """
# a tensor-core kernel with more local dims than a GPU has thread dims (its warp of 32, then locals of 2, 2 and 2: four)
# merges the warp with the local after it into threadIdx.x (64); the warp's 32 lanes must stay hardware lanes 0-31 of each
# warp, or the mma multiplies the wrong fragments. Half tiles 4 x 32 x 64 times 4 x 64 x 256 under those opts on the sm_80
# emulator (which runs the mma per hardware warp) against numpy
from tinygrad.codegen.opt import Opt, OptOps
opts = (Opt(OptOps.TC, 0, (-1, 0, 1)), Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.LOCAL, 1, 4),
        Opt(OptOps.UPCAST, 3, 2), Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.LOCAL, 1, 2))
assert (err := tiles_error(opts)) < 1e-2, err
print("ok")
"""

def test_0055_merged_thread_dim_keeps_the_warp(trees):
  assert_patch_needed(trees, "0055", MERGED_THREAD_DIM_WARP, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

TILES_TAKE_MORE_OF_N = HEURISTIC_OPTS + RUN_WITH_OPTS + """
# a tensor-core kernel whose M is whole in each warp (tiles of 32 rows, one product a tile, as a gather-then-reduce makes
# them) takes 2 more of N as an upcast and a workgroup of 2 tiles and 4 warps of N, where 256 workgroups remain (opts for
# sm_90); a matmul of 512 rows keeps the heuristics' opts before. A smaller product of tiles under those opts runs on the
# sm_80 emulator against numpy
from tinygrad import Tensor, dtypes
from tinygrad.codegen.opt import Opt, OptOps
opts = lambda t: heuristic_opts(t, SM90)
h = lambda *s: Tensor.empty(*s, dtype=dtypes.half)
tiles, plain = opts((h(160, 32, 256) @ h(160, 256, 2816)).float()), opts((h(512, 256) @ h(256, 2816)).float())
assert tiles[0].op is OptOps.TC and tiles[-3:] == [Opt(OptOps.UPCAST, 3, 2), Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.LOCAL, 1, 2)], tiles
assert plain[0].op is OptOps.TC and [o.op for o in plain[1:]] == [OptOps.UPCAST, OptOps.UPCAST, OptOps.LOCAL], plain
assert (err := tiles_error(tiles)) < 1e-2, err
print("ok")
"""

def test_0056_tiles_take_more_of_n(trees):
  assert_patch_needed(trees, "0056", TILES_TAKE_MORE_OF_N, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

NARROW_STORES_UPCAST = HEURISTIC_OPTS + RUN_WITH_OPTS + """
# an elementwise kernel whose threads store under 16 bytes each takes an UPCAST of 2 on its outermost global axis after its
# locals, where 2^18 threads remain (opts for sm_90): 4-bit fields of 2^20 bytes unpacked to int8 (8 bytes a thread) and
# fp32 values cast to fp16 (4 a thread, 8 bytes) take it; 2^14 bytes (too few threads) and fp32 outputs (16 bytes a thread)
# do not. An unpacking of 4096 bytes with that upcast after its locals (the halves and 4 bytes upcast, as a packed
# weight's unpacking takes them) runs on the sm_80 emulator against numpy
import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.codegen.opt import Opt, OptOps
opts = lambda t: heuristic_opts(t, SM90)
unpack = lambda b: Tensor.cat(b & 15, b >> 4, dim=-1).cast(dtypes.int8) - 8
big, small = opts(unpack(Tensor.empty(2**16, 16, dtype=dtypes.uint8))), opts(unpack(Tensor.empty(2**10, 16, dtype=dtypes.uint8)))
f16, f32 = opts((Tensor.empty(2**20, 16) * 2).cast(dtypes.half)), opts(Tensor.empty(2**20, 16) * 2)
assert big[-1] == Opt(OptOps.UPCAST, 0, 2) and big[:-1] == small, (big, small)
assert f16[-1] == Opt(OptOps.UPCAST, 0, 2) and f16[:-1] == f32, (f16, f32)
b = np.random.default_rng(0).integers(0, 256, (256, 16), dtype=np.uint8)
want = np.concatenate([b & 15, b >> 4], axis=-1).astype(np.int8) - 8
forced = [Opt(OptOps.UPCAST, 1, 0), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.LOCAL, 0, 16), Opt(OptOps.LOCAL, 1, 4), Opt(OptOps.UPCAST, 0, 2)]
np.testing.assert_equal(run_with_opts(unpack(Tensor(b)), forced), want)
print("ok")
"""

def test_0057_narrow_stores_upcast(trees):
  assert_patch_needed(trees, "0057", NARROW_STORES_UPCAST, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

THREAD_PARTS_SIDE_BY_SIDE = """
# a CPU kernel split by THREAD into two parts runs them on two threads: each part stores the thread pointer it ran on
# (x86-64: the TCB's first word, its own address; arm64: tpidr_el0), and the two differ; a matmul the heuristics split into
# parts equals numpy's
import platform
import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import UOp, Ops, KernelInfo
from tinygrad.codegen.opt import Opt, OptOps
asm = 'mov %%fs:0, %0' if platform.machine() == "x86_64" else 'mrs %0, tpidr_el0'
TP = '({{ unsigned long t; __asm__ volatile("' + asm + '" : "=r"(t)); t; }})'
def kernel(out):
  i = UOp.range(2, 0)
  return out[i].store(UOp(Ops.CUSTOMI, dtypes.uint64, arg=TP)).end(i).sink(
    arg=KernelInfo(name="thread_pointer", opts_to_apply=(Opt(OptOps.THREAD, 0, 2),)))
tp = Tensor.empty(2, dtype=dtypes.uint64).custom_kernel(fxn=kernel)[0].numpy()
assert tp[0] != 0 and tp[1] != 0 and tp[0] != tp[1], tp
a, b = (np.random.default_rng(i).standard_normal((256, 256)).astype(np.float32) for i in (0, 1))
np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)
print("ok")
"""

def test_0058_thread_parts_side_by_side(trees):
  if platform.machine() not in ("x86_64", "aarch64", "arm64"): pytest.skip("the thread pointer is read by x86-64 or arm64 assembly")
  assert_patch_needed(trees, "0058", THREAD_PARTS_SIDE_BY_SIDE, env={"DEV": "CPU", "CACHELEVEL": "0", "NUM_CPU_THREADS": "2"})

REDUCTION_LANES_APART = """
# without local memory a reduction unrolled over a loop in a chain of 32 terms a step keeps lanes apart: a CPU kernel of
# 4 outputs a thread, its reduce's axes of 8 and 4 unrolled over a loop of 64 (a quantized product's block and its scale),
# has 16 accumulators in its program (4 lanes of each output), not 4; under the heuristics' opts it equals numpy's
import numpy as np
from tinygrad import Tensor, Device
from tinygrad.codegen import to_program
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.uop.ops import Ops, KernelInfo
def product(x, w, s): return (x.transpose(-1, -2) * w * s).sum((-1, -2, -3))
ast = product(Tensor.empty(1, 64, 4, 8), Tensor.empty(4096, 64, 8, 4), Tensor.empty(4096, 64, 1, 1)).linear_with_vars()[0].src[-1].src[0]
ast = ast.replace(arg=KernelInfo(name="forced", opts_to_apply=(Opt(OptOps.UNROLL, 2, 0), Opt(OptOps.UNROLL, 1, 0), Opt(OptOps.UPCAST, 0, 4))))
src = next(u.arg for u in to_program(ast, Device["CPU"].renderer).src if u.op is Ops.SOURCE)
assert "float buf0[16];" in src, src
rng = np.random.default_rng(0)
x, w, s = (rng.standard_normal(sh).astype(np.float32) for sh in ((1, 64, 4, 8), (4096, 64, 8, 4), (4096, 64, 1, 1)))
want = (x.transpose(0, 1, 3, 2) * w * s).sum((-1, -2, -3))
np.testing.assert_allclose(product(Tensor(x), Tensor(w), Tensor(s)).numpy(), want, rtol=1e-4, atol=1e-3)
print("ok")
"""

def test_0059_reduction_lanes_apart(trees):
  assert_patch_needed(trees, "0059", REDUCTION_LANES_APART, env={"DEV": "CPU", "CACHELEVEL": "0"})

WHOLE_BLOCK_FOUR_OUTPUTS = """
# without local memory a product of packed 4-bit weights (a word's 2 x 4 nibbles, a scale a block) whose block of 4 words
# unrolls whole keeps 4 outputs (8 without the patch), while one whose block of 8 words unrolls in part (a word's nibbles
# unrolled, its words a loop) still takes 8; both equal numpy's
import numpy as np
from tinygrad import Tensor, Device, dtypes
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler
rng = np.random.default_rng(0)
shifts = np.arange(2, dtype=np.uint32)[:, None] * 4 + np.arange(4, dtype=np.uint32)[None, :] * 8   # nibble h of byte b
for words, unrolled, outputs in ((4, [2, 4, 4], 4), (8, [2, 4], 8)):
  N, B = 2048, 2048 // (words * 8)
  wn = rng.integers(0, 2**32, (N, B, words), dtype=np.uint32)
  xn = rng.standard_normal((B, words, 2, 4)).astype(np.float32)
  sn = rng.standard_normal((N, B, 1, 1, 1)).astype(np.float32)
  w, x, sc = Tensor(wn).realize(), Tensor(xn).realize(), Tensor(sn).realize()
  def product(): return (((w.reshape(N, B, words, 1, 1) >> Tensor(shifts)) & 15).float() * x * sc).sum((1, 2, 3, 4))
  k = Scheduler(product().linear_with_vars()[0].src[-1].src[0], Device["CPU"].renderer)
  k.convert_loop_to_global()
  opt = hand_coded_optimizations(k)
  assert sorted(s for s, t in zip(opt.full_shape, opt.axis_types) if t.name == "UNROLL") == unrolled, opt.applied_opts
  assert np.prod([s for s, t in zip(opt.full_shape, opt.axis_types) if t.name == "UPCAST"]) == outputs, (words, opt.applied_opts)
  ref = (((wn[..., None, None] >> shifts) & 15).astype(np.float64) * xn * sn).reshape(N, -1).sum(-1)
  got = product().numpy()
  assert np.abs(got - ref).max() < 1e-5 * np.abs(ref).max(), np.abs(got - ref).max()
print("ok")
"""

def test_0060_whole_block_four_outputs(trees):
  assert_patch_needed(trees, "0060", WHOLE_BLOCK_FOUR_OUTPUTS, env={"DEV": "CPU", "CACHELEVEL": "0"})

STRIDED_CUSTOM_KERNEL_SOURCE = """
# a lazy y (elementwise or a reduce) read by one custom kernel whole and by another as the slice y[:, :6]: the slice's
# kernel, which reads its source as a contiguous (3, 6) buffer, gets its rows (without the patch: y's buffer, rows 1-2 wrong)
import numpy as np
from tinygrad import Tensor
from tinygrad.uop.ops import UOp, KernelInfo
B, N, Q = 3, 10, 6
def copy(W):
  def fxn(out, src):
    b, n = UOp.range(B, 0), UOp.range(W, 1)
    return out[b, n].store(src[b, n]).end(b, n).sink(arg=KernelInfo(name=f"copy_{W}"))
  return fxn
a = np.arange(B * N, dtype=np.float32).reshape(B, N)
for y, want in ((Tensor(a) + 1, a + 1), (Tensor(np.stack([a, a])).sum(0), 2 * a)):
  part = Tensor.empty(B, Q).custom_kernel(y[:, :Q], fxn=copy(Q))[0]
  whole = Tensor.empty(B, N).custom_kernel(y, fxn=copy(N))[0]
  Tensor.realize(part, whole)
  np.testing.assert_equal(whole.numpy(), want)
  np.testing.assert_equal(part.numpy(), want[:, :Q])
print("ok")
"""

def test_0061_strided_custom_kernel_source(trees):
  assert_patch_needed(trees, "0061", STRIDED_CUSTOM_KERNEL_SOURCE, env={"DEV": "CPU"})

NATIVE_PARTS = """
# a CPU kernel's two THREAD parts run on two threads, neither of them a Python thread besides the caller (native workers, not
# Python threads handed work through queues): each part stores its thread pointer (two distinct threads), the process has
# one Python thread after 20 two-part kernels replayed in a TinyJit, and their outputs are right. The time a kernel is
# printed, not asserted (a timing depends on the machine)
import platform, threading, time
import numpy as np
from tinygrad import Tensor, TinyJit, dtypes
from tinygrad.uop.ops import UOp, Ops, KernelInfo
from tinygrad.codegen.opt import Opt, OptOps
asm = 'mov %%fs:0, %0' if platform.machine() == "x86_64" else 'mrs %0, tpidr_el0'
TP = '({{ unsigned long t; __asm__ volatile("' + asm + '" : "=r"(t)); t; }})'
def kernel(k):
  def fxn(out, tp, x):
    i = UOp.range(2, 0)
    return UOp.group(out[i].store(x[i] * 2 + k), tp[i].store(UOp(Ops.CUSTOMI, dtypes.uint64, arg=TP))).end(i).sink(
      arg=KernelInfo(name=f"parts_{k}", opts_to_apply=(Opt(OptOps.THREAD, 0, 2),)))
  return fxn
def call(x, k):
  out, tp, _ = Tensor.custom_kernel(Tensor.empty(2), Tensor.empty(2, dtype=dtypes.uint64), x, fxn=kernel(k))
  return out.realize(tp)
x = Tensor([1.0, 2.0]).realize()
step = TinyJit(lambda x: [call(x, k) for k in range(20)])
for _ in range(3): outs = step(x)
assert all((o.numpy() == [2 + k, 4 + k]).all() for k, o in enumerate(outs)), [o.numpy() for o in outs]
tp = Tensor.custom_kernel(Tensor.empty(2), Tensor.empty(2, dtype=dtypes.uint64), x, fxn=kernel(0))[1].numpy()
assert tp[0] != 0 and tp[1] != 0 and tp[0] != tp[1], tp
assert threading.active_count() == 1, [t.name for t in threading.enumerate()]
best = min(((t := time.perf_counter()), [step(x) for _ in range(50)], time.perf_counter() - t)[2] for _ in range(5)) / 50 / 20
print(f"ok {best * 1e6:.1f} us a kernel")
"""

def test_0062_native_parts(trees):
  if platform.machine() not in ("x86_64", "aarch64", "arm64"): pytest.skip("the thread pointer is read by x86-64 or arm64 assembly")
  assert_patch_needed(trees, "0062", NATIVE_PARTS, env={"DEV": "CPU", "CACHELEVEL": "0", "NUM_CPU_THREADS": "2"})

STAGED_OPERAND = RUN_WITH_OPTS + """
# a grouped reduction whose lanes read an operand a stride apart, shared by the workgroup's row groups, reads it from local
# memory: a matvec over 4-bit weights under the opts of a matvec (a lane a block of 32 of x, 4 row groups a workgroup) holds,
# for sm_90, a local buffer of x's 6,144 floats and 4 of padding every 32 (6,912) beside its group's partial sums, and so does
# a product of a batch of matrices by a batch of x (the batch a global range: a workgroup reads one x, at its base); a
# reduction of one row group a workgroup (a row's sum of squares under the heuristics) holds none. On the sm_80 emulator the
# products equal numpy's under those opts, with as many threads as words to copy, twice as many (half copy nothing) and 48,
# and with a reduce range padded past x's end (a batch of rows of 44 blocks, PADTO 48 for a group of 16: the last batch's copy
# stops at the buffer's end; the emulator stops at a load past it)
import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.codegen import full_rewrite_to_sink
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.dtype import AddrSpace
from tinygrad.helpers import Target
from tinygrad.renderer.cstyle import NVCCRenderer
from tinygrad.uop.ops import Ops, KernelInfo
def q4_matvec(qs, d, x):
  nib = (qs.unsqueeze(-1) >> Tensor([0, 4, 8, 12, 16, 20, 24, 28], dtype=dtypes.uint32, device=qs.device)) & 15
  w = (nib.cast(dtypes.float32) - 8) * d.cast(dtypes.float32).reshape(*d.shape, 1, 1)
  return (w * x.reshape(*x.shape[:-2], 1, -1, 4, 8)).sum((-3, -2, -1))
def mv_opts(group, local, axis=0): return [Opt(OptOps.UNROLL, 2, 0), Opt(OptOps.UNROLL, 1, 0), Opt(OptOps.GROUP, 0, group),
                                           Opt(OptOps.UPCAST, axis, 2), Opt(OptOps.LOCAL, axis, local)]
def local_sizes(t, opts=None):
  ast = t.linear_with_vars()[0].src[-1].src[0]
  if opts is not None: ast = ast.replace(arg=KernelInfo(name="forced", opts_to_apply=tuple(opts)))
  sink = full_rewrite_to_sink(ast, NVCCRenderer(Target(device="CUDA", arch="sm_90")))
  return sorted(u.max_numel() for u in sink.toposort() if u.op is Ops.BUFFER and u.arg.addrspace is AddrSpace.LOCAL)
mv = q4_matvec(Tensor.empty(2048, 192, 4, dtype=dtypes.uint32), Tensor.empty(2048, 192, dtype=dtypes.half), Tensor.empty(192, 32))
assert (got:=local_sizes(mv, mv_opts(32, 4))) == [256, 6912], got
bmv = q4_matvec(Tensor.empty(4, 2048, 192, 4, dtype=dtypes.uint32), Tensor.empty(4, 2048, 192, dtype=dtypes.half), Tensor.empty(4, 192, 32))
assert (got:=local_sizes(bmv, mv_opts(32, 4, axis=1))) == [256, 6912], got
assert len(got:=local_sizes(Tensor.empty(64, 2048).square().sum(1))) == 1, got
rng = np.random.default_rng(0)
for batch, rows, blocks, group, local in ((), 16, 64, 32, 4), ((), 32, 32, 32, 16), ((), 12, 48, 16, 3), ((3,), 8, 32, 32, 4):
  qs, d = rng.integers(0, 2**32, (*batch, rows, blocks, 4), dtype=np.uint32), rng.standard_normal((*batch, rows, blocks)).astype(np.float16)
  x = rng.standard_normal((*batch, blocks, 32)).astype(np.float32)
  w = ((qs[..., None] >> (np.arange(8, dtype=np.uint32) * 4)) & 15).astype(np.float32) - 8
  ref = ((w * d.astype(np.float32)[..., None, None]).reshape(*batch, rows, blocks, 32) * x[..., None, :, :]).sum((-2, -1))
  got = run_with_opts(q4_matvec(Tensor(qs), Tensor(d), Tensor(x)), mv_opts(group, local, axis=len(batch)))
  np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
qs, d = rng.integers(0, 2**32, (3, 8, 44, 4), dtype=np.uint32), rng.standard_normal((3, 8, 44)).astype(np.float16)
x = rng.standard_normal((3, 44, 32)).astype(np.float32)
w = ((qs[..., None] >> (np.arange(8, dtype=np.uint32) * 4)) & 15).astype(np.float32) - 8
ref = ((w * d.astype(np.float32)[..., None, None]).reshape(3, 8, 44, 32) * x[:, None]).sum((-2, -1))
padded = [Opt(OptOps.UNROLL, 2, 0), Opt(OptOps.UNROLL, 1, 0), Opt(OptOps.PADTO, 2, 16), Opt(OptOps.GROUP, 0, 16),
          Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.LOCAL, 1, 4)]
np.testing.assert_allclose(run_with_opts(q4_matvec(Tensor(qs), Tensor(d), Tensor(x)), padded), ref, rtol=1e-4, atol=1e-4)
print("ok")
"""

def test_0063_grouped_reduction_stages_a_shared_operand(trees):
  assert_patch_needed(trees, "0063", STAGED_OPERAND, env={"DEV": "PYTHON::sm_80", "CACHELEVEL": "0"})

MATMUL_TILE_EIGHT_BY_EIGHT = """
# without local memory a matmul of packed 4-bit weights (a word's 8 nibbles, a scale a block of 4 words) and 32 tokens of
# fp32 activations keeps 8 tokens x 8 rows a thread (64 outputs; 16 without the patch), while a product of one token keeps
# the few rows it had (at most 8); both equal numpy's
import numpy as np
from tinygrad import Tensor, Device
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler
rng = np.random.default_rng(0)
shifts = np.arange(8, dtype=np.uint32) * 4
def outputs(t):
  k = Scheduler(t.linear_with_vars()[0].src[-1].src[0], Device["CPU"].renderer)
  k.convert_loop_to_global()
  opt = hand_coded_optimizations(k)
  return int(np.prod([s for s, a in zip(opt.full_shape, opt.axis_types) if a.name == "UPCAST"]))
N, B = 256, 16
wn = rng.integers(0, 2**32, (N, B, 4), dtype=np.uint32)
sn = rng.standard_normal((N, B, 1, 1)).astype(np.float32)
w, sc = Tensor(wn).realize(), Tensor(sn).realize()
for T, most in ((32, 64), (1, 8)):
  xn = rng.standard_normal((T, 1, B, 4, 8)).astype(np.float32)
  x = Tensor(xn).realize()
  def product(): return ((((w.reshape(N, B, 4, 1) >> Tensor(shifts)) & 15).float() - 8) * sc * x).sum((2, 3, 4))
  got = outputs(product())
  assert (got == most) if T > 1 else (got <= most), (T, got)
  ref = (((((wn[..., None] >> shifts) & 15).astype(np.float64) - 8) * sn)[None] * xn).sum((2, 3, 4))
  np.testing.assert_allclose(product().numpy(), ref, rtol=1e-4, atol=1e-3)
print("ok")
"""

def test_0064_matmul_tile_eight_by_eight(trees):
  assert_patch_needed(trees, "0064", MATMUL_TILE_EIGHT_BY_EIGHT, env={"DEV": "CPU", "CACHELEVEL": "0"})

PLAIN_MATVEC_ROWS = """
# without local memory a matvec of plain loads (a router: 64 rows of 2048 fp32 weights, or fp16 ones) takes 16 rows a thread
# and a thread a 256 KB of its weights (2 here; 4 rows and one thread without the patch), a sum over 6 rows (an MoE mix) is
# not taken for one, and all equal numpy's
import numpy as np
from tinygrad import Tensor, Device
from tinygrad.codegen.opt import OptOps
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler
def opts(t):
  k = Scheduler(t.linear_with_vars()[0].src[-1].src[0], Device["CPU"].renderer)
  k.convert_loop_to_global()
  got = hand_coded_optimizations(k).applied_opts
  return [o.arg for o in got if o.op is OptOps.UPCAST], [o.arg for o in got if o.op is OptOps.THREAD]
rng = np.random.default_rng(0)
for dt in (np.float32, np.float16):
  wn, xn = rng.standard_normal((64, 2048)).astype(dt), rng.standard_normal(2048).astype(np.float32)
  w, x = Tensor(wn).realize(), Tensor(xn).realize()
  assert (got:=opts((w.float() * x).sum(1))) == ([16], [2]), (dt, got)
  np.testing.assert_allclose((w.float() * x).sum(1).numpy(), wn.astype(np.float64) @ xn, rtol=1e-4, atol=1e-3)
mn, cn = rng.standard_normal((6, 2048)).astype(np.float32), rng.standard_normal((6, 1)).astype(np.float32)
m, c = Tensor(mn).realize(), Tensor(cn).realize()
assert 16 not in (got:=opts((m * c).sum(0)))[0], got
np.testing.assert_allclose((m * c).sum(0).numpy(), (mn.astype(np.float64) * cn).sum(0), rtol=1e-4, atol=1e-4)
print("ok")
"""

def test_0065_plain_matvec_rows(trees):
  assert_patch_needed(trees, "0065", PLAIN_MATVEC_ROWS, env={"DEV": "CPU", "CACHELEVEL": "0"})

ONE_ITERATION_REDUCE = """
# a reduction over a range of one iteration inside a custom kernel (a chunked product of one chunk: each chunk's sum of 4
# times its scale, summed over the chunks; and the max of the chunks' maxima) equals numpy's for 1 and 3 chunks
import numpy as np
from tinygrad import Tensor
from tinygrad.uop.ops import UOp, Ops, AxisType, KernelInfo
def chunked(n_chunks, op):
  def k(out, x, s):
    n, R, i = UOp.range(3, 0), UOp.range(n_chunks, 1, AxisType.REDUCE), UOp.range(4, 2, AxisType.REDUCE)
    acc = (x[n, R * 4 + i].reduce(i, arg=op) * s[n, R]).reduce(R, arg=op)
    return out[n].store(acc).end(n).sink(arg=KernelInfo(name=f"chunked_{n_chunks}_{op.name}"))
  return k
rng = np.random.default_rng(0)
for n_chunks in (1, 3):
  xn, sn = rng.standard_normal((3, 4 * n_chunks)).astype(np.float32), rng.uniform(1, 2, (3, n_chunks)).astype(np.float32)
  for op, ref in ((Ops.ADD, (xn.reshape(3, n_chunks, 4).sum(2) * sn).sum(1)), (Ops.MAX, (xn.reshape(3, n_chunks, 4).max(2) * sn).max(1))):
    out = Tensor.empty(3).custom_kernel(Tensor(xn), Tensor(sn), fxn=chunked(n_chunks, op))[0].numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
print("ok")
"""

def test_0066_one_iteration_reduce(trees):
  assert_patch_needed(trees, "0066", ONE_ITERATION_REDUCE, env={"DEV": "CPU", "CACHELEVEL": "0"})

WIDE_GROUP_COALESCED = SM90_OPTS + """
# grouped reductions read contiguously (rms norms' sums of squares over rows of 2048 and 768, 4 rows' sums, 16 heads' dots
# with a symbolic number of cached rows of 576): the group's lanes adjacent in memory with 4 elements a lane a load
# (UNROLL 4, GROUP), not a run of elements a lane (GROUPTOP); a reduction read with a stride (sums down 4 columns) keeps
# GROUPTOP
import numpy as np
from tinygrad import Tensor, Variable
x = Tensor.empty(2048, device="NULL")
rows = Tensor.empty(4, 2048, device="NULL")
q, keys, T = Tensor.empty(16, 576, device="NULL"), Tensor.empty(512, 576, device="NULL"), Variable("T", 1, 512).bind(33)
for out, group in ((x.square().sum(), 256), (Tensor.empty(768, device="NULL").square().sum(), 64), (rows.sum(1), 256),
                   ((q @ keys[:T].T).contiguous(), 16)):
  opts = [(o.op, o.arg) for o in sm90_opts(out)]
  assert opts[:2] == [(OptOps.UNROLL, 4), (OptOps.GROUP, group)], opts
opts = [(o.op, o.arg) for o in sm90_opts(Tensor.empty(2048, 4, device="NULL").sum(0))]
assert opts[0][0] is OptOps.GROUPTOP, opts
# the grouped sums on a GPU-style device (PYTHON runs kernels with locals) against numpy
rng = np.random.default_rng(0)
wd, xd = rng.standard_normal((4, 2048)).astype(np.float32), rng.standard_normal(2048).astype(np.float32)
np.testing.assert_allclose(Tensor(wd, device="PYTHON").sum(1).numpy(), wd.astype(np.float64).sum(1), rtol=1e-4, atol=1e-4)
np.testing.assert_allclose(Tensor(xd, device="PYTHON").square().sum().item(), (xd.astype(np.float64) ** 2).sum(), rtol=1e-5)
# the dots of 33 rows (a symbolic count), each weighting a row of v, against numpy
qd, kd, vd = (rng.standard_normal(s).astype(np.float32) for s in ((16, 576), (40, 576), (40, 8)))
T = Variable("T", 1, 40).bind(33)
got = ((Tensor(qd, device="PYTHON") @ Tensor(kd, device="PYTHON")[:T].T).contiguous() @ Tensor(vd, device="PYTHON")[:T]).numpy()
np.testing.assert_allclose(got, qd.astype(np.float64) @ kd[:33].T.astype(np.float64) @ vd[:33], rtol=1e-4, atol=1e-3)
print("ok")
"""

def test_0067_wide_group_reads_coalesced(trees):
  assert_patch_needed(trees, "0067", WIDE_GROUP_COALESCED)

MATVEC_BLOCK_A_THREAD = SM90_OPTS + """
# a matvec of rows of a few 32-weight blocks, each block's nibbles read as (4 words, 2 halves, 4 bytes) so the blocks are the
# longest reduce range (an attention head's absorbed product of 192 weights: 6 blocks) takes a thread a block: a group of 2
# walked 3 blocks a thread in series, and rows of 5 or 7 blocks got no group at all
import numpy as np
from tinygrad import Tensor, dtypes
SHIFTS = [[0, 8, 16, 24], [4, 12, 20, 28]]   # (half, byte): weight 16 h + 4 w + b of a block is word w's nibble at 8 b + 4 h

def q4_matvec(qs:Tensor, d:Tensor, x:Tensor) -> Tensor:
  rows, blocks = d.shape
  nib = (qs.reshape(rows, blocks, 4, 1, 1) >> Tensor(SHIFTS, dtype=dtypes.uint32, device=qs.device).reshape(1, 1, 1, 2, 4)) & 15
  w = (nib.cast(dtypes.float32) - 8) * d.cast(dtypes.float32).reshape(rows, blocks, 1, 1, 1)
  return (w * x.reshape(blocks, 2, 4, 4).permute(0, 2, 1, 3).reshape(1, blocks, 4, 2, 4)).sum((1, 2, 3, 4))

for blocks in (4, 5, 6, 7):
  opts = sm90_opts(q4_matvec(Tensor.empty(10240, blocks, 4, dtype=dtypes.uint32, device="NULL"),
                             Tensor.empty(10240, blocks, dtype=dtypes.half, device="NULL"), Tensor.empty(blocks, 32, device="NULL")))
  assert [o.arg for o in opts if o.op is OptOps.GROUP] == [blocks], (blocks, opts)
rng = np.random.default_rng(0)   # the kernels those opts make compute the product (DEV=PYTHON: GPU-style kernels with locals)
for blocks in (6, 5):
  qs, d = rng.integers(0, 2**32, (64, blocks, 4), dtype=np.uint32), rng.standard_normal((64, blocks)).astype(np.float16)
  x = rng.standard_normal((blocks, 32)).astype(np.float32)
  nib = ((qs[..., None, None] >> np.array(SHIFTS, dtype=np.uint32)) & 15).astype(np.float32) - 8   # (rows, blocks, w, h, b)
  w = (nib * d.astype(np.float32)[..., None, None, None]).transpose(0, 1, 3, 2, 4).reshape(64, blocks, 32)
  got = q4_matvec(Tensor(qs, device="PYTHON"), Tensor(d, device="PYTHON"), Tensor(x, device="PYTHON")).numpy()
  np.testing.assert_allclose(got, (w * x).sum((1, 2)), rtol=1e-4, atol=1e-4)
print("ok")
"""

def test_0068_matvec_row_of_a_few_blocks(trees):
  assert_patch_needed(trees, "0068", MATVEC_BLOCK_A_THREAD, env={"DEV": "PYTHON", "CACHELEVEL": "0"})

MATVEC_STEPS_UNROLLED = Q4_MATVEC + """
# the blocks a thread walks after its group's share (5 of a 160-block row over 32 threads, 2 of 64, 3 of 24 over 8) are
# unrolled, so every step's weight loads go out before the first step's math; a walk whose unrolled body would pass 512
# products (10 steps of 2 rows of 32 weights) keeps its loop
for rows, blocks, steps in ((2048, 160, 5), (5120, 64, 2), (512, 24, 3)):
  opts = chosen_opts(rows, blocks)
  group = next(o.arg for o in opts if o.op is OptOps.GROUP)
  assert blocks // group == steps and opts[-1].op is OptOps.UNROLL and opts[-1].arg == 0, (rows, blocks, opts)
assert chosen_opts(2048, 320)[-1].op is not OptOps.UNROLL
check_product(512, 24)   # the unrolled kernel computes the product
print("ok")
"""

def test_0069_matvec_steps_unrolled(trees):
  assert_patch_needed(trees, "0069", MATVEC_STEPS_UNROLLED, env={"DEV": "PYTHON", "CACHELEVEL": "0"})

PADDED_REDUCTION_UNROLLED = """
# a reduction over a range PADTO masks, then unrolled (as the matvec rule unrolls a padded group's walk, or BEAM may): the
# masked steps add nothing and the others all count
import numpy as np
from tinygrad import Tensor
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.uop.ops import AxisType
import tinygrad.codegen.opt.heuristic as heuristic

def padded_unrolled(k):
  if k.reduceop is None: return k
  (k := k.copy()).apply_opt(Opt(OptOps.PADTO, k.axes_of(AxisType.REDUCE)[0], 8))   # 22 -> 24
  k.apply_opt(Opt(OptOps.UNROLL, 0, 0))                                              # all 24 steps
  return k
heuristic.hand_coded_optimizations = padded_unrolled
rng = np.random.default_rng(0)
a, b = rng.standard_normal((4, 22)).astype(np.float32), rng.standard_normal((4, 22)).astype(np.float32)
np.testing.assert_allclose(Tensor(a).sum(1).numpy(), a.sum(1), rtol=1e-5)
np.testing.assert_allclose((Tensor(a) * Tensor(b)).sum(1).numpy(), (a * b).sum(1), rtol=1e-5)
print("ok")
"""

def test_0070_padded_reduction_unrolled(trees):
  assert_patch_needed(trees, "0070", PADDED_REDUCTION_UNROLLED, env={"DEV": "CPU", "CACHELEVEL": "0"})

BUFFER_STATE_READ_AS_ITS_BUFFER = """
# a store whose value reads its target's buffer only through another buffer's state (which an earlier kernel wrote from
# the target) is not a write-after-read hazard: the value is stored in place, not computed into a buffer and copied
import numpy as np
from tinygrad import Tensor
from tinygrad.uop.ops import Ops
def build():
  buf, other = Tensor.zeros(8, 4).contiguous().realize(), Tensor.zeros(4).contiguous().realize()
  x = Tensor.arange(16).reshape(4, 4).float().contiguous().realize()
  s1 = Tensor(buf.uop.after(buf[0:4].uop.store((x * 2).uop)))                  # buf rows 0..3: 2x
  r = Tensor(other.uop.after(other.uop.store(s1[0:4].sum(1).uop)))             # other: their row sums, read from buf
  return buf, Tensor(buf.uop.after(buf[4:8].uop.store((x + r.reshape(4, 1)).uop)))   # buf rows 4..7: from other
kernels = [u for u in build()[1].schedule_linear().src if u.op is Ops.CALL]
assert len(kernels) == 3, f"{len(kernels)} kernels: the last store's value computed apart and copied"
buf, s2 = build()
s2.realize()
x = np.arange(16, dtype=np.float32).reshape(4, 4)
np.testing.assert_equal(buf.numpy(), np.concatenate([2 * x, x + (2 * x).sum(1, keepdims=True)]))
print("ok")
"""

def test_0071_buffer_state_read_as_its_buffer(trees):
  assert_patch_needed(trees, "0071", BUFFER_STATE_READ_AS_ITS_BUFFER, env={"DEV": "CPU", "CACHELEVEL": "0"})

HALF_ROUND_TRIP_KEPT = """
# a float rounded through half and back is rounded (x - x.half().float() is x's rounding error, not 0) where no images are made
import numpy as np
from tinygrad import Tensor, dtypes
x = np.array([1.0001, 503.958, 3.14159, -2.5e-3], np.float32)
got = (Tensor(x) - Tensor(x).cast(dtypes.float16).float()).numpy()
np.testing.assert_allclose(got, x - x.astype(np.float16).astype(np.float32), rtol=0, atol=1e-9)
assert (got != 0).all(), got
print("ok")
"""

def test_0072_half_round_trip_kept(trees):
  assert_patch_needed(trees, "0072", HALF_ROUND_TRIP_KEPT, env={"DEV": "CPU", "CACHELEVEL": "0"})

SYMBOLIC_LAUNCH_DIM = """
# the global dims of an elementwise kernel over a symbolic row count times 20 heads (rows x 5, 16; the last dim is x, so the
# rows land in y, whose limit is 65535): grouped by their largest value, every launch dim within its limit at any row count
import math
from tinygrad import UOp
from tinygrad.codegen.gpudims import get_grouped_dims
S = UOp.variable("S", 1, 16448)
idxs = get_grouped_dims("gidx", (S * 5, 16), (2147483647, 65535, 65535), reverse=True)
sizes = sorted({u for x in idxs for u in x.toposort() if u.op.name == "SPECIAL"}, key=lambda u: u.arg)
assert all(int(u.src[0].vmax) <= m for u, m in zip(sizes, (2147483647, 65535, 65535))), [u.src[0] for u in sizes]
assert math.prod(int(u.src[0].vmax) for u in sizes) == 16448 * 5 * 16
print("ok")
"""

def test_0073_symbolic_launch_dim(trees):
  assert_patch_needed(trees, "0073", SYMBOLIC_LAUNCH_DIM)

DYNAMIC_SHARED = CUDA_GRAPH_FAKE + """
# a source kernel's dynamic shared memory (ProgramInfo.smem: 64 KB, past the 48 KB a static array may take) reaches its runtime,
# and the launches (a CUDAGraph's kernel nodes) get that many bytes; a program without it gets none
shared = []
g.cuda.cuGraphAddKernelNode = lambda node, graph, deps, n, params: shared.append(params._obj.sharedMemBytes) or 0
def source_kernel(name, smem):
  src = (f'extern "C" __global__ void {name}(float* out, const float* x) {{ extern __shared__ float s[]; '
         'int i = threadIdx.x; s[i] = x[i]; __syncthreads(); out[i] = s[31 - i]; }')
  def fxn(out, x):
    params = [out, x]
    while any(p.op is not Ops.PARAM for p in params): params = [p if p.op is Ops.PARAM else p.src[0] for p in params]
    sink = UOp.sink(*params, arg=KernelInfo(name=name))
    info = ProgramInfo(name, (1, 1, 1), (32, 1, 1), (), tuple(p.arg.slot for p in params), outs=(params[0].arg.slot,),
                       ins=(params[1].arg.slot,), target=Device["NULL"].renderer.target, smem=smem)
    return UOp(Ops.PROGRAM, src=(sink, UOp(Ops.LINEAR, src=(*params, sink)), UOp(Ops.SOURCE, arg=src)), arg=info)
  return fxn

@TinyJit
def f(x):
  a = Tensor.empty(32).custom_kernel(x, fxn=source_kernel("staged", 65536))[0]
  return Tensor.empty(32).custom_kernel(a, fxn=source_kernel("plain", 0))[0].realize()
for _ in range(3): f(Tensor.ones(32).contiguous().realize())
assert shared == [65536, 0], shared
print("ok")
"""

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc for DEV=NULL:NVCC:sm_90 (CUDA kernels compiled, nothing run)")
def test_0074_dynamic_shared_memory(trees):
  assert_patch_needed(trees, "0074", DYNAMIC_SHARED, env={"DEV": "NULL:NVCC:sm_90", "CACHELEVEL": "0"})

PLANNED_VIEW = """
# the memory planner's views (arena[offset:offset+nbytes].bitcast(dtype)): their arena, start and Buffer view, no graph_rewrite
import tinygrad.uop.ops as O
from tinygrad import dtypes
from tinygrad.uop.ops import UOp
arena, rewrites = UOp.new_buffer("CPU", 4096, dtypes.uint8), []
plain = O.graph_rewrite
O.graph_rewrite = lambda *a, **k: rewrites.append(k.get("name")) or plain(*a, **k)
for start, n, dt in ((0, 8, dtypes.int32), (256, 128, dtypes.float32), (100, 6, dtypes.half), (4000, 96, dtypes.uint8), (64, 64, dtypes.uint64)):
  v = arena.shrink(((start, start + n),))
  if dt != dtypes.uint8: v = v.bitcast(dt)
  assert v.contiguous_view() == (arena, start), (start, dt, v.contiguous_view())
  assert (v.buffer.offset, v.buffer.nbytes, v.buffer.dtype) == (start, n, dt), (v.buffer.offset, v.buffer.nbytes, v.buffer.dtype)
assert not rewrites, rewrites
print("ok")
"""

def test_0075_planned_view_without_a_rewrite(trees):
  assert_patch_needed(trees, "0075", PLANNED_VIEW, env={"DEV": "CPU"})

GRAPH_STATS_AS_IS = symbolic_graph(30) + """
# a graph's estimates and the counters a replay adds: the kernels' linear sum as it is, never simplified, the same values
import tinygrad.uop.ops as O
from tinygrad import GlobalCounters
from tinygrad.renderer import Estimates
from tinygrad.engine.realize import estimate_uop, graph_cache
graph_cache.clear()   # the next replay builds its runner again, as a process that loaded the step would
simplified, plain = [], O.UOp.simplify
O.UOp.simplify = lambda self, *a, **k: simplified.append(self) or plain(self, *a, **k)
GlobalCounters.reset()
f(c, p.bind(17), n.bind(5))
O.UOp.simplify = plain
(gr,) = graph_cache.values()   # the one graph of the step: 31 kernels
kernels = gr.linear.src
total = Estimates.total(estimate_uop(k) for k in kernels)
assert gr.estimates == total, "the graph's estimates are the kernels' linear sum as it is"
assert not any(u is total.ops or u is total.mem for u in simplified), "the graph's estimates were simplified"
want = lambda f: sum(e if isinstance(e, int) else e.sym_infer({"p": 17, "n": 5}) for e in (f(estimate_uop(k)) for k in kernels))
assert (GlobalCounters.global_ops, GlobalCounters.global_mem) == (want(lambda e: e.ops), want(lambda e: e.mem)), \
  (GlobalCounters.global_ops, GlobalCounters.global_mem, want(lambda e: e.ops), want(lambda e: e.mem))
print("ok")
"""

def test_0076_graph_estimates_counted_without_the_simplifier(trees):
  assert_patch_needed(trees, "0076", GRAPH_STATS_AS_IS, env={"DEV": "CPU"})

CPU_RENDERERS_WHEN_CHOSEN = """
# the CPU device opens with clang without importing the NIR renderer (its mesa bindings) or the x86 one; each is still chosen by name
import os, subprocess, sys
from tinygrad import Device, Tensor
Device["CPU"]
assert not {"tinygrad.renderer.nir", "tinygrad.renderer.isa.x86"} & set(sys.modules), [m for m in sys.modules if "nir" in m or "x86" in m]
assert (Tensor([1.0, 2.0]) * 3).tolist() == [3.0, 6.0]
child = "from tinygrad import Device; print(type(Device['CPU'].renderer).__name__)"
out = subprocess.run([sys.executable, "-c", child], env={**os.environ, "DEV": "CPU:X86"}, capture_output=True, text=True)
assert out.stdout.split()[-1:] == ["X86Renderer"], (out.stdout, out.stderr[-2000:])
print("ok")
"""

def test_0077_cpu_renderers_imported_when_chosen(trees):
  assert_patch_needed(trees, "0077", CPU_RENDERERS_WHEN_CHOSEN, env={"DEV": "CPU"})

POOL_SIGTERM = """
# tinygrad's worker pool under a SIGTERM sent to the whole process group (`timeout`, `kill -- -PGID`, systemd's stop): a process
# that stops cleanly on SIGTERM (as a server does) exits, and one that dies of it leaves no worker behind; and the pool's own
# terminate (a KeyboardInterrupt while compiling or in BEAM) still ends its idle workers at once
import os, signal, subprocess, sys, time
CHILD = '''
import signal, sys, time
from tinygrad.engine.worker import get_worker_pool, terminate_worker_pool
def stop(signum, frame): raise KeyboardInterrupt
if __name__ == "__main__":
  assert sorted(get_worker_pool().imap_unordered(abs, [-1, -2, -3, -4])) == [1, 2, 3, 4]
  if sys.argv[1] == "terminate":
    for _ in range(8):
      time.sleep(0.3)   # every worker idle, one of them waiting for a task with the queue's read lock
      terminate_worker_pool()
      assert sorted(get_worker_pool().imap_unordered(abs, [-1, -2, -3, -4])) == [1, 2, 3, 4]
    sys.exit(0)
  if sys.argv[1] == "clean": signal.signal(signal.SIGTERM, stop)
  print("ready", flush=True)
  try: time.sleep(60)
  except KeyboardInterrupt: print("stopped", flush=True)
'''
def group_alive(pgid):
  try: os.killpg(pgid, 0); return True
  except ProcessLookupError: return False
p = subprocess.Popen([sys.executable, "-c", CHILD, "terminate"], start_new_session=True, env={**os.environ, "PARALLEL": "4"})
try: assert p.wait(timeout=60) == 0, "terminate: the child failed"
except subprocess.TimeoutExpired:
  os.killpg(p.pid, signal.SIGKILL)
  raise AssertionError("terminate: the pool's terminate did not end its workers")
for how in ("clean", "dies"):
  p = subprocess.Popen([sys.executable, "-c", CHILD, how], start_new_session=True, stdout=subprocess.PIPE, text=True,
                       env={**os.environ, "PARALLEL": "2"})
  assert p.stdout.readline().strip() == "ready"
  time.sleep(0.5)   # every worker idle, one of them waiting for a task with the queue's read lock
  os.killpg(p.pid, signal.SIGTERM)
  try: p.wait(timeout=20)
  except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL)
    raise AssertionError(f"{how}: the process did not exit within 20 s of SIGTERM")
  for _ in range(100):
    if not group_alive(p.pid): break
    time.sleep(0.1)
  assert not group_alive(p.pid), f"{how}: workers outlived their parent"
print("ok")
"""

def test_0078_pool_workers_ignore_sigterm_and_end_with_their_parent(trees):
  assert_patch_needed(trees, "0078", POOL_SIGTERM, env={"DEV": "CPU"})
