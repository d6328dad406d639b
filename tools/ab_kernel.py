"""A/B of a kernel file on one loaded model: variant A is another version of an apps/kernels module (a file path, e.g.
`git show HEAD~1:apps/kernels/matvec.py > ab/A/matvec.py`), B the module as checked out. For each variant the package
attribute the seam imports at call time (`from apps.kernels import matvec`) points at that module, the kernel cache and
the model's captures are dropped, and generate()'s steady decode is timed as gpu_bench times it (median ms per token).
One load per model instead of one per variant and process: on the H100 a model's load and synthesis cost more than the
decode runs of both variants.

  DEV=CUDA python3 -m tools.ab_kernel --a ab/A/matvec.py [--presets deepseek-v2-lite,glm-4.7-flash] [--decode 64] [--rounds 2]

Prints ms per token per variant and round (order A B A B ...) and the greedy tokens' agreement between the variants.
"""
from __future__ import annotations
import argparse, contextlib, importlib.util, sys
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
import apps  # noqa: F401
import apps.kernels
import apps.dispatch as D
from apps import synth
from apps.model import Transformer
from tools.ab_readahead import interleave

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
  before = getattr(apps.kernels, name, None)
  setattr(apps.kernels, name, mod)
  for m in list(sys.modules.values()):
    if m is not None and m.__name__.startswith("apps.") and before is not None and getattr(m, name, None) is before: setattr(m, name, mod)
  D.kernel_cached.cache_clear()

@contextlib.contextmanager
def swapped(name: str, mod):
  """Inside: apps.kernels.<name> is `mod` (the kernels built there are its)."""
  before = importlib.import_module(f"apps.kernels.{name}")  # imports it where nothing has yet (gemm: at its first product)
  swap(name, mod)
  try: yield
  finally: swap(name, before)

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--a", type=Path, required=True, help="variant A of the module (a .py file)")
  ap.add_argument("--module", default="matvec", help="the apps.kernels module it replaces (default matvec)")
  ap.add_argument("--presets", default="youtu-llm-2b,deepseek-v2-lite")
  ap.add_argument("--decode", type=int, default=64)
  ap.add_argument("--rounds", type=int, default=2)
  a = ap.parse_args(argv)
  if not a.a.is_file(): ap.error(f"--a {a.a}: no such file")
  b_mod = importlib.import_module(f"apps.kernels.{a.module}")
  variants = (("A", load_variant(a.a, a.module)), ("B", b_mod))
  for preset in a.presets.split(","):
    model = Transformer.from_gguf(synth.generate(preset, "release", progress=False), max_context=a.decode + 96)
    interleave(preset, [(label, model, lambda mod=mod: swapped(a.module, mod)) for label, mod in variants], a.rounds, a.decode)
    del model
  return 0

if __name__ == "__main__": sys.exit(main())
