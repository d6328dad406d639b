"""A prefill chunk's attention on the CPU: tinygrad's generated kernels (apps.mla.latent_attention, what the chunk ran) against
the hand-written kernel (apps/kernels/cpu.py mla_prefill_attention), each captured in a TinyJit and replayed; full-size
shapes (n_head, kv_lora, rope), chunks of T tokens at position P. ms a call, the better of 5 replays, A B A B.
  DEV=CPU ./run python runs/2026-12-01-gen/cpu/prefill_attention.py"""
import time, numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, TinyJit
from apps.kernels import mla_attention
from apps.mla import latent_attention

def timed(step, *args) -> float:
  for _ in range(2): step(*args)
  best = float("inf")
  for _ in range(5):
    t = time.perf_counter(); step(*args).numpy(); best = min(best, time.perf_counter() - t)
  return best * 1e3

rng = np.random.default_rng(0)
for name, H, L, R in (("youtu-llm-2b / deepseek-v2-lite", 16, 512, 64), ("glm-4.7-flash", 20, 512, 64)):
  for T, P in ((32, 0), (128, 0), (128, 384)):
    ctx = 1024
    cache = Tensor(rng.standard_normal((ctx, L + R)).astype(np.float32)).realize()
    pos = Tensor(np.array([P, 0], np.int32)).realize()
    q, q_pe = (Tensor(rng.standard_normal((T, H, d)).astype(np.float32)).realize() for d in (L, R))
    gen = TinyJit(lambda q, q_pe: latent_attention(q.cat(q_pe, dim=-1), cache, P, L, 0.1).realize())
    hand = TinyJit(lambda q, q_pe: mla_attention.mla_prefill_attention(q, q_pe, cache, pos, kv_lora=L, qk_rope=R, scale=0.1,
                                                                       max_context=ctx).realize())
    rows = {"generated": [], "hand-written": []}
    for _ in range(2):
      rows["generated"].append(timed(gen, q, q_pe))
      rows["hand-written"].append(timed(hand, q, q_pe))
    flops = 2 * H * T * (P + (T + 1) / 2) * (L + R + L)   # the causal pairs' q.k and p.v
    g, h = min(rows["generated"]), min(rows["hand-written"])
    print(f"{name:32s} T {T:4d} at {P:4d}: generated {g:7.2f} ms ({flops / g / 1e6:5.1f} GFLOPS), hand-written {h:7.2f} ms "
          f"({flops / h / 1e6:5.1f} GFLOPS), {g / h:.2f}x")
