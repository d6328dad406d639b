"""tinygrad 0.14 (the patched tree too; NOOPT=1 too; DEV=CPU and DEV=NULL:NVCC:sm_90 alike): codegen's "add control flow" raises
KeyError on a custom kernel holding two sums over the same three reduce ranges, one of them (R) used only through its floor
division coordinates (R // 2, R - R // 2 * 2), each sum a product of x and two fields of uint32 words of the weight, the two
sums reading rows n and n + 4 of it. Reduced from SwiGLU as two sums over Q6_K blocks. These pass: either sum alone, both
sums over the same rows (val(n) twice), R as two ranges instead of one range split by division, no `s` range, the scale's
shift by i instead of h. Run from the repo root: DEV=CPU python3 runs/2026-11-26-norm-in-product/two_sums_repro.py"""
import sys; sys.path.insert(0, "upstream")
import numpy as np
from tinygrad import Tensor, UOp, dtypes
from tinygrad.uop.ops import KernelInfo, AxisType, Ops
def kern(out, x, w):
  n = UOp.range(4, 0)
  R, s, l = UOp.range(4, 1, AxisType.REDUCE), UOp.range(2, 2, AxisType.REDUCE), UOp.range(4, 3, AxisType.REDUCE)
  i, h = R // 2, R - (R // 2) * 2     # R's two coordinates by floor division
  def val(row):
    q = w[row, i * 16 + s * 8 + h * 4 + l] & 15
    sc = (w[row, 32 + i] >> (h * 8).cast(dtypes.uint32)) & 255
    return q.cast(dtypes.float32) * sc.cast(dtypes.float32)
  xk = x[i * 128 + s * 32 + h * 16 + l * 4]
  g = (xk * val(n)).reduce(R, s, l, arg=Ops.ADD)
  u = (xk * val(n + 4)).reduce(R, s, l, arg=Ops.ADD)
  return out[n].store(g * u).end(n).sink(arg=KernelInfo(name="two_sums"))
rng = np.random.default_rng(0)
xd, wd = rng.random(256).astype(np.float32), rng.integers(0, 2**32, (8, 40), dtype=np.uint32)
print(Tensor.empty(4).custom_kernel(Tensor(xd), Tensor(wd), fxn=kern)[0].numpy())
