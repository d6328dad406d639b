# DEV=CPU python3 runs/2026-11-30-reduce/cpu/int8_block_product.py N K [NOJIT=1: kernels one by one]
# CPU: a decode product (1 x K) @ (N x K).T of Q4_0 as (a) the generated float product, (b) block_product with the weight's
# int8 quants kept (x's three int8 parts per block, int32 sums), timed in a TinyJit over copies
import time, sys, numpy as np
import apps
from tinygrad import Tensor, TinyJit, Device, dtypes
from apps.packed import PackedTensor
from apps.gguf import GGMLType
from apps.quantized import QuantizedLinear, x_parts, int8_quants
from tools.bench_quantized import random_raw
N, K = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
raw = random_raw(GGMLType.Q4_0, N * K, rng)
w = QuantizedLinear(PackedTensor.from_bytes(raw, GGMLType.Q4_0, (K, N))); w.kernels = "generated"
q = int8_quants(w.w).realize()                        # (N, K/32, 32) int8
d = w.w.parts["d"].float().reshape(N, K // 32).contiguous().realize()
x = Tensor(rng.standard_normal((1, K)).astype(np.float32)).realize()
def bp(x):
  xq, sx = x_parts(x)                                 # (1, nb, 3, 32) int8, (1, nb)
  dots = (xq.reshape(1, 1, K // 32, 3, 32).cast(dtypes.int32) * q.reshape(1, N, K // 32, 1, 32).cast(dtypes.int32)).sum(-1)
  coef = Tensor([65536, 256, 1], dtype=dtypes.int32)
  X = (dots * coef).sum(-1).cast(dtypes.float)        # (1, N, nb)
  return (X * sx.reshape(1, 1, K // 32) * d.reshape(1, N, K // 32)).sum(-1).reshape(1, N)
f_float = TinyJit(lambda x: w(x).contiguous())
f_int = (lambda x: bp(x).contiguous().realize()) if __import__("os").environ.get("NOJIT") else TinyJit(lambda x: bp(x).contiguous())
ref = f_float(x).numpy()
for _ in range(2): f_int(x)
print("relerr", float(np.linalg.norm(f_int(x).numpy() - ref) / np.linalg.norm(ref)))
for name, f in (("float", f_float), ("int8", f_int), ("float", f_float), ("int8", f_int)):
  for _ in range(2): f(x)
  ts = []
  for _ in range(15):
    t = time.perf_counter(); f(x).numpy(); ts.append(time.perf_counter() - t)
  print(name, f"{min(ts)*1e3:.2f} ms (median {np.median(ts)*1e3:.2f})")
