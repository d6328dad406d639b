"""CPU A/B of a long prefill chunk's expanded attention: the prefill of an N-token prompt (chunks of 512) on a tiny preset,
A with every chunk absorbed (apps.mla.expands_latents patched to False in this process), B the checkout. One variant a
process; prints the median of `--runs` timed prefills after one warm-up.
  python3 runs/2026-11-29-expand/cpu_ab.py deepseek-v2-lite-tiny A [--tokens 1024] [--runs 3]"""
import argparse, statistics, time
import apps.mla as mla
from apps import synth
from apps.model import Transformer
from tools.path_check import window
ap = argparse.ArgumentParser()
ap.add_argument("preset"); ap.add_argument("variant", choices=("A", "B"))
ap.add_argument("--tokens", type=int, default=1024); ap.add_argument("--runs", type=int, default=3)
a = ap.parse_args()
if a.variant == "A": mla.expands_latents = lambda cfg, chunk: False
m = Transformer.from_gguf(synth.generate(a.preset, "release", progress=False), max_context=a.tokens + 64)
ids = window(m.cfg.vocab_size, a.tokens, 5)
m.reset(); m.fill(ids)
ts = []
for _ in range(a.runs):
  m.reset(); t = time.perf_counter(); m.fill(ids); ts.append(time.perf_counter() - t)
print(f"{a.preset} {a.variant} prefill {a.tokens}: {statistics.median(ts) * 1e3:.0f} ms (runs {' '.join(f'{t * 1e3:.0f}' for t in ts)}), "
      f"expands at 512: {mla.expands_latents(m.cfg, 512)}", flush=True)
