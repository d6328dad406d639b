"""A/B of generate()'s one-step-ahead decode (apps/readback.py) on one loaded model: `ahead` is the default loop, `in order`
the same loop with the readback forced out of queue order (read the token, then queue the next step: the loop before).

  DEV=CUDA python3 -m tools.ab_readahead [--presets youtu-llm-2b,deepseek-v2-lite] [--decode 64] [--rounds 2]

Per round and order: median and mean ms per token over steady decode steps (the first 4 tokens dropped), as gpu_bench
times them (the generator's own pace, consumer included).
"""
from __future__ import annotations
import argparse, sys, time
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
import apps  # noqa: F401
import numpy as np
from tinygrad import Device
from apps import synth
from apps.model import Transformer

def per_token_ms(model: Transformer, ids: list[int], n: int) -> tuple[float, float, list[int]]:
  """(median, mean) ms per steady token (the first 4 steps, prefill and capture, dropped) and the tokens generated."""
  model.reset()
  times, toks, last = [], [], time.perf_counter()
  for t in model.generate(ids, n + 4):
    now = time.perf_counter()
    times.append(now - last)
    toks.append(t)
    last = now
  steady = np.array(times[4:]) * 1e3
  return float(np.median(steady)), float(steady.mean()), toks

def interleave(preset: str, variants, rounds: int, decode: int) -> None:
  """Decode A/B of variants (label, model, setup) in rounds A B A B ...: each variant's steps are captured anew inside
  its setup() context, then timed; prints ms per token per round and whether the first two generate the same tokens."""
  ids = np.random.default_rng(0).integers(0, 100000, 16).tolist()
  toks = {}
  for r in range(rounds):
    for label, model, setup in variants:
      with setup():
        model.drop_captures()
        per_token_ms(model, ids, 4)  # compile and capture with this variant
      ms, _, toks[label] = per_token_ms(model, ids, decode)
      print(f"{preset} on {Device.DEFAULT} round {r + 1} {label}: median {ms:.3f} ms/token ({1e3 / ms:.1f} tok/s)", flush=True)
  (a, ta), (b, tb) = list(toks.items())[:2]
  print(f"{preset}: greedy tokens {a} vs {b}: {sum(x == y for x, y in zip(ta, tb))}/{len(tb)} the same", flush=True)

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--presets", default="youtu-llm-2b,deepseek-v2-lite")
  ap.add_argument("--decode", type=int, default=64)
  ap.add_argument("--rounds", type=int, default=2)
  a = ap.parse_args(argv)
  for preset in a.presets.split(","):
    model = Transformer.from_gguf(synth.generate(preset, "release", progress=False), max_context=a.decode + 96)
    ids = np.random.default_rng(0).integers(0, 100000, 16).tolist()
    read = model._readback()
    queue_order = read.in_queue_order
    per_token_ms(model, ids, 8)  # capture
    for r in range(a.rounds):
      for label, ahead in (("in order", False), ("ahead", True)):
        read.in_queue_order = queue_order and ahead
        med, mean, _ = per_token_ms(model, ids, a.decode)
        print(f"{preset} on {Device.DEFAULT} round {r + 1} {label:8s}: median {med:.3f} ms/token ({1e3 / med:.1f} tok/s), "
              f"mean {mean:.3f} ms", flush=True)
    read.in_queue_order = queue_order
  return 0

if __name__ == "__main__": sys.exit(main())
