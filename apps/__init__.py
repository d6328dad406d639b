"""Apps for GGUF MLA + MoE models on the patched tinygrad in upstream/.

Importing this package puts upstream/ first on sys.path, so every app, benchmark and test runs the pinned,
patched tinygrad and never one installed elsewhere. A missing or stale tree stops with the command that fixes it.
"""
import os, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def _use_upstream() -> str:
  if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
  import apply_patches as ap
  try:
    # TINYGRAD_UPTO=N runs the apps on the first N patches on purpose (`apply_patches.py --upto N`): the A of a patch's A/B
    upto = os.environ.get("TINYGRAD_UPTO") or str(len(ap.read_series()))
    if not upto.isdigit(): raise ap.PatchError(f"TINYGRAD_UPTO={upto!r} is not a number of patches")
    stamp, want = ap.read_stamp(), int(upto)
    if not ap.TREE.is_dir() or not stamp: problem = "upstream/tinygrad is missing"
    elif stamp.get("upto") != want: problem = f"upstream/tinygrad has {stamp.get('upto')}/{stamp.get('total')} patches (--upto)"
    elif stamp.get("key") != ap.series_key(want): problem = "upstream/tinygrad is stale (the pin or patches/ changed since it was applied)"
    else: problem = None
  except ap.PatchError as e: problem = str(e)
  if problem: raise SystemExit(f"{problem}: run python apply_patches.py")
  loaded = sys.modules.get("tinygrad")
  if loaded is not None and Path(loaded.__file__).resolve().parent != ap.TREE.resolve():
    raise SystemExit(f"a tinygrad from {Path(loaded.__file__).parent} was imported before apps: import apps first")
  if str(ap.UPSTREAM) not in sys.path: sys.path.insert(0, str(ap.UPSTREAM))
  return stamp["key"]

SERIES = _use_upstream()  # the patch series of the tinygrad in use (apply_patches.series_key): what benchmarks print

# Which kernels compute the model (Transformer(kernels=...), --kernels): "hand", the hand-written kernels where the device
# compiles them (CUDA, Metal; elsewhere the portable kernels with the optimizations apps.dispatch.plan_opts picks), or
# "generated", tinygrad's own code generator for every kernel (heuristics, or BEAM), as on a device without hand-written ones
KERNEL_PATHS = ("hand", "generated")
