# scores q.k over a symbolic number of cached keys, on tensor cores (emulated: DEV=PYTHON::sm_80), against numpy
import numpy as np
from tinygrad import Tensor, UOp, TinyJit
rng = np.random.default_rng(0)
T, H, C, N = 16, 2, 32, 64
qn, cn = rng.standard_normal((T, H, C)).astype(np.float32), rng.standard_normal((N, C)).astype(np.float32)
q, cache = Tensor(qn).realize(), Tensor(cn).realize()
v = UOp.variable("S", 1, N)
out = Tensor.zeros(H, T, N).contiguous().realize()
@TinyJit
def f(s): out[:, :, :s].assign(q.transpose(0, 1) @ cache[:s].T).realize()
for s in (5, 17, 40, 64, 9):
  f(v.bind(s)); got = out.numpy()
  ref = np.einsum("thc,sc->hts", qn.astype(np.float64), cn[:s].astype(np.float64))
  err = np.abs(got[:, :, :s] - ref).max() / np.abs(ref).max()
  print(s, got.shape, f"{err:.2e}")
  assert err < 1e-5, err
print("ok")
