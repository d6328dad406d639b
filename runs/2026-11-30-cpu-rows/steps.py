"""A batched decode step of B sequences (Transformer.step, slots of one cache) on this machine, B = 1, 2, 4, 8: ms a step,
best of 3 x 20 after 3 warm-up steps, each sequence after a 6-token prompt; then a 199-token prompt's prefill (Transformer.start:
chunks of 128, 32, 32, 32 with the last one's sampling), best of 3 after a first one.   python3 steps.py PRESET"""
import sys, time
import apps  # noqa: F401  (tinygrad from upstream/)
from apps import synth
from apps.model import Transformer
m = Transformer.from_gguf(synth.generate(sys.argv[1], "release", progress=False), max_context=1024, slots=8)
for s in range(8):
  for _ in m.start(s, [1, 2, 3, 4, 5 + s]): pass
for B in (1, 2, 4, 8):
  sl = list(range(B))
  for _ in range(3): m.step(sl)
  best = 1e9
  for _ in range(3):
    t = time.perf_counter()
    for _ in range(20): m.step(sl)
    best = min(best, (time.perf_counter() - t) / 20)
  print(f"{sys.argv[1]} B={B}: {best * 1e3:.2f} ms a step, {B / best:.0f} tok/s", flush=True)
ids, best = list(range(1, 200)), []
for r in range(4):
  m.reset(0)
  t = time.perf_counter()
  for _ in m.start(0, ids): pass
  best.append(time.perf_counter() - t)
print(f"{sys.argv[1]} prefill of 199 tokens: {min(best[1:]) * 1e3:.1f} ms", flush=True)
