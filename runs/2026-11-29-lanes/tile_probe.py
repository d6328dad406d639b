"""The routed experts' tile kernel (apps/quantized.py _tile_block_kernel) timed alone, as it is and with its block's 32 k
permuted alike in both operands (kk = 8 * ((k // 4) % 4) + 4 * (k // 16) + k % 4, meant to put an int8 mma lane's 8 bytes of a
block side by side; for sm_90 it lowers to the plain kernel's code), and their outputs compared.
  DEV=CUDA CACHELEVEL=0 python3 runs/2026-11-29-lanes/tile_probe.py [case,...]   (PERM=0: the plain kernel only; BEAM=n searches; SAVE=<prefix> / AGAINST=<prefix>: outputs saved / compared)"""
import os, time, sys
import numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, TinyJit, Device, dtypes, UOp
from tinygrad.uop.ops import AxisType, Ops, KernelInfo
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quantized import x_parts, int8_quants
from tools.bench_quantized import random_raw

def kernel_of(T, TL, N, nb, E, perm):
  def kernel(out, xq, sx, expert, wq, d):
    t, r, n = UOp.range(T, 0), UOp.range(TL, 1), UOp.range(N, 2)
    b, p, k = UOp.range(nb, 3, AxisType.REDUCE), UOp.range(3, 4, AxisType.REDUCE), UOp.range(32, 5, AxisType.REDUCE)
    kk = ((k // 4) % 4) * 8 + (k // 16) * 4 + k % 4 if perm else k
    e, row = expert[t].cast(dtypes.weakint).maximum(0).minimum(E - 1), t * TL + r
    dot = (xq[row, b, p, kk].cast(dtypes.int32) * wq[e, n, b, kk].cast(dtypes.int32)).reduce(k, arg=Ops.ADD)
    coef = p.eq(0).where(UOp.const(65536, dtypes.int32), p.eq(1).where(UOp.const(256, dtypes.int32), UOp.const(1, dtypes.int32)))
    X = (dot * coef).reduce(p, arg=Ops.ADD).cast(dtypes.float32)
    acc = (X * sx[row, b] * d[e, n, b].cast(dtypes.float32)).reduce(b, arg=Ops.ADD)
    return out[t, r, n].store(acc).end(t, r, n).sink(arg=KernelInfo(name=f"tile_{'perm' if perm else 'plain'}_{T}_{TL}_{N}_{nb * 32}"))
  return kernel

rng = np.random.default_rng(0)
dev = Device[Device.DEFAULT]
for name, E, N, K, T, TL in (("dsv2 gate_up", 64, 2816, 2048, 160, 32), ("dsv2 down", 64, 2048, 1408, 160, 32), ("glm gate_up", 64, 3072, 2048, 192, 16)):
  w = PackedTensor.from_bytes(random_raw(GGMLType.Q4_0, E * N * K, rng), GGMLType.Q4_0, (K, E * N))
  w = PackedTensor(w.fmt, (E, N), K, {k: v.reshape(E, N, *v.shape[1:]) for k, v in w.parts.items()})
  wq, d = int8_quants(w).realize(), w.parts["d"].reshape(E, N, K // 32)
  xq, sx = [t.realize() for t in x_parts(Tensor(rng.standard_normal((T * TL, K), dtype=np.float32)))]
  expert = Tensor(np.sort(rng.integers(0, E, T)).astype(np.int32)).realize()
  if len(sys.argv) > 1 and name not in sys.argv[1].split(","): continue
  outs = {}
  for perm in (False, True)[:1 if os.environ.get("PERM") == "0" else 2]:
    fxn = kernel_of(T, TL, N, K // 32, E, perm)
    f = TinyJit(lambda: Tensor.empty(T, TL, N).custom_kernel(xq, sx, expert, wq, d, fxn=fxn)[0].realize())
    for _ in range(3): o = f()
    dev.synchronize()
    ts = []
    for _ in range(20):
      t0 = time.perf_counter(); o = f(); dev.synchronize(); ts.append(time.perf_counter() - t0)
    outs[perm] = o.numpy()
    if os.environ.get("SAVE"): np.save(f"{os.environ['SAVE']}_{name.replace(' ', '_')}.npy", outs[perm])
    if os.environ.get("AGAINST"):
      ref = np.load(f"{os.environ['AGAINST']}_{name.replace(' ', '_')}.npy")
      print(f"{name:14s} max |this - saved| / max |saved| = {np.abs(outs[perm] - ref).max() / np.abs(ref).max():.2e}")
    us = float(np.median(ts)) * 1e6
    print(f"{name:14s} {'perm' if perm else 'plain':6s} {us:9.1f} us  {2 * T * TL * N * K / us / 1e6:7.1f} TFLOPS (padded rows)", flush=True)
  if len(outs) == 2: print(f"{name:14s} max |perm - plain| / max |plain| = {np.abs(outs[True] - outs[False]).max() / np.abs(outs[False]).max():.2e}")
