# a block-scaled product of packed 4-bit weights (weight k of a block: nibble k // 16 of byte k % 16, so the split of index k
# at its packing leaves the block's int32 sum two reduce ranges, 2 x 16) takes the int8 tensor cores at TC_OPT=0: lowered and
# compiled for sm_90 without a GPU, its source has the s8 mma; run on the sm_80 emulator it equals numpy's float64 product
import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.renderer.cstyle import CUDARenderer
from tinygrad.helpers import Target
from tinygrad.codegen import to_program
T, N, B = 64, 16, 4
def prod(xq, wp, sx, sw):
  q = ((wp.reshape(N, B, 1, 16) >> (Tensor.arange(2) * 4).cast(dtypes.uint8).reshape(1, 1, 2, 1)) & 15).cast(dtypes.int8) - 8
  dots = (xq.reshape(T, 1, B, 32).cast(dtypes.int32) * q.reshape(1, N, B, 32).cast(dtypes.int32)).sum(-1)
  return (dots.cast(dtypes.float) * sx.reshape(T, 1, B) * sw.reshape(1, N, B)).sum(-1)
e = lambda *s, dt=dtypes.int8: Tensor.empty(*s, dtype=dt, device="NULL")
ast = prod(e(T, B, 32), e(N, B, 16, dt=dtypes.uint8), e(T, B, dt=dtypes.float), e(N, B, dt=dtypes.float)).schedule_linear().src[-1].src[0]
src = to_program(ast, CUDARenderer(Target(device="CUDA", arch="sm_90"), use_nvcc=True)).src[2].arg
assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in src, src
rng = np.random.default_rng(0)
xq, wp = rng.integers(-128, 128, (T, B, 32), dtype=np.int8), rng.integers(0, 256, (N, B, 16), dtype=np.uint8)
sx, sw = rng.random((T, B), dtype=np.float32), rng.random((N, B), dtype=np.float32)
got = prod(Tensor(xq), Tensor(wp), Tensor(sx), Tensor(sw)).numpy()
wq = np.concatenate([wp & 15, wp >> 4], -1).astype(np.float64) - 8
ref = np.einsum("tbk,nbk,tb,nb->tn", xq.astype(np.float64), wq, sx.astype(np.float64), sw.astype(np.float64))
assert np.abs(got - ref).max() / np.abs(ref).max() < 1e-6, np.abs(got - ref).max()
print("ok")
