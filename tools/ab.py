"""A/B in one process: each preset's model loaded once, the variants' steps captured anew on it and timed interleaved
(A B A B ...), as gpu_bench times them. One subcommand per kind of A/B:

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
import argparse, contextlib, importlib, importlib.util, sys, time
from pathlib import Path
import apps  # noqa: F401
import numpy as np
from tinygrad import Device
import apps.kernels as K
from apps import synth, mla, dispatch
from apps.model import Transformer

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

def load(preset: str, max_context: int) -> Transformer:
  return Transformer.from_gguf(synth.generate(preset, "release", progress=False), max_context=max_context)

# ---------------------------------------------------------------- kernel modules

def load_variant(path: Path, name: str):
  """The module at `path`, imported under apps.kernels (its relative names resolve as the checked-out module's do)."""
  spec = importlib.util.spec_from_file_location(f"apps.kernels._ab_{name}", path)
  if spec is None or spec.loader is None: raise SystemExit(f"error: cannot import {path}")
  mod = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = mod  # dataclasses look their module up there
  spec.loader.exec_module(mod)
  return mod

def swap(name: str, mod) -> None:
  """apps.kernels.<name> is `mod` from now on, for kernels built from now on (also where an apps module imported it by
  name, as apps/mla.py does mla_attention)."""
  before = getattr(K, name, None)
  setattr(K, name, mod)
  for m in list(sys.modules.values()):
    if m is not None and m.__name__.startswith("apps.") and before is not None and getattr(m, name, None) is before: setattr(m, name, mod)
  dispatch.kernel_cached.cache_clear()

@contextlib.contextmanager
def swapped(name: str, mod):
  """Inside: apps.kernels.<name> is `mod` (the kernels built there are its)."""
  before = importlib.import_module(f"apps.kernels.{name}")  # imports it where nothing has yet (gemm: at its first product)
  swap(name, mod)
  try: yield
  finally: swap(name, before)

# ---------------------------------------------------------------- fusions

FUSIONS = ("stack_q", "side_by_side", "sum", "trigger", "slices")

def _drop_built_kernels() -> None:
  """Forget every kernel built so far (the next captures build and render them anew)."""
  from apps.kernels import matvec, mla_attention, router, gemm
  dispatch.kernel_cached.cache_clear()
  for mod in (matvec, mla_attention, router, gemm):
    for f in vars(mod).values():
      if hasattr(f, "cache_clear"): f.cache_clear()

@contextlib.contextmanager
def fusions_off(off: set[str]):
  """Inside: the named fusions are off for models loaded and steps captured there."""
  saved, saved_side, saved_sum, saved_render, saved_sliced = mla._stackable, dispatch._side_by_side, dispatch._summed, K.render, K._sliced_from
  if "stack_q" in off: mla._stackable = lambda gf, names: not any(n.endswith("attn_q.weight") for n in names) and saved(gf, names)
  if "side_by_side" in off: dispatch._side_by_side = lambda specs: None
  if "sum" in off: dispatch._summed = lambda specs: None
  if "slices" in off: K._sliced_from = lambda t, Tmax: None
  if "trigger" in off:
    K.render = lambda k, language: saved_render(k, language).replace(K.TRIGGER, "", 1)
    _drop_built_kernels()
  try: yield
  finally:
    mla._stackable, dispatch._side_by_side, dispatch._summed, K.render, K._sliced_from = saved, saved_side, saved_sum, saved_render, saved_sliced
    if "trigger" in off: _drop_built_kernels()

def parse_off(sub: argparse.ArgumentParser, off: str) -> set[str]:
  names = set(off.split(","))
  if not names or names - set(FUSIONS): sub.error(f"--off {off}: fusions are {', '.join(FUSIONS)}")
  return names

# ---------------------------------------------------------------- prefill: best of two warm runs, variants interleaved

def use(model: Transformer, providers: list) -> None:
  dispatch._PROVIDERS[:] = providers
  dispatch.kernel_cached.cache_clear()
  model.drop_captures()

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
`git show HEAD~1:apps/kernels/matvec.py > ab/A/matvec.py`), B the module as checked out. For each variant the package
attribute the seam imports at call time (`from apps.kernels import matvec`) points at that module, the kernel cache and
the model's captures are dropped, and generate()'s steady decode is timed as gpu_bench times it (median ms per token).
One load per model instead of one per variant and process: on the H100 a model's load and synthesis cost more than the
decode runs of both variants.

Prints ms per token per variant and round (order A B A B ...) and the greedy tokens' agreement between the variants."""

def kernel(a, sub) -> int:
  if not a.a.is_file(): sub.error(f"--a {a.a}: no such file")
  b_mod = importlib.import_module(f"apps.kernels.{a.module}")
  variants = (("A", load_variant(a.a, a.module)), ("B", b_mod))
  for preset in a.presets.split(","):
    model = load(preset, a.decode + 96)
    interleave(preset, [(label, model, lambda mod=mod: swapped(a.module, mod)) for label, mod in variants], a.rounds, a.decode)
    del model
  return 0

