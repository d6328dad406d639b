"""Opts of the portable Q4_0 matvec, one variant at a time: rendered (--show) or timed DRAM-bound against the heuristics' pick.
  DEV=NULL:NVCC:sm_90 python runs/2026-11-27-matvec-lanes/mv_sweep.py --show 'G:0:32' 12288 2048
  DEV=CUDA python runs/2026-11-27-matvec-lanes/mv_sweep.py"""
import sys, math, argparse, numpy as np
sys.path.insert(0, ".")
import apps  # noqa: F401
from apps import dispatch
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quantized import QuantizedLinear
from apps.quants import dequantize
from tinygrad import Tensor, TinyJit, Device
from tinygrad.codegen.opt import Opt, OptOps
from tools.bench_quantized import random_raw, weight_copies, time_jit
OPS = {"U": OptOps.UPCAST, "L": OptOps.LOCAL, "G": OptOps.GROUP, "GT": OptOps.GROUPTOP, "R": OptOps.UNROLL}
def parse(s): return None if s == "heur" else tuple(Opt(OPS[o], int(a), int(g)) for o, a, g in (t.split(":") for t in s.split()))
_cur = [None]
dispatch._PROVIDERS.clear()
dispatch.plan_opts = lambda spec, sink, **kw: _cur[0]

def build(N, K, opts, kernels):
  _cur[0] = opts
  dispatch.kernel_cached.cache_clear() if hasattr(dispatch.kernel_cached, "cache_clear") else None
  QuantizedLinear.kernels = kernels
  raw = random_raw(GGMLType.Q4_0, N * K, np.random.default_rng(0))
  return raw, QuantizedLinear(PackedTensor.from_bytes(raw, GGMLType.Q4_0, (K, N)))

def axes(N, K):
  from tinygrad.uop.ops import AxisType
  raw, l = build(N, K, None, "generated")
  sink = None
  orig = dispatch.plan_opts
  def grab(spec, s, **kw):
    k = dispatch._scheduler_view(s, Device[Device.DEFAULT].renderer)
    print("full_shape", k.full_shape, [str(t) for t in k.axis_types]); return None
  dispatch.plan_opts = grab
  build(N, K, None, "hand")[1](Tensor.empty(1, K)).realize()
  dispatch.plan_opts = orig

ap = argparse.ArgumentParser()
ap.add_argument("--show", metavar="OPTS")
ap.add_argument("--variants", nargs="*", default=None)
ap.add_argument("shape", nargs="*", type=int)
a = ap.parse_args()
if a.show is not None:
  N, K = a.shape
  axes(N, K)
  from tinygrad.helpers import Context
  with Context(DEBUG=4): build(N, K, parse(a.show), "hand" if a.show != "heur" else "generated")[1](Tensor.empty(1, K)).realize()
  raise SystemExit
SHAPES = [(12288, 2048), (2048, 6144), (2048, 2048), (3072, 1536)]
VARIANTS = a.variants or ["heur"]
rng = np.random.default_rng(1)
print(f"{'N x K':>12s} " + " ".join(f"{v[:26]:>26s}" for v in VARIANTS))
for N, K in SHAPES:
  row = []
  for v in VARIANTS:
    try:
      raw, l0 = build(N, K, parse(v), "generated" if v == "heur" else "hand")
      wb = sum(p.nbytes() for p in l0.w.part_list())
      copies = max(1, math.ceil(256 * 2**20 / wb))
      layers = [l0] + [QuantizedLinear(w) for w in weight_copies(l0.w, copies - 1)]
      xs = [Tensor(rng.standard_normal((1, K), dtype=np.float32)).contiguous().realize() for _ in range(3)]
      fn = TinyJit(lambda x: tuple(l(x).contiguous() for l in layers))
      t = time_jit(fn, [(x,) for x in xs], 20)[1] / copies
      out = fn(xs[0])[0].numpy()
      ref = xs[0].numpy().astype(np.float64) @ dequantize(raw, GGMLType.Q4_0).reshape(N, K).astype(np.float64).T
      err = float(np.abs(out - ref).max() / np.abs(ref).max())
      row.append(f"{t*1e6:7.2f}us {wb/t/1e9:6.0f}GB/s{' BAD' if err > 1e-4 else ''}")
    except Exception as e: row.append(f"{type(e).__name__}"[:26])
    print(f"{N:>6d}x{K:<5d} " + " | ".join(row), flush=True) if len(row) == len(VARIANTS) else None
