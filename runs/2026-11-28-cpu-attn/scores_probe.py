import time, numpy as np
from tinygrad import Tensor, Variable, Context
from tinygrad.engine.jit import TinyJit
rng = np.random.default_rng(0)
H, Q, D, LM = 4, 32, 288, 512
q = Tensor(rng.standard_normal((H, Q, D)).astype(np.float32)).realize()
c = Tensor(rng.standard_normal((LM, D)).astype(np.float32)).realize()
v = Tensor(rng.standard_normal((LM, 256)).astype(np.float32)).realize()
@TinyJit
def f(q, L):
  s = (q @ c[:L].T).contiguous()
  return (s @ v[:L]).realize()
for i in range(6):
  L = Variable("L", 1, LM).bind(160)
  t = time.perf_counter(); out = f(q, L); out.numpy(); dt = time.perf_counter() - t
print("ms %.2f" % (dt * 1e3))
ref = (q.numpy() @ c.numpy()[:160].T) @ v.numpy()[:160]
print("err", np.abs(out.numpy()[:, :, :] - ref).max() / np.abs(ref).max())
