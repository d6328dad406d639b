# fp32 products on the tensor cores: tinygrad's heuristics at ALLOW_TF32=0 (CUDA cores), 1 (one tf32 product) and 2 (three
# tf32 products, hi.hi + hi.lo + lo.hi) on the scores' shape (queries x heads over a symbolic number of 576-wide latent rows)
# and a square matmul; relative error against float64 and the median time of 5 runs.
#   DEV=CUDA python3 runs/2026-11-27-tf32x3/tc_precision.py
import time, numpy as np
from tinygrad import Tensor, UOp, TinyJit, Device
from tinygrad.helpers import Context
rng = np.random.default_rng(0)
T, H, C, N = 512, 16, 576, 4608
qn, cn = rng.standard_normal((T, H, C)).astype(np.float32), rng.standard_normal((N, C)).astype(np.float32)
an, bn = rng.standard_normal((2048, 2048)).astype(np.float32), rng.standard_normal((2048, 2048)).astype(np.float32)
q, cache, a, b = [Tensor(x).realize() for x in (qn, cn, an, bn)]
v = UOp.variable("S", 1, N)
for tf32 in (0, 1, 2):
  with Context(ALLOW_TF32=tf32):
    out = Tensor.zeros(H, T, N).contiguous().realize()
    @TinyJit
    def f(s): out[:, :, :s].assign(q.transpose(0, 1) @ cache[:s].T).realize()
    for s in (512, 1000):
      for _ in range(3): f(v.bind(s))
      ts = []
      for _ in range(5):
        Device[Device.DEFAULT].synchronize(); t0 = time.perf_counter(); f(v.bind(s)); Device[Device.DEFAULT].synchronize()
        ts.append(time.perf_counter() - t0)
      got = out.numpy()[:, :, :s]
      ref = np.einsum("thc,sc->hts", qn.astype(np.float64), cn[:s].astype(np.float64))
      err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
      print(f"ALLOW_TF32={tf32} scores S={s:5d}: rel L2 {err:.2e}  max {np.abs(got-ref).max()/np.abs(ref).max():.2e}  "
            f"{np.median(ts)*1e3:.3f} ms  {2*T*H*C*s/np.median(ts)/1e12:.1f} TFLOPS")
    ts = []
    for _ in range(6):
      Device[Device.DEFAULT].synchronize(); t0 = time.perf_counter(); c = (a @ b).realize(); Device[Device.DEFAULT].synchronize()
      ts.append(time.perf_counter() - t0)
    ref = an.astype(np.float64) @ bn.astype(np.float64)
    err = np.linalg.norm(c.numpy() - ref) / np.linalg.norm(ref)
    print(f"ALLOW_TF32={tf32} matmul 2048^3: rel L2 {err:.2e}  {np.median(ts[1:])*1e3:.3f} ms  {2*2048**3/np.median(ts[1:])/1e12:.1f} TFLOPS")
