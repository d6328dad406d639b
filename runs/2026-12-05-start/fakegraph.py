"""CUDAGraph on the NULL device with the driver's graph calls faked (as test_patches.py's CUDA_GRAPH_FAKE): exec'd by compiles.py."""
from tinygrad import Device
import types
import tinygrad.runtime.graph.cuda as g
from tinygrad.runtime.ops_null import NullProgram
fake = {"cuGraphCreate": lambda *a: 0, "cuGraphInstantiate_v2": lambda *a: 0, "cuGraphLaunch": lambda *a: 0, "cuGraphDestroy": lambda *a: 0,
        "cuGraphExecDestroy": lambda *a: 0, "cuGraphAddMemcpyNode": lambda *a: 0, "cuGraphExecMemcpyNodeSetParams": lambda *a: 0,
        "cuGraphAddKernelNode": lambda *a: 0, "cuGraphExecKernelNodeSetParams": lambda *a: 0}
for k, v in fake.items(): setattr(g.cuda, k, v)
g.cuda.dll = types.SimpleNamespace(cuGraphAddDependencies_v2=lambda *a: 0)
g.check, g.cu_time_execution = (lambda st: None), (lambda cb, enable=False: cb())
g.encode_args = lambda args, vals, signature: (types.SimpleNamespace(), None)
NullProgram.prg, NullProgram.signature = None, None
Device["NULL"].graph = g.CUDAGraph
