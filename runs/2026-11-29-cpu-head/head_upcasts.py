"""The CPU output head (a Q4_0 matvec of 102,464 x 256, the tiny presets' head shape) under the heuristics' opts and with its
row upcasts replaced (VAR="8": one upcast of 8; "16"; "4,2": the heuristics' two), timed in a TinyJit, checked against numpy.
  VAR=8 CACHELEVEL=0 DEV=CPU PYTHONPATH=. python3 runs/2026-11-29-cpu-head/head_upcasts.py Q4_0"""
import numpy as np, time, os, sys, apps  # noqa
from tinygrad import Tensor, Device, TinyJit
from tinygrad.codegen.opt import Opt, OptOps
import tinygrad.codegen.opt.heuristic as H
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quantized import QuantizedLinear
from tools.bench_quantized import random_raw
orig = H.hand_coded_optimizations
VAR = os.environ.get("VAR", "")
def hco(k):
  k2 = orig(k)
  if not VAR or "linear" not in str(getattr(k.ast.arg, "name", "")): return k2
  ops = list(k2.applied_opts)
  print("heuristics:", ops, file=sys.stderr)
  k3 = k.copy()
  for o in ops:
    if o.op is OptOps.UPCAST and o.axis == 0: continue
    if o.op is OptOps.THREAD: continue
    k3.apply_opt(o)
  for a in VAR.split(","):
    k3.apply_opt(Opt(OptOps.UPCAST, 0, int(a)))
  k3.apply_opt(Opt(OptOps.THREAD, 0, 2))
  print("variant:", k3.applied_opts, file=sys.stderr)
  return k3
H.hand_coded_optimizations = hco
typ = GGMLType[sys.argv[1]] if len(sys.argv) > 1 else GGMLType.Q4_0
N, K = 102464, 256
rng = np.random.default_rng(0)
raw = random_raw(typ, N*K, rng)
lin = QuantizedLinear(PackedTensor.from_bytes(raw, typ, (K, N)))
lin.kernels = "generated"
xn = rng.standard_normal((1, K)).astype(np.float32)
x = Tensor(xn).realize()
@TinyJit
def f(x): return lin(x).realize()
for _ in range(3): out = f(x)
from apps.quants import dequantize
ref = xn.astype(np.float64) @ dequantize(raw, typ).reshape(N, K).astype(np.float64).T
err = np.abs(out.numpy() - ref).max() / np.abs(ref).max()
ts = []
for _ in range(30):
  t = time.perf_counter(); f(x); Device["CPU"].synchronize(); ts.append(time.perf_counter() - t)
print(typ.name, VAR or "heur", f"{np.median(ts)*1e3:.2f} ms, {lin.w.nbytes/np.median(ts)/1e9:.2f} GB/s, err {err:.1e}")
