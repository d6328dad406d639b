"""Apps for GGUF MLA + MoE models on the patched tinygrad in upstream/.

Importing this package puts upstream/ first on sys.path, so every app, benchmark and test runs the pinned,
patched tinygrad and never one installed elsewhere. A missing or stale tree stops with the command that fixes it.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def _use_upstream() -> None:
  if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
  import apply_patches as ap
  try:
    stamp, key = ap.read_stamp(), ap.series_key()
    if not ap.TREE.is_dir() or not stamp: problem = "upstream/tinygrad is missing"
    elif stamp.get("upto") != stamp.get("total"): problem = f"upstream/tinygrad has only {stamp.get('upto')}/{stamp.get('total')} patches (--upto)"
    elif stamp.get("key") != key: problem = "upstream/tinygrad is stale (the pin or patches/ changed since it was applied)"
    else: problem = None
  except ap.PatchError as e: problem = str(e)
  if problem: raise SystemExit(f"{problem}: run python apply_patches.py")
  loaded = sys.modules.get("tinygrad")
  if loaded is not None and Path(loaded.__file__).resolve().parent != ap.TREE.resolve():
    raise SystemExit(f"a tinygrad from {Path(loaded.__file__).parent} was imported before apps: import apps first")
  if str(ap.UPSTREAM) not in sys.path: sys.path.insert(0, str(ap.UPSTREAM))

_use_upstream()

# Which kernels compute the model (Transformer(kernels=...), --kernels): "hand", the hand-written kernels where the device
# compiles them (CUDA, Metal; elsewhere the portable kernels with the optimizations apps.quantized.plan_opts picks), or
# "generated", tinygrad's own code generator for every kernel (heuristics, or BEAM), as on a device without hand-written ones
KERNEL_PATHS = ("hand", "generated")
