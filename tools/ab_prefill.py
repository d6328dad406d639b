"""A/B of the prefill GEMM (apps/kernels/gemm.py) against the portable kernels on one loaded model: apps/dispatch.py's
providers with and without the GEMM's, the kernel cache and the model's captures are dropped, and the prompt
is prefilled three times (the first compiles and captures; the best of the other two counts, as in gpu_bench).

  DEV=CUDA python3 -m tools.ab_prefill [--presets youtu-llm-2b,deepseek-v2-lite] [--prefill 512] [--rounds 2]
  DEV=CUDA python3 -m tools.ab_prefill --a ab/A/gemm.py ...   (A: that version of apps/kernels/gemm.py, B: the checked-out one)
  DEV=CUDA python3 -m tools.ab_prefill --a ab/A/mla_attention.py --module mla_attention ...   (another kernel module)
  DEV=CUDA python3 -m tools.ab_prefill --chunks 128,512+128 ...  (the variants: prefill chunk lengths, + between a variant's)
  DEV=CUDA python3 -m tools.ab_prefill --off trigger ...      (A: those tools/ab_fusions.py fusions off, B: as checked out)

Prints tok/s per variant and round, and the first generated token (the two variants should agree on it); then per
preset the variants' medians and their difference against the first variant's, next to its rounds' spread.
"""
from __future__ import annotations
import argparse, contextlib, sys, time
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
import apps  # noqa: F401
import numpy as np
from tinygrad import Device
import apps.dispatch as D
from apps import synth
from apps.model import Transformer
from tools.ab_kernel import load_variant, swapped
from tools.ab_fusions import fusions_off, FUSIONS

def use(model: Transformer, providers: list) -> None:
  D._PROVIDERS[:] = providers
  D.kernel_cached.cache_clear()
  model.drop_captures()

def prefill(model: Transformer, prompt: list[int]) -> tuple[float, float, int]:
  """(compile + first run s, best of two warm runs s, the first generated token)"""
  times, first = [], None
  for _ in range(3):
    model.reset()
    t0 = time.perf_counter()
    first = next(model.generate(prompt, 1))
    times.append(time.perf_counter() - t0)
  return times[0], min(times[1:]), first

def summary(preset: str, ms: dict[str, list[float]]) -> list[str]:
  """Per variant the median, min and max of its rounds (ms); then each variant's median against the first one's, with the
  first's rounds' spread as the yardstick (half its max - min: a difference smaller than that is within the rounds; with
  fewer than three rounds there is no spread to judge by)."""
  out = [f"{preset} summary {label:8s}: median {np.median(v):.2f} ms, min {min(v):.2f}, max {max(v):.2f} over {len(v)} rounds"
         for label, v in ms.items()]
  (first, base), *rest = ms.items()
  half = (max(base) - min(base)) / 2
  for label, v in rest:
    d = np.median(v) / np.median(base) - 1
    judged = f"{'within' if abs(d) * np.median(base) <= half else 'past'} half the spread of {first}'s rounds, " \
             f"{half / np.median(base) * 100:.1f}%" if len(base) >= 3 else "too few rounds to judge the spread"
    out.append(f"{preset} summary {label} / {first}: {d * 100:+.1f}% in medians ({judged})")
  return out

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--presets", default="youtu-llm-2b,deepseek-v2-lite")
  ap.add_argument("--prefill", type=int, default=512)
  ap.add_argument("--rounds", type=int, default=2)
  ap.add_argument("--a", type=Path, help="variant A of apps/kernels/gemm.py: A/B it against the checked-out GEMM instead")
  ap.add_argument("--module", default="gemm", help="with --a: the apps.kernels module it replaces (default gemm)")
  ap.add_argument("--chunks", help="comma list of variants, each its prefill chunk lengths joined by + (e.g. 128,512+128): A/B them instead")
  ap.add_argument("--off", help="comma list of tools/ab_fusions.py fusions variant A turns off: A/B that instead")
  a = ap.parse_args(argv)
  if sum(x is not None for x in (a.a, a.chunks, a.off)) > 1: ap.error("--a, --chunks and --off are three different A/Bs: one at a time")
  if a.a is not None and not a.a.is_file(): ap.error(f"--a {a.a}: no such file")
  try: chunks = [tuple(int(n) for n in v.split("+")) for v in a.chunks.split(",")] if a.chunks else []
  except ValueError: ap.error(f"--chunks {a.chunks}: variants of lengths joined by +, separated by commas")
  if a.chunks and any(n < 1 for c in chunks for n in c): ap.error(f"--chunks {a.chunks}: lengths are positive")
  if a.off and set(a.off.split(",")) - set(FUSIONS): ap.error(f"--off {a.off}: fusions are {', '.join(FUSIONS)}")
  before = list(D._PROVIDERS)
  base = [p for p in before if p is not D._source_gemm]
  gemm = [D._source_gemm] + base
  # (label, kernel providers, context, prefill chunk lengths or None: the model's own)
  variants = [(f"chunks {'+'.join(map(str, c))}", gemm, contextlib.nullcontext, c) for c in chunks] if a.chunks else \
             [("A", gemm, lambda: fusions_off(set(a.off.split(","))), None), ("B", gemm, contextlib.nullcontext, None)] if a.off else \
             [("portable", base, contextlib.nullcontext, None), ("gemm", gemm, contextlib.nullcontext, None)] if a.a is None else \
             [("A", gemm, lambda mod=load_variant(a.a, a.module): swapped(a.module, mod), None), ("B", gemm, contextlib.nullcontext, None)]
  for preset in a.presets.split(","):
    model = Transformer.from_gguf(synth.generate(preset, "release", progress=False), max_context=a.prefill + 64)
    prompt = np.random.default_rng(0).integers(0, 100000, a.prefill).tolist()
    ms: dict[str, list[float]] = {label: [] for label, *_ in variants}
    for r in range(a.rounds):
      for label, providers, context, chunk in variants:
        with context():
          if chunk is not None: model.set_prefill_chunks(*chunk)
          use(model, providers)
          cold, warm, first = prefill(model, prompt)
        ms[label].append(warm * 1e3)
        print(f"{preset} on {Device.DEFAULT} round {r + 1} {label:8s}: prefill {a.prefill} tokens {warm * 1e3:.1f} ms "
              f"({a.prefill / warm:.0f} tok/s), first run {cold:.1f} s, first token {first}", flush=True)
    print("\n".join(summary(preset, ms)), flush=True)
    use(model, before)
    del model
  return 0

if __name__ == "__main__": sys.exit(main())
