"""One chunk's dense products (512 tokens, Youtu-LLM-2B and GLM-4.7-Flash shapes, Q4_0) three ways: hand (the hand-written
integer tensor-core GEMM), packed (today's generated path: dequantized inside the product, fp32 CUDA cores) and i8 (tensor
ops: x rounded per block to 24 bits as three int8 parts, W's quants as int8, the block products on the int8 tensor cores of
patch 0029, the scales applied per block). Prints us per product (x's rounding and W's int8 quants included) and the
relative L2 error against float64. blk: apps.quantized.block_product as the model runs it. i8 needs TC_OPT=1 (the product is a nested reduction) unless a heuristic patch gives it."""
import math, os, sys, time
import numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, TinyJit, Device, dtypes
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quants import dequantize
from apps.quantized import QuantizedLinear
from tools.bench_quantized import random_raw

SHAPES = [("youtu q_a+kv_a", 2112, 2048), ("youtu q_b", 3072, 1536), ("youtu o", 2048, 2048), ("youtu gate_up", 12288, 2048),
          ("youtu down", 2048, 6144), ("glm q_b", 5120, 768), ("glm o", 2048, 5120)]
T = int(sys.argv[1]) if len(sys.argv) > 1 else 512
forms = sys.argv[2].split(",") if len(sys.argv) > 2 else ["hand", "packed", "i8"]
only = sys.argv[3].split(",") if len(sys.argv) > 3 else None
rng = np.random.default_rng(0)

# TC_UP="2,2,4": a tensor-core kernel takes these upcasts of its N and M dims and this local of N after the TC opt, not the
# heuristics' (4, 4, 4)
if (tc_up := os.environ.get("TC_UP")):
  from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
  import tinygrad.codegen.opt.heuristic as heuristic
  chosen, (un, um, ln) = heuristic.hand_coded_optimizations, (int(v) for v in tc_up.split(","))
  def hand_coded_optimizations(k):
    tk = k.copy()
    try: rngs = tk.apply_opt(Opt(OptOps.TC, 0, (-1, 1, 1)))
    except KernelOptError: return chosen(k)
    for dim, sz in ((1, un), (0, um)):
      if sz > 1: rngs[dim] = tk.apply_opt(Opt(OptOps.UPCAST, tk.rngs.index(rngs[dim]), sz))[0]
    if ln > 1: tk.apply_opt(Opt(OptOps.LOCAL, tk.rngs.index(rngs[0]), ln))
    return tk
  heuristic.hand_coded_optimizations = hand_coded_optimizations

def x_parts(x:Tensor) -> tuple[Tensor, Tensor]:
  """x (T, K) -> its 24-bit rounding per block of 32 as three int8 parts (T, 3, K/32, 32), X = 65536 h + 256 m + l, and the
  blocks' scales (T, K/32)."""
  T, K = x.shape
  xb = x.reshape(T, K // 32, 32)
  sx = xb.abs().max(-1) / 8323072                        # 127 * 65536: the top part stays within int8
  X = (xb / sx.maximum(1e-30).unsqueeze(-1)).round().cast(dtypes.int32)
  l = ((X + 128) & 255) - 128
  Y = (X - l) >> 8
  m = ((Y + 128) & 255) - 128
  return Tensor.stack((Y - m) >> 8, m, l, dim=1).cast(dtypes.int8).contiguous(), sx.contiguous()

def q4_0_int8(w:PackedTensor) -> Tensor:
  """A Q4_0 tensor's quants as int8 (N, K/32, 32), q - 8."""
  b = w.parts["qs"].bitcast(dtypes.uint8)                # (N, nb, 16)
  return (Tensor.cat(b & 15, b >> 4, dim=-1).cast(dtypes.int8) - 8).contiguous()

def i8_product(w:PackedTensor, x:Tensor) -> Tensor:
  xq, sx = x_parts(x)
  wq, d = q4_0_int8(w), w.parts["d"].float().reshape(w.rows[0], -1)
  (T, _, B, _), N = xq.shape, wq.shape[0]
  dots = (xq.reshape(T, 1, 3, B, 32).cast(dtypes.int32) * wq.reshape(1, N, 1, B, 32).cast(dtypes.int32)).sum(-1)   # (T, N, 3, B)
  coef = Tensor([65536.0, 256.0, 1.0], device=x.device).reshape(1, 1, 3, 1)
  return (dots.cast(dtypes.float) * coef * sx.reshape(T, 1, 1, B) * d.reshape(1, N, 1, B)).sum((2, 3))

def i8b_product(w:PackedTensor, x:Tensor) -> Tensor:
  """i8 with the parts innermost: a block's weights serve its three parts, combined before the block's scales."""
  xq, sx = x_parts(x)
  wq, d = q4_0_int8(w), w.parts["d"].float().reshape(w.rows[0], -1)
  (T, _, B, _), N = xq.shape, wq.shape[0]
  xq = xq.permute(0, 2, 1, 3).contiguous()                                                     # (T, B, 3, 32)
  dots = (xq.reshape(T, 1, B, 3, 32).cast(dtypes.int32) * wq.reshape(1, N, B, 1, 32).cast(dtypes.int32)).sum(-1)   # (T, N, B, 3)
  coef = Tensor([65536.0, 256.0, 1.0], device=x.device)
  return ((dots.cast(dtypes.float) * coef).sum(-1) * sx.reshape(T, 1, B) * d.reshape(1, N, B)).sum(-1)

def int8_matmul(x:Tensor, wq:Tensor) -> Tensor: return (x.cast(dtypes.int32) @ wq.cast(dtypes.int32).T).cast(dtypes.float)

def product(form, l, x):
  if form in ("hand", "packed"): return l(x)
  if form == "blk":                                   # apps.quantized.block_product (a Q4_0 block's parts summed in int32)
    from apps.quantized import block_product
    return block_product(l.w, x)
  return i8b_product(l.w, x) if form == "i8b" else i8_product(l.w, x)

for name, N, K in SHAPES:
  if only and name.split()[-1] not in only and name not in only: continue
  raw = random_raw(GGMLType.Q4_0, N * K, rng)
  w0 = PackedTensor.from_bytes(raw, GGMLType.Q4_0, (K, N))
  copies = max(2, math.ceil(96 * 2**20 / (N * K // 32 * 18)))
  layers = [QuantizedLinear(w0)] + [QuantizedLinear(PackedTensor(w0.fmt, w0.rows, w0.in_features, {k: (p + 0).contiguous().realize() for k, p in w0.parts.items()})) for _ in range(copies - 1)]
  xn = rng.standard_normal((T, K), dtype=np.float32)
  x = Tensor(xn).realize()
  ref = xn.astype(np.float64) @ dequantize(raw, GGMLType.Q4_0).reshape(N, K).astype(np.float64).T
  row = [f"{name:15s} {N:6d} {K:6d}"]
  for form in forms:
    for l in layers: l.kernels = "hand" if form == "hand" else "generated"
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
