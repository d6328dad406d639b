"""A/B in one process: each preset's model loaded once, the variants set on it in turn through the switches the model
takes (Transformer.set_kernel_modules, set_fusions, set_prefill_chunks), each variant's steps captured anew and timed
interleaved (A B A B ...), as gpu_bench times them. One subcommand per kind of A/B:

  DEV=CUDA python3 -m tools.ab kernel --a ab/A/matvec.py [--module matvec] [--decode 64]    another version of a kernel module
  DEV=CUDA python3 -m tools.ab prefill [--prefill 512]                      the prefill GEMM against the portable kernels
  DEV=CUDA python3 -m tools.ab prefill --a ab/A/gemm.py [--module gemm]     ... or another version of a kernel module
  DEV=CUDA python3 -m tools.ab prefill --chunks 128,512+128                 ... or prefill chunk lengths
  DEV=CUDA python3 -m tools.ab prefill --off trigger                        ... or fusions off
  DEV=CUDA python3 -m tools.ab fusions --off stack_q [--decode 64]          decode with fusions off
  DEV=CUDA python3 -m tools.ab readahead [--decode 64]                      decode one step ahead against in order

Every subcommand takes --presets (default youtu-llm-2b,deepseek-v2-lite) and --rounds (default 2); `python3 -m tools.ab
<subcommand> --help` says what it prints.
"""
from __future__ import annotations
import argparse, importlib.util, sys, time
from dataclasses import replace
from pathlib import Path
from typing import Callable
import apps  # noqa: F401
import numpy as np
from tinygrad import Device
from apps import synth
from apps.kernels import FUSIONS, KERNEL_FAMILIES, Fusions, KernelModules
from apps.model import Transformer

# a variant: (label, the model it runs on, what sets it on that model; the model's setters redo its captures)
Variant = tuple[str, Transformer, Callable[[], None]]

# ---------------------------------------------------------------- decode: steady ms per token, variants interleaved

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

def interleave(preset: str, variants: list[Variant], rounds: int, decode: int) -> None:
  """Decode A/B of variants in rounds A B A B ...: each variant is set on its model and its steps captured anew, then
  timed; prints ms per token per round and whether the first two generate the same tokens."""
  ids = np.random.default_rng(0).integers(0, 100000, 16).tolist()
  toks = {}
  for r in range(rounds):
    for label, model, setup in variants:
      setup()
      model.drop_captures()
      per_token_ms(model, ids, 4)  # compile and capture with this variant
      ms, _, toks[label] = per_token_ms(model, ids, decode)
      print(f"{preset} on {Device.DEFAULT} round {r + 1} {label}: median {ms:.3f} ms/token ({1e3 / ms:.1f} tok/s)", flush=True)
  (a, ta), (b, tb) = list(toks.items())[:2]
  print(f"{preset}: greedy tokens {a} vs {b}: {sum(x == y for x, y in zip(ta, tb))}/{len(tb)} the same", flush=True)

def load(preset: str, max_context: int, **kw) -> Transformer:
  return Transformer.from_gguf(synth.generate(preset, "release", progress=False), max_context=max_context, **kw)

# ---------------------------------------------------------------- kernel modules and fusions: what variant A sets

def load_variant(path: Path, name: str):
  """The module at `path`, imported as apps.kernels._ab_<name> (its absolute imports resolve as the checked-out module's
  do; registered under that new name, which dataclasses look their module up by, and nothing else replaced)."""
  spec = importlib.util.spec_from_file_location(f"apps.kernels._ab_{name}", path)
  if spec is None or spec.loader is None: raise SystemExit(f"error: cannot import {path}")
  mod = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = mod
  spec.loader.exec_module(mod)
  return mod

def module_variants(model: Transformer, name: str, variant) -> list[Variant]:
  """A: the model's kernels of family `name` built from `variant`, B: from the checked-out modules."""
  return [("A", model, lambda: model.set_kernel_modules(replace(KernelModules(), **{name: variant}))),
          ("B", model, lambda: model.set_kernel_modules(KernelModules()))]

def fusion_variants(model_b: Transformer, fusions: Fusions, load_a: Callable[..., Transformer]) -> list[Variant]:
  """A: `fusions`, on B's model where the model can switch to them (Transformer.set_fusions), else on a model loaded with
  them (stack_q off where a direct attn_q then loads apart from kv_a: its own weights); B: every fusion, on B's model."""
  try:
    model_b.set_fusions(fusions)
    model_a = model_b
  except ValueError: model_a = load_a(fusions=fusions)
  return [("A", model_a, lambda: model_a.set_fusions(fusions)), ("B", model_b, lambda: model_b.set_fusions(Fusions()))]

