"""Apps for GGUF MLA + MoE models on the patched tinygrad in upstream/.

Importing this package puts upstream/ first on sys.path, so every app, benchmark and test runs the pinned,
patched tinygrad and never one installed elsewhere. A missing or stale tree stops with the command that fixes it.
"""
import os, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def _use_upstream() -> str:
  if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
  import patchset
  if problem := patchset.tree_problem(os.environ.get("TINYGRAD_UPTO")): raise SystemExit(f"{problem}: run python apply_patches.py")
  loaded = sys.modules.get("tinygrad")
  if loaded is not None and Path(loaded.__file__).resolve().parent != patchset.TREE.resolve():
    raise SystemExit(f"a tinygrad from {Path(loaded.__file__).parent} was imported before apps: import apps first")
  if str(patchset.UPSTREAM) not in sys.path: sys.path.insert(0, str(patchset.UPSTREAM))
  return patchset.read_stamp()["key"]

SERIES = _use_upstream()  # the patch series of the tinygrad in use (patchset.series_key): what benchmarks print
# tinygrad's disk cache (compiled binaries, lowered programs by their AST: patches/0017, BEAM's picks) is one file per patch
# series: a program lowered by another series' code generator must never be reused
from apps.vocab import cache_dir  # noqa: E402
os.environ.setdefault("CACHEDB", str(cache_dir() / "tinygrad" / f"cache-{SERIES}.db"))

# Which kernels compute the model (Transformer(kernels=...), --kernels): "hand", the hand-written kernels where the device
# compiles them (CUDA, Metal; elsewhere the portable kernels with the optimizations apps.dispatch.plan_opts picks), or
# "generated", tinygrad's own code generator for every kernel (heuristics, or BEAM), as on a device without hand-written ones
KERNEL_PATHS = ("hand", "generated")
