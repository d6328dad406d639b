import numpy as np, os
from tinygrad import Tensor, TinyJit, UOp
dev = os.environ.get("D", "PYTHON")
H, Tq, D, C, MAXS = 2, 16, 8, 4, 64
rng = np.random.default_rng(0)
qd = rng.standard_normal((H, Tq, D)).astype(np.float32)
kd = rng.standard_normal((MAXS, D)).astype(np.float32)
q, k = Tensor(qd, device=dev).realize(), Tensor(kd, device=dev).realize()
sp, nt = UOp.variable("start_pos", 0, MAXS - Tq), UOp.variable("n", 1, Tq)
def attn(q, k, p, n):
  S = p + n
  keys = k[0:S]
  scores = q @ keys.T
  causal = Tensor.arange(S).reshape(1, S) > (Tensor.arange(Tq) + p).reshape(Tq, 1)
  scores = causal.where(float("-inf"), scores).contiguous()
  return (scores.softmax(-1) @ keys[:, :C]).realize()
f = TinyJit(attn)
for p, n in ((0, 16), (0, 5), (0, 9), (4, 3), (0, 7)):
  got = f(q, k, sp.bind(p), nt.bind(n)).numpy()
  S = p + n
  s = qd @ kd[:S].T
  s = np.where(np.arange(S)[None, :] > (np.arange(Tq) + p)[:, None], -np.inf, s)
  e = np.exp(s - s.max(-1, keepdims=True)); w = e / e.sum(-1, keepdims=True)
  want = w @ kd[:S, :C]
  print(p, n, np.abs(got[:, :n] - want[:, :n]).max())
