"""A chunk's Q4_0 products (512 tokens, Youtu-LLM-2B and GLM-4.7-Flash shapes) as the generated path's block products on the
int8 tensor cores, against today's packed fp32 product. Forms: packed (today), blk (x's three int8 parts a block summed in
int32 with a coefficient tensor uploaded from the host, the 2026-11-28 rejected form), blkc (the coefficients from an arange:
constants in the kernel, no upload). TC_UP="un,um,ln" overrides the tensor-core kernel's upcasts of N and M and local of N
(CACHELEVEL=0 so each override compiles its own program). Prints us a product (x's parts and W's int8 quants included), TFLOPS
and the relative L2 error against float64."""
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
forms = sys.argv[2].split(",") if len(sys.argv) > 2 else ["packed", "blk", "blkc"]
only = sys.argv[3].split(",") if len(sys.argv) > 3 else None
rng = np.random.default_rng(0)

# TC_UP="un,um,ln": the tensor-core kernel takes these upcasts of N and M and local of N after the TC opt, applied as the
# heuristics apply it (TC axis 0, TC_OPT 0; their pick is 4,4,4 at 512 tokens); TC_UNR="p": then the reduce of x's three parts
# is unrolled; "pK": and the blocks' reduce by K. Other kernels keep the heuristics' opts.
if (tc_up := os.environ.get("TC_UP")) or os.environ.get("TC_UNR"):
  from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
  import tinygrad.codegen.opt.heuristic as heuristic
  chosen, (un, um, ln) = heuristic.hand_coded_optimizations, (int(v) for v in (tc_up or "4,4,4").split(","))
  unr = os.environ.get("TC_UNR", "")
  def hand_coded_optimizations(k):
    if not any(o.op is OptOps.TC for o in chosen(k).applied_opts): return chosen(k)
    try: return override(k)
    except KernelOptError as e:   # a tiling that does not divide this product's shape: the heuristics' pick, said so
      print(f"TC_UP={tc_up} TC_UNR={unr}: does not apply ({e}); the heuristics' pick", file=sys.stderr)
      return chosen(k)
  def override(k):
    tk = k.copy()
    rngs = tk.apply_opt(Opt(OptOps.TC, 0, (-1, 0, 1)))
    for dim, sz in ((1, un), (0, um)):
      if sz > 1: rngs[dim] = tk.apply_opt(Opt(OptOps.UPCAST, tk.rngs.index(rngs[dim]), sz))[0]
    if ln > 1: tk.apply_opt(Opt(OptOps.LOCAL, tk.rngs.index(rngs[0]), ln))
    if unr.startswith("p"):
      tk.apply_opt(Opt(OptOps.UNROLL, [tk.full_shape[i] for i in tk.unrollable_dims].index(3), 0))
      if len(unr) > 1:
        tk.apply_opt(Opt(OptOps.UNROLL, next(j for j, i in enumerate(tk.unrollable_dims) if tk.full_shape[i] % int(unr[1:]) == 0 and tk.full_shape[i] > 32), int(unr[1:])))
    return tk
  heuristic.hand_coded_optimizations = hand_coded_optimizations

def x_parts(x: Tensor) -> tuple[Tensor, Tensor]:
  T, K = x.shape
  xb = x.reshape(T, K // 32, 32)
  sx = xb.abs().max(-1) / 8323072
  v = xb * (sx == 0).where(0.0, sx.reciprocal()).unsqueeze(-1)
  X = (v.sign() * (v.abs() + 0.5).floor()).cast(dtypes.int32)
  l = ((X + 128) & 255) - 128
  Y = (X - l) >> 8
  m = ((Y + 128) & 255) - 128
  return Tensor.stack((Y - m) >> 8, m, l, dim=2).cast(dtypes.int8).contiguous(), sx.contiguous()

def int8_quants(w: PackedTensor) -> Tensor:
  b = w.parts["qs"].bitcast(dtypes.uint8)
  return (Tensor.cat(b & 15, b >> 4, dim=-1).cast(dtypes.int8) - 8).contiguous()

def block_product(w: PackedTensor, x: Tensor, const: bool) -> Tensor:
  K, N = w.in_features, w.rows[0]
  xq, sx = x_parts(x)
  T, nb = xq.shape[0], K // 32
  dots = (xq.reshape(T, 1, nb, 3, 32).cast(dtypes.int32) * int8_quants(w).reshape(1, N, nb, 1, 32).cast(dtypes.int32)).sum(-1)
  if const:
    p = Tensor.arange(3)
    coef = (p == 0).where(65536, (p == 1).where(256, 1)).cast(dtypes.int32)
  else: coef = Tensor([65536, 256, 1], dtype=dtypes.int32, device=x.device)
  X = (dots * coef).sum(-1).cast(dtypes.float)
  return (X * sx.reshape(T, 1, nb) * w.parts["d"].float().reshape(1, N, nb)).sum(-1)

def product(form, l, x):
  if form in ("hand", "packed"): return l(x)
  return block_product(l.w, x, form == "blkc")

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