PREFILL = """A/B of the prefill GEMM (apps/kernels/gemm.py) against the portable kernels on one loaded model: apps/dispatch.py's
providers with and without the GEMM's, the kernel cache and the model's captures are dropped, and the prompt
is prefilled three times (the first compiles and captures; the best of the other two counts, as in gpu_bench). Instead:
--a FILE, that version of an apps/kernels module (--module, default gemm) as A and the checked-out one as B; --chunks,
variants of prefill chunk lengths; --off, A with those fusions off (the fusions subcommand's) and B as checked out.

Prints tok/s per variant and round, and the first generated token (the two variants should agree on it); then per
preset the variants' medians and their difference against the first variant's, next to its rounds' spread."""

def prefill(a, sub) -> int:
  if sum(x is not None for x in (a.a, a.chunks, a.off)) > 1: sub.error("--a, --chunks and --off are three different A/Bs: one at a time")
  if a.a is not None and not a.a.is_file(): sub.error(f"--a {a.a}: no such file")
  try: chunks = [tuple(int(n) for n in v.split("+")) for v in a.chunks.split(",")] if a.chunks else []
  except ValueError: sub.error(f"--chunks {a.chunks}: variants of lengths joined by +, separated by commas")
  if a.chunks and any(n < 1 for c in chunks for n in c): sub.error(f"--chunks {a.chunks}: lengths are positive")
  off = parse_off(sub, a.off) if a.off else set()
  before = list(dispatch._PROVIDERS)
  base = [p for p in before if p is not dispatch._source_gemm]
  gemm = [dispatch._source_gemm] + base
  # (label, kernel providers, context, prefill chunk lengths or None: the model's own)
  variants = [(f"chunks {'+'.join(map(str, c))}", gemm, contextlib.nullcontext, c) for c in chunks] if a.chunks else \
             [("A", gemm, lambda: fusions_off(off), None), ("B", gemm, contextlib.nullcontext, None)] if a.off else \
             [("portable", base, contextlib.nullcontext, None), ("gemm", gemm, contextlib.nullcontext, None)] if a.a is None else \
             [("A", gemm, lambda mod=load_variant(a.a, a.module): swapped(a.module, mod), None), ("B", gemm, contextlib.nullcontext, None)]
  for preset in a.presets.split(","):
    model = load(preset, a.prefill + 64)
    prompt = np.random.default_rng(0).integers(0, 100000, a.prefill).tolist()
    ms: dict[str, list[float]] = {label: [] for label, *_ in variants}
    for r in range(a.rounds):
      for label, providers, context, chunk in variants:
        with context():
          if chunk is not None: model.set_prefill_chunks(*chunk)
          use(model, providers)
          cold, warm, first = prefill_s(model, prompt)
        ms[label].append(warm * 1e3)
        print(f"{preset} on {Device.DEFAULT} round {r + 1} {label:8s}: prefill {a.prefill} tokens {warm * 1e3:.1f} ms "
              f"({a.prefill / warm:.0f} tok/s), first run {cold:.1f} s, first token {first}", flush=True)
    print("\n".join(summary(preset, ms)), flush=True)
    use(model, before)
    del model
  return 0

FUSIONS_DOC = """A/B of decode fusions in one process: variant A turns the named fusions off, B is the code as checked out. Both are
timed as gpu_bench times decode (generate()'s steady tokens, median ms per token), interleaved A B A B.

Fusions (what A runs instead):
  stack_q      a direct attn_q and attn_kv_a_mqa as two matvecs instead of one stacked [q; kv_a] (DeepSeek-V2-Lite: a
               second model is loaded for A, with its own weights)
  side_by_side the shared expert's gate_up and the routed experts' gate_up as two kernels instead of one launch
  sum          the routed experts' down (+ mix + residual) and the shared expert's down as two kernels instead of one sum
  trigger      no GRID_TRIGGER() at the top of the hand-written kernels (dependents launch as a kernel's workgroups exit)
  slices       (prefill) a kernel's output sliced to a symbolic chunk length is padded back to the bound by a copy for the next
               kernel, instead of that kernel reading the unsliced output (apps.kernels.to_bound)
A fusion that changes the kernels of a step rather than the weights is turned off around the capture of A's steps, on
the same model (the journal has two measured that way, the combine folded into v_b and a one-kernel router matvec + routing,
and rejected them: OPTIMIZATION_JOURNAL.md).
Prints ms per token per variant and round and the greedy tokens' agreement between the variants."""

def fusions(a, sub) -> int:
  off = parse_off(sub, a.off)
  for preset in a.presets.split(","):
    path = synth.generate(preset, "release", progress=False)
    load_b = lambda: Transformer.from_gguf(path, max_context=a.decode + 96)
    model_b = load_b()
    if "stack_q" in off and model_b.cfg.q_lora_rank == 0:
      with fusions_off({"stack_q"}): model_a = load_b()
    else: model_a = model_b
    interleave(preset, (("A", model_a, lambda: fusions_off(off)), ("B", model_b, contextlib.nullcontext)), a.rounds, a.decode)
    del model_a, model_b
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
    p.add_argument("--module", default=module, help=f"the apps.kernels module --a replaces (default {module})")
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
