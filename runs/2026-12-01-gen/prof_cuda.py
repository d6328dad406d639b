"""Where a model's load goes in CUDA driver calls: every cu* function of tinygrad's CUDA bindings wrapped with a wall-clock
timer (calls, total, largest), Engine.load of a preset, then the first token of a 16-token prompt; run it twice (the
second process is the one the fast-start target times).
  DEV=CUDA python3 runs/2026-12-01-gen/prof_cuda.py youtu-llm-2b CAPTURE_DIR"""
import collections, sys, time
from pathlib import Path
t0 = time.perf_counter()
import apps  # noqa: F401
from apps import engine
from tinygrad import Device
import tinygrad.runtime.autogen.cuda as cuda
t_imp = time.perf_counter()
stats = collections.defaultdict(lambda: [0, 0.0, 0.0])
def timed(name, fn):
  def f(*a, **k):
    t = time.perf_counter()
    try: return fn(*a, **k)
    finally:
      s, dt = stats[name], time.perf_counter() - t
      s[0], s[1], s[2] = s[0] + 1, s[1] + dt, max(s[2], dt)
  return f
for n in dir(cuda):
  if n.startswith("cu") and callable(getattr(cuda, n)): setattr(cuda, n, timed(n, getattr(cuda, n)))
from apps import packed, readback, quantized
from apps import gguf
import ctypes as _ct
_libc = _ct.CDLL(None, use_errno=True)
_mv = _libc.madvise
_mv.argtypes, _mv.restype = [_ct.c_void_p, _ct.c_size_t, _ct.c_int], _ct.c_int
def _madvise(a, n, o):
  r = _mv(a, n, o)
  if r: print(f"madvise({o}) failed: errno {_ct.get_errno()}", flush=True)
  return r
class _Libc:
  madvise = staticmethod(timed("madvise (prefetch thread)", _madvise))
gguf.ctypes = type("ctypes_shim", (), {"CDLL": staticmethod(lambda *a, **k: _Libc), "c_void_p": _ct.c_void_p, "c_size_t": _ct.c_size_t, "c_int": _ct.c_int})
for mod, names in ((packed, ("_blocks", "copy_host", "split_blocks", "device_empty", "to_device_stacked", "format_for")),
                   (readback, ("_memmove", "_copy_in")), (quantized, ("load_tensor",))):
  for n in names: setattr(mod, n, timed("py " + mod.__name__.split(".")[-1] + "." + n, getattr(mod, n)))
for cls, names in ((readback._Staging, ("_take", "split", "lend", "copy", "reserve")), (packed.Format, ("pack",)),
                   (packed.PackedTensor, ("upload",)), (readback.Opening, ("wait",))):
  for n in names:
    f = getattr(cls, n)
    setattr(cls, n, staticmethod(timed("py " + cls.__name__ + "." + n, f)) if isinstance(cls.__dict__[n], staticmethod) else timed("py " + cls.__name__ + "." + n, f))
src = engine.resolve_model(sys.argv[1], None, None)
t = time.perf_counter()
eng = engine.Engine.load(src, max_context=1024, quiet=True, capture_dir=Path(sys.argv[2]))
Device[eng.model.device].synchronize()
t_load = time.perf_counter()
load_stats = {k: list(v) for k, v in stats.items()}
ids = eng.text_ids("The quick brown fox jumps over the lazy dog. " * 8)[:16]
first = next(eng.model.generate(ids, 1))
t_first = time.perf_counter()
print(f"imports {t_imp - t0:.3f} s, load {t_load - t:.3f} s (phases {eng.load_seconds}), first token {t_first - t_load:.3f} s later")
for title, st in (("load", load_stats), ("first token", {k: [v[0] - load_stats.get(k, [0, 0, 0])[0], v[1] - load_stats.get(k, [0, 0, 0])[1], v[2]]
                                                        for k, v in stats.items()})):
  print(f"-- CUDA calls during {title}: {sum(v[1] for v in st.values()):.3f} s in {sum(v[0] for v in st.values())} calls")
  for k, (n, tot, mx) in sorted(st.items(), key=lambda kv: -kv[1][1])[:24]:
    if n: print(f"  {k:32s} {n:6d} {tot * 1e3:9.1f} ms  max {mx * 1e3:7.2f} ms")
