"""Elementwise kernels of a generated chunk under variants of their opts and lane order, timed alone on the GPU.
  DEV=CUDA CACHELEVEL=0 python3 runs/2026-11-29-lanes/probe.py [variant ...]
A variant: "heur" (the heuristics), "rev" (the heuristics' opts, threadIdx.x on the last local dim), or an opts list
U/L axis:amount,... applied to every elementwise kernel instead of the heuristics'. Kernels: GLM-4.7-Flash's routed
gate_up / down int8 quants (64 x 3072 x 2048, 64 x 2048 x 1536 Q4_0) and x's 24-bit parts of a 512-token chunk's 2048
entries (2048 x 2048). Each variant runs in its own process (tinygrad caches a kernel by its AST)."""
import os, sys, subprocess, time
import numpy as np

def run(variant: str):
  import apps  # noqa: F401
  from tinygrad import Tensor, TinyJit, Device
  from tinygrad.codegen.opt import Opt, OptOps
  import tinygrad.codegen.opt.heuristic as heuristic, tinygrad.codegen.gpudims as gpudims
  from tinygrad.uop.ops import AxisType
  from apps.gguf import GGMLType
  from apps.packed import PackedTensor
  from apps.quantized import int8_quants, x_parts
  from tools.bench_quantized import random_raw
  if variant == "rev":
    orig = gpudims.get_grouped_dims
    def ggd(prefix, dims, max_sizes, reverse=False):
      return orig(prefix, dims[::-1], max_sizes)[::-1] if prefix == "lidx" else orig(prefix, dims, max_sizes, reverse)
    gpudims.get_grouped_dims = ggd
  elif variant != "heur":
    ops = {"U": OptOps.UPCAST, "L": OptOps.LOCAL, "R": OptOps.UNROLL}
    opts = [Opt(ops[o[0]], int(o[1:].split(":")[0]), int(o.split(":")[1])) for o in variant.split(",")]
    chosen = heuristic.hand_coded_optimizations
    def hco(k):
      if k.reduceop is not None: return chosen(k)
      try:
        k2 = k.copy()
        for o in opts: k2.apply_opt(o)
        return k2
      except Exception: return chosen(k)
    heuristic.hand_coded_optimizations = hco
  rng = np.random.default_rng(0)
  ws = [PackedTensor.from_bytes(random_raw(GGMLType.Q4_0, 64 * N * K, rng), GGMLType.Q4_0, (K, 64 * N)) for N, K in ((3072, 2048), (2048, 1536))]
  x = Tensor(rng.standard_normal((2048, 2048), dtype=np.float32)).realize()
  cases = [("gate_up quants", TinyJit(lambda: int8_quants(ws[0]).realize()), 64 * 3072 * 2048 * 1.5625),
           ("down quants", TinyJit(lambda: int8_quants(ws[1]).realize()), 64 * 2048 * 1536 * 1.5625),
           ("x parts", TinyJit(lambda: [t.realize() for t in x_parts(x)]), 2048 * 2048 * 7)]
  dev = Device[Device.DEFAULT]
  for name, fn, nbytes in cases:
    for _ in range(3): fn()
    dev.synchronize()
    ts = []
    for _ in range(20):
      t0 = time.perf_counter(); fn(); dev.synchronize(); ts.append(time.perf_counter() - t0)
    us = float(np.median(ts)) * 1e6
    print(f"{variant:28s} {name:16s} {us:9.1f} us {nbytes / us / 1e3:8.1f} GB/s", flush=True)

if __name__ == "__main__":
  if len(sys.argv) > 1 and sys.argv[1] == "--one": run(sys.argv[2]); sys.exit()
  for v in sys.argv[1:] or ["heur", "rev"]:
    subprocess.run([sys.executable, __file__, "--one", v], env={**os.environ, "CACHELEVEL": "0"})
