# time one generated packed product x(T,K) @ W(N,K).T; argv: type T N K
import sys, contextlib, io, numpy as np
import apps
from apps.gguf import GGMLType
from apps.quantized import QuantizedLinear
from apps.packed import PackedTensor
from tools.bench_quantized import random_raw, time_jit
from apps.quants import dequantize
from tinygrad import Tensor, TinyJit
import os
from tinygrad.codegen.opt import Opt, OptOps
import tinygrad.codegen.opt.heuristic as H
if os.getenv("OPTS"):
  ops = {"U": OptOps.UPCAST, "L": OptOps.LOCAL, "R": OptOps.UNROLL, "G": OptOps.GROUP, "T": OptOps.GROUPTOP, "P": OptOps.PADTO}
  plan = [Opt(ops[o[0]], int(o[1:].split(":")[0]), int(o.split(":")[1])) for o in os.environ["OPTS"].split(",")]
  orig = H.hand_coded_optimizations
  def hco(k):
    if "linear_" not in (k.ast.arg.name if k.ast.arg else ""): return orig(k)
    k = k.copy()
    for o in plan: k.apply_opt(o)
    return k
  H.hand_coded_optimizations = hco
typ, T, N, K = GGMLType[sys.argv[1]], *map(int, sys.argv[2:5])
rng = np.random.default_rng(0)
raw = random_raw(typ, N*K, rng)
QuantizedLinear.kernels = "generated"
l = QuantizedLinear(PackedTensor.from_bytes(raw, typ, (K, N)))
xs = [Tensor(rng.standard_normal((T, K), dtype=np.float32)).contiguous().realize() for _ in range(2)]
fn = TinyJit(lambda x: l(x).contiguous())
wall, dev = time_jit(fn, [(x,) for x in xs], 20)
y = fn(xs[0]).numpy()
ref = xs[0].numpy().astype(np.float64)[:64] @ dequantize(raw, typ).reshape(N, K).astype(np.float64).T
err = np.abs(y[:64]-ref).max()/np.abs(ref).max()
print(f"{sys.argv[1]} T={T} N={N} K={K}: {dev*1e3:.3f} ms  {2*T*N*K/dev/1e12:.2f} TFLOPS  rel err {err:.1e}")
