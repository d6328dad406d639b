# The test that went with scores_rule.patch (rejected), in test/test_patches.py's style: SM90_OPTS there + this, run by
# assert_patch_needed(trees, "<its number>", CHUNK_SCORES_GROUPED, env={"DEV": "PYTHON"}) (~30 s on DEV=PYTHON).
CHUNK_SCORES_GROUPED = """
# attention scores of a chunk of queries against the keys so far, s[h, t, j] = sum_d q[h, t, d] k[j, d] over a symbolic number of
# keys j: 16 lanes split the 576-long rows (both read coalesced) and a thread computes all 16 heads of a key (its row read once)
import numpy as np
from tinygrad import Tensor, UOp

n = UOp.variable("n", 1, 512).bind(100)
opts = sm90_opts(Tensor.empty(16, 512, 576, device="NULL") @ Tensor.empty(512, 576, device="NULL")[:n].T)
assert Opt(OptOps.GROUP, 0, 16) in opts and Opt(OptOps.UPCAST, 0, 16) in opts, opts

# the rule on a GPU-style device (PYTHON runs kernels with locals): 4 heads x 528 queries (more outputs than tinygrad's
# grouping threshold) over rows of 256, at two lengths
rng = np.random.default_rng(0)
qd, kd = rng.standard_normal((4, 528, 256)).astype(np.float32), rng.standard_normal((8, 256)).astype(np.float32)
q, k, m = Tensor(qd).realize(), Tensor(kd).realize(), UOp.variable("n", 1, 8)
for s in (1, 3):
  out = Tensor.empty(4, 528, 8).contiguous().realize()
  got = Tensor(out.uop.after(out[:, :, :m.bind(s)].uop.store((q @ k[:m.bind(s)].T).uop))).realize().numpy()[:, :, :s]
  np.testing.assert_allclose(got, qd @ kd[:s].T, rtol=1e-4, atol=1e-4)
print("ok")
"""
