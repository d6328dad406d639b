SHARED_ROW_UPCAST = SM90_OPTS + """
# attention's scores at one query: every head's query against one key row, q (16, 576) @ keys (s, 576).T over the s keys
# cached so far. GROUPTOP splits the 576-long reduction; the key row is the same for all 16 heads, so a thread takes four
# heads and loads each key element once for them
import numpy as np
from tinygrad import Tensor, TinyJit, UOp
s = UOp.variable("s", 1, 64)
def scores(q:Tensor, keys:Tensor) -> Tensor: return q @ keys.T
opts = sm90_opts(scores(Tensor.empty(16, 576, device="NULL"), Tensor.empty(64, 576, device="NULL")[:s.bind(9)]))
assert any(o.op is OptOps.GROUPTOP for o in opts) and any(o.op is OptOps.UPCAST and o.arg == 4 for o in opts), opts
rng = np.random.default_rng(0)   # on DEV=PYTHON (GPU-style kernels with locals) against numpy, at three lengths
qd, kd = rng.standard_normal((16, 576)).astype(np.float32), rng.standard_normal((64, 576)).astype(np.float32)
q, k = Tensor(qd).realize(), Tensor(kd).realize()
@TinyJit
def f(q, k): return scores(q, k).realize()
for n in (3, 9, 5):
  np.testing.assert_allclose(f(q, k[:s.bind(n)])[:, :n].numpy(), qd @ kd[:n].T, rtol=1e-4, atol=1e-3)
print("ok")
"""

def test_0021_grouped_reduction_upcasts_the_axis_a_load_lacks(trees):
  assert_patch_needed(trees, "0021", SHARED_ROW_UPCAST, env={"DEV": "PYTHON", "CACHELEVEL": "0"})
