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

def prune_cachedbs(directory: Path, keep: int = 4) -> None:
  """Remove all but the `keep` most recently used cache-<series>.db files of directory (with their -wal and -shm files):
  each patch series has its own, and a series that changed is not coming back."""
  dbs = sorted(directory.glob("cache-*.db"), key=lambda p: p.stat().st_mtime, reverse=True)
  for db in dbs[keep:]:
    for f in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")): f.unlink(missing_ok=True)

SERIES = _use_upstream()  # the patch series of the tinygrad in use (patchset.series_key): what benchmarks print
# tinygrad's disk cache (compiled binaries, lowered programs by their AST: patches/0017, BEAM's picks) is one file per patch
# series: a program lowered by another series' code generator must never be reused
if "CACHEDB" not in os.environ:
  from apps.vocab import cache_dir
  (_db := cache_dir() / "tinygrad" / f"cache-{SERIES}.db").parent.mkdir(exist_ok=True)
  if _db.exists(): _db.touch()  # in use: the newest
  prune_cachedbs(_db.parent)
  os.environ["CACHEDB"] = str(_db)

# fp32 products that take NVIDIA's tensor cores (tinygrad's generated kernels: a prompt chunk's attention, the routers) run as
# three tf32 products, about fp32's precision (patches/0026); one tf32 product (ALLOW_TF32=1) cuts x to 11 bits, which
# the logits do not survive. Set before tinygrad is imported, as its ContextVars read the environment then
os.environ.setdefault("ALLOW_TF32", "2")

# GPU device nodes (NVIDIA, AMD's kfd, DRM render nodes: Intel / AMD / Qualcomm, WSL's dxg). tinygrad picks its default
# device by opening each backend in turn (METAL, AMD, NV, CUDA, QCOM, CL, then CPU), importing their driver bindings: ~0.4 s
# of every process on a machine without a GPU, where none of them can open. On Linux without these nodes the CPU is named
# directly (elsewhere a GPU has no such node: tinygrad probes); DEV wins.
GPU_NODES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dri", "/dev/dxg", "/dev/kgsl-3d0")
def default_device(env: dict, platform: str = sys.platform, exists=os.path.exists) -> str | None:
  """The DEV to set before tinygrad is imported: None (tinygrad's own probe) where DEV is set or a GPU may be present."""
  return None if "DEV" in env or not platform.startswith("linux") or any(exists(p) for p in GPU_NODES) else "CPU"
if (_dev := default_device(os.environ)) is not None: os.environ["DEV"] = _dev

# CUDA's driver initializes (cuInit) on a thread of its own while this process imports tinygrad and the apps (ctypes
# releases the GIL for the call): where DEV names CUDA, or is unset on a machine with NVIDIA's device node. The device's
# opening later finds the driver initialized (the same libcuda: the loader keeps one copy of a file).
def early_cuinit(env: dict, platform: str = sys.platform, exists=os.path.exists) -> bool:
  """Whether this process starts CUDA's driver on a thread of its own before tinygrad opens the device."""
  return platform.startswith("linux") and exists("/dev/nvidiactl") and env.get("DEV", "CUDA").split(":")[0] == "CUDA"
def _cuda_init() -> None:
  import ctypes
  try: ctypes.CDLL("libcuda.so.1").cuInit(0)
  except (OSError, AttributeError): pass
if early_cuinit(os.environ):
  import threading
  threading.Thread(target=_cuda_init, name="cuInit", daemon=True).start()

# Which kernels compute the model (Transformer(kernels=...), --kernels): "hand", the hand-written kernels where the device
# compiles them (CUDA, Metal; elsewhere the portable kernels with the optimizations apps.dispatch.plan_opts picks), or
# "generated", tinygrad's own code generator for every kernel (heuristics, or BEAM), as on a device without hand-written ones
KERNEL_PATHS = ("hand", "generated")

# The latent cache's element type (Transformer(cache_type=...), --cache-type, as llama.cpp's -ctk): "f32", exact, or "f16",
# half the bytes (what llama.cpp keeps by default): each cached row is rounded to fp16 once, and the attention reads it
# exactly (the journal and the README give the logits' distance it costs)
CACHE_TYPES = ("f32", "f16")
