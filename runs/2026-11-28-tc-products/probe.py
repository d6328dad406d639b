"""One chunk's dense products (512 tokens, Youtu-LLM-2B and GLM shapes) on the generated path three ways, tinygrad's
heuristics choosing every kernel: packed (dequantized inside the product, fp32), f16 (W dequantized to fp16 by the rows
kernel, x cast to fp16, fp32 accumulation: llama.cpp's cuBLAS form), f32 (W dequantized to fp32, the product at the
environment's ALLOW_TF32). Prints us per product (dequant + product) and the relative L2 error against float64."""
import math, sys, time
import numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, TinyJit, Device, dtypes
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quants import dequantize
from apps.quantized import QuantizedLinear, dequantize_rows
from tools.bench_quantized import random_raw

SHAPES = [("youtu q_a+kv_a", 2112, 2048), ("youtu q_b", 3072, 1536), ("youtu o", 2048, 2048), ("youtu gate_up", 12288, 2048),
          ("youtu down", 2048, 6144), ("glm q_b", 5120, 768), ("glm o", 2048, 5120)]
T = int(sys.argv[1]) if len(sys.argv) > 1 else 512
forms = sys.argv[2].split(",") if len(sys.argv) > 2 else ["packed", "f16", "f32"]
only = sys.argv[3].split(",") if len(sys.argv) > 3 else None
rng = np.random.default_rng(0)

# TC_EXTRA="R0:4,S0:1": opts applied after the heuristics' pick wherever it took the tensor cores (U/L/R/S = UPCAST/LOCAL/UNROLL/SWAP)
if (extra := __import__("os").environ.get("TC_EXTRA")):
  from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
  import tinygrad.codegen.opt.heuristic as heuristic
  ops = {"U": OptOps.UPCAST, "L": OptOps.LOCAL, "R": OptOps.UNROLL, "S": OptOps.SWAP}
  extra_opts = [Opt(ops[o[0]], int(o[1:].split(":")[0]), int(o.split(":")[1])) for o in extra.split(",")]
  chosen = heuristic.hand_coded_optimizations
  def hand_coded_optimizations(k):
    k = chosen(k)
    if any(o.op is OptOps.TC for o in k.applied_opts):
      for o in extra_opts:
        try: k.apply_opt(o)
        except KernelOptError: print("failed", o)
    return k
  heuristic.hand_coded_optimizations = hand_coded_optimizations

def product(form, l, x):
  if form == "packed": return l(x)
  if form == "f16": return x.half().matmul(dequantize_rows(l.w, dtype=dtypes.float16).T, dtype=dtypes.float)
  if form == "f16x2":
    xh = x.half(); xl = (x - xh.float()).half()
    w = dequantize_rows(l.w, dtype=dtypes.float16).T
    return xh.matmul(w, dtype=dtypes.float) + xl.matmul(w, dtype=dtypes.float)
  return x.matmul(dequantize_rows(l.w, dtype=dtypes.float32).T)

for name, N, K in SHAPES:
  if only and name.split()[-1] not in only and name not in only: continue
  raw = random_raw(GGMLType.Q4_0, N * K, rng)
  w0 = PackedTensor.from_bytes(raw, GGMLType.Q4_0, (K, N))
  copies = max(2, math.ceil(96 * 2**20 / (N * K // 32 * 18)))
  layers = [QuantizedLinear(w0)] + [QuantizedLinear(PackedTensor(w0.fmt, w0.rows, w0.in_features, {k: (p + 0).contiguous().realize() for k, p in w0.parts.items()})) for _ in range(copies - 1)]
  for l in layers: l.kernels = "generated"
  xn = rng.standard_normal((T, K), dtype=np.float32)
  x = Tensor(xn).realize()
  ref = xn.astype(np.float64) @ dequantize(raw, GGMLType.Q4_0).reshape(N, K).astype(np.float64).T
  row = [f"{name:15s} {N:6d} {K:6d}"]
  for form in forms:
    jit = TinyJit(lambda x: [product(form, l, x).contiguous().realize() for l in layers])
    for _ in range(3): outs = jit(x)
    Device[Device.DEFAULT].synchronize()
    t0 = time.perf_counter()
    for _ in range(10): outs = jit(x)
    Device[Device.DEFAULT].synchronize()
    us = (time.perf_counter() - t0) / 10 / copies * 1e6
    err = np.linalg.norm(outs[0].numpy().astype(np.float64) - ref) / np.linalg.norm(ref)
    row.append(f"{form} {us:8.1f} us {2 * T * N * K / us / 1e6:6.1f} TF {err:.1e}")
  print(" | ".join(row), flush=True)
