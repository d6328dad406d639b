"""Captured prefill and decode steps kept on disk: a later process of the same model, code and device replays them at once,
without tracing, scheduling or lowering anything.

A capture (tinygrad's CapturedJit) is a step's kernels in order, with the buffers they read and write. Pickled as it is,
it would carry every buffer's bytes. Here the model's own buffers (weights, caches, sampler state: every tensor reachable
from the Transformer) are written as their names and found again in the loading model; the step's scratch buffers
(written by the step) as their sizes; only the rest (constants made while tracing) with their bytes. A file that does not
fit the loading model (a name it lacks, another size) is not used: the step is captured again.

Files live in .cache/captures/<code>/ (the project cache, apps.vocab.cache_dir), where <code> hashes the patch series
and every file under apps/; the directories of other code are removed when one is written. A file's name hashes the model
file (path, size, mtime), the model's settings, the device's compiler target and tinygrad's settings, and the step.
"""
from __future__ import annotations
import hashlib, io, os, pickle, shutil, tempfile
from pathlib import Path
from typing import Any, Callable, Iterator
from tinygrad import Tensor, TinyJit, Device
from tinygrad.helpers import ContextVar
from tinygrad.uop.ops import UOp, Ops, AddrSpace, buffers
from tinygrad.engine.jit import CapturedJit
from apps import ROOT, SERIES
from apps.vocab import cache_dir

def default_dir() -> Path: return cache_dir() / "captures"
_IGNORED = {"DEBUG", "VIZ", "PROFILE", "TRACK_MATCH_STATS", "CAPTURE_PROCESS_REPLAY", "CACHELEVEL", "CACHEDB"}

def code_key() -> str:
  """The patch series and the bytes of every file under apps/ (a change of either makes every capture stale)."""
  h = hashlib.sha256(SERIES.encode())
  for f in sorted((ROOT / "apps").rglob("*")):
    if f.is_file() and "__pycache__" not in f.parts: h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
  return h.hexdigest()[:16]

def model_key(path: Path, settings: tuple, device: str) -> str:
  """The model file, the model's settings, the device's compiler target and tinygrad's settings."""
  st = path.stat()
  target = getattr(Device[device].renderer, "target", None)
  flags = sorted((k, repr(v.value)) for k, v in ContextVar._cache.items() if k not in _IGNORED)
  return hashlib.sha256(repr((str(path.resolve()), st.st_size, st.st_mtime_ns, settings, device, repr(target), flags)).encode()).hexdigest()[:24]

def tensors(root: object, kind: type = Tensor) -> Iterator[tuple[str, Any]]:
  """(path, tensor) of every tensor (or other `kind` of object) reachable from root through the attributes of apps'
  objects, lists, tuples and dicts, in the code's order (so a path means the same tensor in every process), each object
  once."""
  seen: set[int] = set()
  def walk(x, name: str) -> Iterator[tuple[str, Any]]:
    if isinstance(x, kind):
      yield name, x
      return
    if id(x) in seen: return
    seen.add(id(x))
    if isinstance(x, (list, tuple)):
      for i, v in enumerate(x): yield from walk(v, f"{name}[{i}]")
    elif isinstance(x, dict):
      for k, v in x.items():
        if isinstance(k, (str, int)): yield from walk(v, f"{name}[{k!r}]")
    elif type(x).__module__.startswith("apps.") and hasattr(x, "__dict__"):
      for k, v in vars(x).items(): yield from walk(v, f"{name}.{k}")
  yield from walk(root, "model")

def state_buffers(root: object) -> dict[UOp, str]:
  """The BUFFER of every realized tensor reachable from root (`tensors`), named by its first path."""
  out: dict[UOp, str] = {}
  for name, t in tensors(root):
    if (b := t.uop.base).op is Ops.BUFFER and b.is_realized: out.setdefault(b, name)
  return out

class Stale(Exception):
  """A capture file that does not fit the loading model."""

def _global_buffer(x) -> bool: return isinstance(x, UOp) and x.op is Ops.BUFFER and x.addrspace is AddrSpace.GLOBAL

