"""The flash branch's tensor ops on the CPU at GLM-4.7-Flash's shape, against float64 on random data: the expansion
(apps/mla.py expand_per_head) of S latent rows, and the stand-in causal attention of flash_form_on_cpu.py over them.
  PYTHONPATH=.:upstream DEV=CPU python3 runs/2026-12-01-gen/cpu/flash_branch_ops_cpu.py H KV NOPE R DV S"""
import sys, math
import numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, dtypes
from apps.mla import heads_side_by_side, expand_per_head
H, KV, NOPE, R, DV, S = (int(a) for a in sys.argv[1:7])
rng = np.random.default_rng(0)
rows, k_b, v_b = rng.standard_normal((S, KV + R)), rng.standard_normal((H, KV, NOPE)) / 16, rng.standard_normal((H, DV, KV)) / 16
q = rng.standard_normal((S, H, NOPE + R))
w_k, w_v = heads_side_by_side(Tensor(k_b.astype(np.float32)), Tensor(v_b.astype(np.float32)))
keys, values = expand_per_head(Tensor(rows.astype(np.float32)), w_k, w_v, H, R)
keys, values = keys.realize(), values.realize()
want_k = np.concatenate([np.einsum("sk,hkn->shn", rows[:, :KV], k_b), np.repeat(rows[:, None, KV:], H, 1)], -1)
want_v = np.einsum("sk,hvk->shv", rows[:, :KV], v_b)
rel = lambda a, b: float(np.linalg.norm(a - b) / np.linalg.norm(b))
print(f"expansion: keys {rel(keys.numpy(), want_k):.1e}, values {rel(values.numpy(), want_v):.1e}", flush=True)
scale = 1 / math.sqrt(NOPE + R)
qt = Tensor(q.astype(np.float32))
seen = Tensor.arange(S).reshape(1, 1, S) <= Tensor.arange(S).reshape(1, S, 1)
s = seen.where(qt.permute(1, 0, 2) @ keys.permute(1, 2, 0) * scale, float("-inf"))
out = (s.softmax(-1) @ values.permute(1, 0, 2)).permute(1, 0, 2).numpy()
worst = 0.0
for h in range(H):
  sc = q[:, h] @ want_k[:, h].T * scale
  sc[np.arange(S)[None, :] > np.arange(S)[:, None]] = -np.inf
  w = np.exp(sc - sc.max(-1, keepdims=True)); w /= w.sum(-1, keepdims=True)
  worst = max(worst, rel(out[:, h], w @ want_v[:, h]))
print(f"H {H} KV {KV} nope {NOPE} rope {R} dv {DV} S {S}: attention's worst head {worst:.1e}")