def gemm_variants(model: Transformer) -> list[Variant]:
  """portable: the model's prefill products without the GEMM (the portable kernels), gemm: with it."""
  return [("portable", model, lambda: model.set_kernel_modules(KernelModules(gemm=None))),
          ("gemm", model, lambda: model.set_kernel_modules(KernelModules()))]

def chunk_variants(model: Transformer, chunks: list[tuple[int, ...]]) -> list[Variant]:
  """One variant per set of prefill chunk lengths."""
  return [(f"chunks {'+'.join(map(str, c))}", model, lambda c=c: model.set_prefill_chunks(*c)) for c in chunks]

def parse_off(sub: argparse.ArgumentParser, off: str) -> Fusions:
  try: return Fusions().without(*off.split(","))
  except ValueError as e: sub.error(f"--off {off}: {e}")

# ---------------------------------------------------------------- prefill: best of two warm runs, variants interleaved

def prefill_s(model: Transformer, prompt: list[int]) -> tuple[float, float, int]:
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

# ---------------------------------------------------------------- the subcommands

KERNEL = """A/B of a kernel file on one loaded model: variant A is another version of an apps/kernels module (a file path, e.g.
`git show HEAD~1:apps/kernels/matvec.py > ab/A/matvec.py`), B the module as checked out. For each variant the model's
kernel modules (apps.kernels.KernelModules, Transformer.set_kernel_modules) name that module for its family, so the seam
and the blocks build those kernels from it; the model's captures are redone, and generate()'s steady decode is timed as
gpu_bench times it (median ms per token). One load per model instead of one per variant and process: on the H100 a
model's load and synthesis cost more than the decode runs of both variants.

Prints ms per token per variant and round (order A B A B ...) and the greedy tokens' agreement between the variants."""

def kernel(a, sub) -> int:
  if not a.a.is_file(): sub.error(f"--a {a.a}: no such file")
  variant = load_variant(a.a, a.module)
  for preset in a.presets.split(","):
    model = load(preset, a.decode + 96)
    interleave(preset, module_variants(model, a.module, variant), a.rounds, a.decode)
    del model
  return 0

PREFILL = """A/B of the prefill GEMM (apps/kernels/gemm.py) against the portable kernels on one loaded model: the model's kernel
modules with and without the GEMM (apps.kernels.KernelModules(gemm=None): the portable kernels serve its products), the
model's captures redone for each, and the prompt prefilled three times (the first compiles and captures; the best of the
other two counts, as in gpu_bench). Instead: --a FILE, that version of an apps/kernels module (--module, default gemm) as
A and the checked-out one as B; --chunks, variants of prefill chunk lengths; --off, A with those fusions off (as the
fusions subcommand sets them) and B with all of them.

Prints tok/s per variant and round, and the first generated token (the two variants should agree on it); then per
preset the variants' medians and their difference against the first variant's, next to its rounds' spread."""

def prefill(a, sub) -> int:
  if sum(x is not None for x in (a.a, a.chunks, a.off)) > 1: sub.error("--a, --chunks and --off are three different A/Bs: one at a time")
  if a.a is not None and not a.a.is_file(): sub.error(f"--a {a.a}: no such file")
  try: chunks = [tuple(int(n) for n in v.split("+")) for v in a.chunks.split(",")] if a.chunks else []
  except ValueError: sub.error(f"--chunks {a.chunks}: variants of lengths joined by +, separated by commas")
  if a.chunks and any(n < 1 for c in chunks for n in c): sub.error(f"--chunks {a.chunks}: lengths are positive")
  off = parse_off(sub, a.off) if a.off else None
  variant = load_variant(a.a, a.module) if a.a is not None else None
  for preset in a.presets.split(","):
    model = load(preset, a.prefill + 64)
    variants = chunk_variants(model, chunks) if chunks else \
               fusion_variants(model, off, lambda **kw: load(preset, a.prefill + 64, **kw)) if off is not None else \
               module_variants(model, a.module, variant) if variant is not None else gemm_variants(model)
    prompt = np.random.default_rng(0).integers(0, 100000, a.prefill).tolist()
    ms: dict[str, list[float]] = {label: [] for label, *_ in variants}
    for r in range(a.rounds):
      for label, m, setup in variants:
        setup()
        m.drop_captures()
        cold, warm, first = prefill_s(m, prompt)
        ms[label].append(warm * 1e3)
        print(f"{preset} on {Device.DEFAULT} round {r + 1} {label:8s}: prefill {a.prefill} tokens {warm * 1e3:.1f} ms "
              f"({a.prefill / warm:.0f} tok/s), first run {cold:.1f} s, first token {first}", flush=True)
    print("\n".join(summary(preset, ms)), flush=True)
    del model, variants
  return 0

