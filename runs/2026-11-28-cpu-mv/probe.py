"""The generated path's decode matvec on the CPU: a Q4_0 / Q8_0 product of one token, under the heuristics' opts and with
EXTRA opts appended, timed over copies that do not fit the caches.
Prints us a product and GB/s of the packed weights. Run: PYTHONPATH=. DEV=CPU .venv/bin/python runs/2026-11-28-cpu-mv/probe.py"""
import math, os, sys, time
import numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, TinyJit, Device
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quantized import QuantizedLinear
from tools.bench_quantized import random_raw

# EXTRA="UNROLL:1:0,UPCAST:0:2": opts applied after the heuristics' to the products' kernels (q4_0_/q8_0_ names)
unr, extra = 0, os.environ.get("EXTRA", "")
if extra:
  from tinygrad.codegen.opt import Opt, OptOps
  import tinygrad.codegen.opt.heuristic as heuristic
  chosen = heuristic.hand_coded_optimizations
  opts = [Opt(OptOps[o], int(a), int(g)) for o, a, g in (e.split(":") for e in extra.split(","))]
  def hand_coded_optimizations(k):
    k = chosen(k)
    if k.reduceop is not None:
      for o in opts: k.apply_opt(o)
    return k
  heuristic.hand_coded_optimizations = hand_coded_optimizations

rng = np.random.default_rng(0)
for typ in (GGMLType.Q4_0, GGMLType.Q8_0):
  for N, K in ((2048, 2048), (512, 256), (1024, 512)):
    raw = random_raw(typ, N * K, rng)
    w0 = PackedTensor.from_bytes(raw, typ, (K, N))
    copies = max(2, math.ceil(64 * 2**20 / len(raw)))
    layers = [QuantizedLinear(w0)] + [QuantizedLinear(PackedTensor(w0.fmt, w0.rows, w0.in_features, {k: (p + 0).contiguous().realize() for k, p in w0.parts.items()})) for _ in range(copies - 1)]
    for l in layers: l.kernels = "generated"
    x = Tensor(rng.standard_normal((1, K), dtype=np.float32)).realize()
    jit = TinyJit(lambda x: [l(x).contiguous().realize() for l in layers])
    for _ in range(3): jit(x)
    best = 1e9
    for _ in range(5):
      Device[Device.DEFAULT].synchronize(); t0 = time.perf_counter(); jit(x); Device[Device.DEFAULT].synchronize()
      best = min(best, (time.perf_counter() - t0) / copies)
    print(f"{typ.name} {N:5d} x {K:5d} EXTRA={extra}: {best * 1e6:8.1f} us  {len(raw) / best / 1e9:5.2f} GB/s", flush=True)
