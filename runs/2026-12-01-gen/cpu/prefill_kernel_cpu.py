"""The CPU's prefill attention kernel (mla_prefill_attention on DEV=CPU) at a shape and chunk length against float64:
  PYTHONPATH=.:upstream DEV=CPU python3 runs/2026-12-01-gen/cpu/prefill_kernel_cpu.py H KV R T START"""
import sys, math, time
import numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, dtypes
from apps.kernels.mla_attention import mla_prefill_attention
H, KV, R, T, P = (int(a) for a in sys.argv[1:6])
S, rng = P + T, np.random.default_rng(0)
cache = rng.standard_normal((S + 8, KV + R)).astype(np.float32)
q, qpe = rng.standard_normal((T, H, KV)).astype(np.float32), rng.standard_normal((T, H, R)).astype(np.float32)
scale = 1 / math.sqrt(192 + R)
t0 = time.perf_counter()
got = mla_prefill_attention(Tensor(q), Tensor(qpe), Tensor(cache), Tensor(np.array([P, 0], np.int32)), kv_lora=KV, qk_rope=R,
                            scale=scale).numpy()
t1 = time.perf_counter()
c64 = cache.astype(np.float64)
worst = 0.0
for h in range(H):
  sc = (q[:, h].astype(np.float64) @ c64[:S, :KV].T + qpe[:, h].astype(np.float64) @ c64[:S, KV:].T) * scale
  sc[np.arange(S)[None, :] > P + np.arange(T)[:, None]] = -np.inf
  w = np.exp(sc - sc.max(-1, keepdims=True)); w /= w.sum(-1, keepdims=True)
  want = w @ c64[:S, :KV]
  worst = max(worst, float(np.linalg.norm(got[:, h] - want) / np.linalg.norm(want)))
print(f"H {H} KV {KV} R {R} T {T} start {P}: kernel {t1 - t0:.1f} s, worst head's relative L2 from float64 {worst:.2e}")