FUSIONS_DOC = """A/B of decode fusions in one process: variant A turns the named fusions off, B runs all of them (apps.kernels.Fusions:
the switches the model takes, Transformer.from_gguf(..., fusions=...) and set_fusions). Both are timed as gpu_bench
times decode (generate()'s steady tokens, median ms per token), interleaved A B A B.

Fusions (what A runs instead):
  stack_q      a direct attn_q and attn_kv_a_mqa as two matvecs instead of one stacked [q; kv_a] (DeepSeek-V2-Lite: a
               second model is loaded for A, with its own weights)
  side_by_side the shared expert's gate_up and the routed experts' gate_up as two kernels instead of one launch
  sum          the routed experts' down (+ mix + residual) and the shared expert's down as two kernels instead of one sum
  trigger      no GRID_TRIGGER() at the top of the hand-written kernels (dependents launch as a kernel's workgroups exit)
  slices       (prefill) a kernel's output sliced to a symbolic chunk length is padded back to the bound by a copy for the next
               kernel, instead of that kernel reading the unsliced output (apps.kernels.to_bound)
A fusion that changes the kernels of a step rather than the weights is set on the same model before A's steps are
captured (the journal has two measured that way, the combine folded into v_b and a one-kernel router matvec + routing,
and rejected them: OPTIMIZATION_JOURNAL.md).
Prints ms per token per variant and round and the greedy tokens' agreement between the variants."""

def fusions(a, sub) -> int:
  off = parse_off(sub, a.off)
  for preset in a.presets.split(","):
    model_b = load(preset, a.decode + 96)
    variants = fusion_variants(model_b, off, lambda **kw: load(preset, a.decode + 96, **kw))
    interleave(preset, variants, a.rounds, a.decode)
    del model_b, variants
  return 0

READAHEAD = """A/B of generate()'s one-step-ahead decode (apps/readback.py) on one loaded model: `ahead` is the default loop, `in order`
the same loop with the readback forced out of queue order (read the token, then queue the next step: the loop before).

Per round and order: median and mean ms per token over steady decode steps (the first 4 tokens dropped), as gpu_bench
times them (the generator's own pace, consumer included)."""

def readahead(a, sub) -> int:
  for preset in a.presets.split(","):
    model = load(preset, a.decode + 96)
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

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python3 -m tools.ab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  common = argparse.ArgumentParser(add_help=False)
  common.add_argument("--presets", default="youtu-llm-2b,deepseek-v2-lite", help="comma list of synthetic presets (release mix)")
  common.add_argument("--rounds", type=int, default=2, help="rounds of the variants (default 2)")
  decode = argparse.ArgumentParser(add_help=False, parents=[common])
  decode.add_argument("--decode", type=int, default=64, help="decode steps timed per variant and round (default 64)")
  subs = ap.add_subparsers(dest="command", required=True, metavar="{kernel,prefill,fusions,readahead}")
  def sub(name: str, what: str, doc: str, parent: argparse.ArgumentParser, run) -> argparse.ArgumentParser:
    p = subs.add_parser(name, parents=[parent], help=what, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(run=lambda a: run(a, p))
    return p
  def variant_file(p: argparse.ArgumentParser, module: str, required: bool, what: str) -> None:
    p.add_argument("--a", type=Path, required=required, help=f"variant A of the module (a .py file){what}")
    p.add_argument("--module", default=module, choices=KERNEL_FAMILIES, help=f"the apps.kernels module --a replaces (default {module})")
  variant_file(sub("kernel", "decode with another version of a kernel module", KERNEL, decode, kernel), "matvec", True, "")
  p = sub("prefill", "prefill: the GEMM against the portable kernels, a kernel module, chunk lengths or fusions", PREFILL, common, prefill)
  p.add_argument("--prefill", type=int, default=512, help="prompt tokens (default 512)")
  variant_file(p, "gemm", False, ": A/B it against the checked-out module instead")
  p.add_argument("--chunks", help="comma list of variants, each its prefill chunk lengths joined by + (e.g. 128,512+128): A/B them instead")
  p.add_argument("--off", help=f"comma list of fusions variant A turns off ({', '.join(FUSIONS)}): A/B that instead")
  f = sub("fusions", "decode with fusions off", FUSIONS_DOC, decode, fusions)
  f.add_argument("--off", required=True, help=f"comma list of fusions variant A turns off ({', '.join(FUSIONS)})")
  sub("readahead", "decode one step ahead against in order", READAHEAD, decode, readahead)
  a = ap.parse_args(argv)
  return a.run(a)

if __name__ == "__main__": sys.exit(main())