class _Pickler(pickle.Pickler):
  def __init__(self, f, names: dict[UOp, str], written: set[UOp]):
    super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
    self.names, self.written, self.ids = names, written, {}
  def persistent_id(self, x):
    if not _global_buffer(x): return None
    if (name := self.names.get(x)) is not None: return ("state", name, x.max_numel(), x.dtype)
    i = self.ids.setdefault(x, len(self.ids))
    buf = buffers.get(x)
    if x in self.written or buf is None or not buf.is_allocated(): return ("scratch", i, x.device, x.max_numel(), x.dtype)
    return ("data", i, x.device, x.max_numel(), x.dtype, bytes(buf.as_memoryview()))

class _Unpickler(pickle.Unpickler):
  def __init__(self, f, by_name: dict[str, UOp]):
    super().__init__(f)
    self.by_name, self.made = by_name, {}
  def persistent_load(self, pid):
    if pid[0] == "state":
      _, name, size, dtype = pid
      if (b := self.by_name.get(name)) is None or (b.max_numel(), b.dtype) != (size, dtype): raise Stale(f"no buffer {name} of {size} {dtype}")
      return b
    kind, i, device, size, dtype = pid[:5]
    if i not in self.made:
      self.made[i] = b = UOp.new_buffer(device, size, dtype)
      if kind == "data": b.buffer.ensure_allocated().copyin(memoryview(pid[5]))
    return self.made[i]

class Captures:
  """The captures of one model: `jit(step, fn)` gives the step's TinyJit, from its file where one fits (replayed from the
  first call) or new (captured on its first call: the steps do no one-time work that a capture would repeat); `save()`
  writes the steps captured since."""
  def __init__(self, model: object, directory: Path | None, key: Callable[[], str]):
    self.model, self.dir, self._key = model, directory, key
    self.jits: dict[tuple, TinyJit] = {}
    self.saved: set[tuple] = set()
    self.loaded = 0
    self.on_new: Callable[[tuple, bool], None] | None = None  # told of each step as it is made: (step, loaded from its file)
    self.on_unsaved: Callable[[tuple, OSError], None] | None = None  # told of a step whose file could not be written

  def clear(self) -> None: self.jits.clear(); self.saved.clear()

  def _path(self, step: tuple) -> Path:
    assert self.dir is not None
    return self.dir / code_key() / f"{self._key()}-{hashlib.sha256(repr(step).encode()).hexdigest()[:16]}.pkl"

  def jit(self, step: tuple, fn: Callable) -> TinyJit:
    if (j := self.jits.get(step)) is not None: return j
    j = self.jits[step] = TinyJit(fn)
    j.cnt = 1
    if self.dir is not None and (p := self._path(step)).exists():
      try:
        j.captured, j.cnt = self._read(p), 2
        self.saved.add(step)
        self.loaded += 1
      except Exception: pass  # Stale, or a damaged file: the step is captured again (and its file rewritten whole)
    if self.on_new is not None: self.on_new(step, j.cnt == 2)
    return j

  def _read(self, p: Path) -> CapturedJit:
    with open(p, "rb") as f:
      ret, linear, names, info, written = _Unpickler(f, {n: b for b, n in state_buffers(self.model).items()}).load()
    cj = CapturedJit(Tensor(ret), linear, names, info)
    # the buffers the step writes, as saved: finding them again walks every kernel's arguments (~0.5 s of a second process's
    # first step for a model of a thousand kernels)
    cj.__dict__["_written_uops"] = written
    return cj

  def save(self) -> None:
    """Write every step captured and not saved yet (atomically: a reader sees a whole file or none)."""
    if self.dir is None: return
    for step, j in self.jits.items():
      if step in self.saved or (cj := j.captured) is None or not isinstance(cj.ret, Tensor): continue
      self.saved.add(step)
      p, tmp = self._path(step), None
      try:
        p.parent.mkdir(parents=True, exist_ok=True)
        for other in p.parent.parent.iterdir():
          if other.is_dir() and other != p.parent: shutil.rmtree(other, ignore_errors=True)
        buf = io.BytesIO()
        _Pickler(buf, state_buffers(self.model), cj._written_uops).dump((cj.ret.uop, cj._linear, cj.expected_names, cj.expected_input_info,
                                                                         cj._written_uops))
        fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f: f.write(buf.getvalue())
        os.replace(tmp, p)
      except OSError as e:  # a cache that cannot be written (read-only, full) costs the next process its start, nothing else
        if tmp is not None and os.path.exists(tmp): os.unlink(tmp)
        if self.on_unsaved is not None: self.on_unsaved(step, e)
