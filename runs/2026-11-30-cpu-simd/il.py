# DEV=CPU python3 runs/2026-11-30-cpu-simd/il.py N K G [Opt(...) ...]: (the journal's tinygrad rows; the last variant takes the opts given)
# Q4_0 matvec on the CPU: the packed words as the apps keep them (qs[n, blk, j]) against rows interleaved by G
# (qs[n // G, blk, j, n % G]: the same word of G rows side by side), one DSL kernel each, opts given or the heuristics'.
import sys, time, numpy as np
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
import apps  # noqa
from tinygrad import Tensor, TinyJit, Device, dtypes
from tinygrad.uop.ops import UOp, Ops, KernelInfo, AxisType
from tinygrad.codegen.opt import Opt, OptOps
N, K, G = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
nb = K // 32
M23 = 8388608.0
rng = np.random.default_rng(0)
qs = rng.integers(0, 2**32, (N, nb, 4), dtype=np.uint32)
d = (rng.standard_normal((N, nb)) * 0.01).astype(np.float16)
x = rng.standard_normal(K).astype(np.float32)
sh = (np.arange(4)[None, :] * 8 + np.arange(2)[:, None] * 4)   # (h, b)
w = ((qs[:, :, None, :, None] >> sh.astype(np.uint32)[None, None, :, None, :]) & 15).astype(np.float64) - 8   # (N, nb, h, j, b)
ref = (w * d.astype(np.float64)[:, :, None, None, None] * x.reshape(nb, 2, 4, 4)[None]).sum((1, 2, 3, 4))
qs_il = np.ascontiguousarray(qs.reshape(N // G, G, nb, 4).transpose(0, 2, 3, 1))   # (N/G, nb, j, G)
def kernel(layout, opts):
  def fxn(out, xb, db, qb):
    n = UOp.range(N, 0)
    blk, j, h, b = UOp.range(nb, 1, AxisType.REDUCE), UOp.range(4, 2, AxisType.REDUCE), UOp.range(2, 3, AxisType.REDUCE), UOp.range(4, 4, AxisType.REDUCE)
    word = qb[n, blk, j] if layout == "rows" else qb[n // G, blk, j, n % G]
    q = (word >> (b * 8 + h * 4).cast(dtypes.uint32)) & 15
    v = db[n, blk].cast(dtypes.float32) * ((q | 0x4B000000).bitcast(dtypes.float32) - (M23 + 8.0))
    acc = (xb[blk * 32 + h * 16 + j * 4 + b] * v).reduce(blk, j, h, b, arg=Ops.ADD)
    return out[n].store(acc).end(n).sink(arg=KernelInfo(name=f"q4_{layout}", opts_to_apply=opts))
  return fxn
copies = 6
xt = Tensor(x).realize()
for layout, opts in [("rows", None), ("rows", (Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UNROLL, 3, 0), Opt(OptOps.UNROLL, 2, 0), Opt(OptOps.UNROLL, 1, 0), Opt(OptOps.THREAD, 0, 2))),
                     ("il", None), ("il", tuple(eval(a) for a in sys.argv[4:]) or None)]:
  src = qs if layout == "rows" else qs_il
  ws = [(Tensor(d).realize(), Tensor(src).realize()) for _ in range(copies)]
  try:
    jit = TinyJit(lambda xv: Tensor.stack(*[Tensor.empty(N).custom_kernel(xv, dd, qq, fxn=kernel(layout, opts))[0] for dd, qq in ws]).realize())
    for _ in range(3): o = jit(xt)
  except Exception as e:
    print(layout, opts, "failed:", type(e).__name__, str(e)[:200]); continue
  err = np.abs(o.numpy()[0] - ref).max() / np.abs(ref).max()
  ts = []
  for _ in range(20):
    t0 = time.perf_counter(); jit(xt); Device[Device.DEFAULT].synchronize(); ts.append((time.perf_counter() - t0) / copies)
  print(f"{layout:5s} {str(opts)[:110]:110s} {min(ts)*1e3:.3f} ms (median {np.median(ts)*1e3:.3f}) {N*nb*18/min(ts)/1e9:5.1f} GB/s relerr {err:.1e}", flush=True)
