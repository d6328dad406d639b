"""Does programmatic dependent launch (PDL, Hopper's griddepcontrol) pay inside a CUDA graph for a decode-like chain?

A chain of `--nodes` kernels, each streaming its own weight buffer (`--mib`, distinct buffers: DRAM, not L2) and reading the
previous kernel's small output, is built as one CUDA graph three ways and replayed:
  plain     every kernel waits for the previous one to finish (what tinygrad's CUDAGraph builds today)
  pdl       kernels issue their weight loads, trigger their dependents (griddepcontrol.launch_dependents) and only then
            wait for the previous kernel (griddepcontrol.wait); the edges are programmatic (cuGraphAddDependencies_v2)
  pdl-late  the same edges, but no early trigger (dependents launch when the kernel ends): only the launch latency is hidden
Prints us per kernel and the fraction of the copy floor, per weight size. The driver needs CUDA >= 12.3 for edge data.

  DEV=CUDA python3 -m tools.pdl_probe [--nodes 300] [--mib 0.5,2,8]
"""
from __future__ import annotations
import argparse, ctypes, sys, time
import apps  # noqa: F401  (the pinned tinygrad)
from tinygrad import Device
from tinygrad.runtime.support.compiler_cuda import NVRTCCompiler

SRC = r"""
extern "C" __global__ void __launch_bounds__(128) step(float* __restrict__ out, const float* __restrict__ x, const uint4* __restrict__ w) {
  uint4 r[NL];
  const uint4* p = w + (size_t)blockIdx.x*128*NL + threadIdx.x;
#pragma unroll
  for (int i = 0; i < NL; i++) r[i] = __ldg(p + i*128);
#if TRIGGER
  asm volatile("griddepcontrol.launch_dependents;");
#endif
#if WAIT
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  float xv = x[(blockIdx.x*128 + threadIdx.x) & (NOUT - 1)], acc = 0.0f;
#pragma unroll
  for (int i = 0; i < NL; i++)
    acc += __uint_as_float((r[i].x & 0x7fffffu) | 0x3f800000u) + __uint_as_float((r[i].y & 0x7fffffu) | 0x3f800000u)
         + __uint_as_float((r[i].z & 0x7fffffu) | 0x3f800000u) + __uint_as_float((r[i].w & 0x7fffffu) | 0x3f800000u);
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) out[(blockIdx.x*4 + threadIdx.x/32) & (NOUT - 1)] = acc * 1e-6f + xv * 0.5f + SALT;
}
"""

class EdgeData(ctypes.Structure):  # CUgraphEdgeData (CUDA 12.3)
  _fields_ = [("from_port", ctypes.c_ubyte), ("to_port", ctypes.c_ubyte), ("type", ctypes.c_ubyte), ("reserved", ctypes.c_ubyte * 5)]
PORT_PROGRAMMATIC, DEPENDENCY_PROGRAMMATIC = 1, 1

