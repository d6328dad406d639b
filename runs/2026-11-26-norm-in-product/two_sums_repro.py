"""tinygrad 0.14 (the patched tree too): two sums over the same ranges in one custom kernel, each of a Q6_K-style product of a
4-bit field and an 8-bit scale unpacked from uint32 words, raise KeyError in codegen's "add control flow" (NOOPT=1 too). One
sum alone, or either factor alone, compiles and runs. Run from the repo root: DEV=CPU python3 runs/2026-11-26-norm-in-product/two_sums_repro.py"""
import sys; sys.path.insert(0, "upstream")
import numpy as np
from tinygrad import Tensor, UOp, dtypes
from tinygrad.uop.ops import KernelInfo, AxisType, Ops
N, I = 4, (2, 2, 4, 4)
def kern(out: UOp, x: UOp, w: UOp) -> UOp:
  n = UOp.range(N, 0)
  R = UOp.range(4, 1, AxisType.REDUCE)
  s4h, s4l, lw, b = [UOp.range(s, 2 + i, AxisType.REDUCE) for i, s in enumerate(I)]
  i, lh = R // 2, R - (R // 2) * 2
  k = i * 128 + s4h * 64 + s4l * 32 + lh * 16 + lw * 4 + b
  def val(row):
    word = w[row, i * 16 + s4l * 8 + lh * 4 + lw]
    q = (word >> (b * 8 + s4h * 4).cast(dtypes.uint32)) & 15
    sc = (w[row, 32 + i * 2 + s4h] >> (s4l * 16 + lh * 8).cast(dtypes.uint32)) & 255
    return q.cast(dtypes.float32) * sc.cast(dtypes.float32)
  g = (x[k] * val(n)).reduce(R, s4h, s4l, lw, b, arg=Ops.ADD)
  u = (x[k] * val(n + N)).reduce(R, s4h, s4l, lw, b, arg=Ops.ADD)
  return out[n].store(g * u).end(n).sink(arg=KernelInfo(name="two_sums"))
rng = np.random.default_rng(0)
xd, wd = rng.random(256).astype(np.float32), rng.integers(0, 2**32, (2 * N, 40), dtype=np.uint32)
o = Tensor.empty(N).custom_kernel(Tensor(xd), Tensor(wd), fxn=kern)[0]
print(o.numpy()[:2])