class KernelNodeParams(ctypes.Structure):  # CUDA_KERNEL_NODE_PARAMS_v1
  _fields_ = [("func", ctypes.c_void_p), ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
              ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint), ("sharedMemBytes", ctypes.c_uint),
              ("kernelParams", ctypes.POINTER(ctypes.c_void_p)), ("extra", ctypes.POINTER(ctypes.c_void_p))]

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python3 -m tools.pdl_probe", description=__doc__.split("\n\n")[0])
  ap.add_argument("--nodes", type=int, default=300)
  ap.add_argument("--mib", default="0.5,2,8", help="weight MiB per kernel, comma-separated")
  ap.add_argument("--replays", type=int, default=20)
  ap.add_argument("--funcs", type=int, default=1, help="distinct kernels (each its own module), used round-robin along the chain")
  ap.add_argument("--extra-edges", type=int, default=0, help="each node also depends (full edges) on this many earlier nodes")
  ap.add_argument("--bandwidth", type=float, default=2900.0, help="copy floor GB/s")
  a = ap.parse_args(argv)
  dev = Device["CUDA"]
  cu = ctypes.CDLL("libcuda.so.1")
  def check(st, what):
    if st != 0: raise RuntimeError(f"{what}: CUDA error {st}")
  ver = ctypes.c_int()
  check(cu.cuDriverGetVersion(ctypes.byref(ver)), "cuDriverGetVersion")
  have = 'present' if hasattr(cu, 'cuGraphAddDependencies_v2') else 'MISSING'
  print(f"driver CUDA {ver.value // 1000}.{ver.value % 1000 // 10}; cuGraphAddDependencies_v2 {have}")
  check(cu.cuCtxSetCurrent(dev.context), "cuCtxSetCurrent")
  comp = NVRTCCompiler(dev.arch)
  cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
  def alloc(n):
    p = ctypes.c_uint64()
    check(cu.cuMemAlloc_v2(ctypes.byref(p), n), "cuMemAlloc")
    check(cu.cuMemsetD8_v2(p, 1, ctypes.c_size_t(n)), "cuMemset")
    return p
  def function(nl, trigger, wait, salt=0):
    ptx = comp.compile(f"#define SALT {salt}\n#define NL {nl}\n#define NOUT 512\n#define TRIGGER {int(trigger)}\n#define WAIT {int(wait)}\n" + SRC)
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    check(cu.cuModuleLoadData(ctypes.byref(mod), ptx), "cuModuleLoadData")
    check(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"step"), "cuModuleGetFunction")
    return fn
  outs = [alloc(512 * 4), alloc(512 * 4)]
  print(f"{'MiB/kernel':>10} {'variant':>9} {'us/kernel':>10} {'floor us':>9} {'of floor':>9}")
  for mib in [float(m) for m in a.mib.split(",")]:
    nl = max(1, round(mib * 2**20 / (128 * 128 * 16)))
    nbytes = 128 * 128 * nl * 16
    ws = [alloc(nbytes) for _ in range(a.nodes)]
    for variant, trigger, wait, prog in (("plain", False, False, False), ("pdl", True, True, True), ("pdl-late", False, True, True)):
      fns = [function(nl, trigger, wait, k) for k in range(a.funcs)]
      graph = ctypes.c_void_p()
      check(cu.cuGraphCreate(ctypes.byref(graph), 0), "cuGraphCreate")
      keep, prev, nodes = [], None, []
      for i in range(a.nodes):
        args = [ctypes.c_uint64(outs[i % 2].value), ctypes.c_uint64(outs[(i + 1) % 2].value), ctypes.c_uint64(ws[i].value)]
        argv_ = (ctypes.c_void_p * 3)(*[ctypes.cast(ctypes.byref(x), ctypes.c_void_p) for x in args])
        params = KernelNodeParams(fns[i % a.funcs], 128, 1, 1, 128, 1, 1, 0, ctypes.cast(argv_, ctypes.POINTER(ctypes.c_void_p)), None)
        node = ctypes.c_void_p()
        if prev is None or prog: check(cu.cuGraphAddKernelNode(ctypes.byref(node), graph, None, ctypes.c_size_t(0), ctypes.byref(params)), "add")
        else: check(cu.cuGraphAddKernelNode(ctypes.byref(node), graph, ctypes.byref(prev), ctypes.c_size_t(1), ctypes.byref(params)), "add")
        if prev is not None and prog:
          e = EdgeData(PORT_PROGRAMMATIC, 0, DEPENDENCY_PROGRAMMATIC)
          check(cu.cuGraphAddDependencies_v2(graph, ctypes.byref(prev), ctypes.byref(node), ctypes.byref(e), ctypes.c_size_t(1)), "edge")
        for k in range(2, 2 + a.extra_edges):
          if i - k >= 0: check(cu.cuGraphAddDependencies(graph, ctypes.byref(nodes[i - k]), ctypes.byref(node), ctypes.c_size_t(1)), "extra edge")
        keep += [args, argv_, params]
        nodes.append(node)
        prev = node
      inst = ctypes.c_void_p()
      check(cu.cuGraphInstantiateWithFlags(ctypes.byref(inst), graph, ctypes.c_ulonglong(0)), "instantiate")
      for _ in range(3): check(cu.cuGraphLaunch(inst, None), "launch")
      check(cu.cuCtxSynchronize(), "sync")
      t0 = time.perf_counter()
      for _ in range(a.replays): check(cu.cuGraphLaunch(inst, None), "launch")
      check(cu.cuCtxSynchronize(), "sync")
      us = (time.perf_counter() - t0) / a.replays / a.nodes * 1e6
      floor = nbytes / (a.bandwidth * 1e9) * 1e6
      print(f"{nbytes / 2**20:>10.2f} {variant:>9} {us:>10.2f} {floor:>9.2f} {floor / us:>8.1%}")
      cu.cuGraphExecDestroy(inst); cu.cuGraphDestroy(graph)
    for w in ws: cu.cuMemFree_v2(w)
  return 0

if __name__ == "__main__": sys.exit(main())
