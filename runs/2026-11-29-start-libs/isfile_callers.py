"""Who stats files in a process's start (a second process: CACHEDB and the captures of an earlier run): Path.is_file calls
counted by their caller outside pathlib, with the seconds they took, and the libraries opened.
  CACHEDB=/tmp/s/cache.db python3 runs/2026-11-29-start-libs/isfile_callers.py PRESET CAPTURE_DIR"""
import collections, pathlib, sys, time, traceback
calls, secs, is_file = collections.Counter(), collections.Counter(), pathlib.Path.is_file
def counted(self):
  t = time.perf_counter()
  try: return is_file(self)
  finally:
    f = next(f for f in reversed(traceback.extract_stack()[:-1]) if "pathlib" not in f.filename)
    calls[k := f"{f.filename}:{f.lineno}"] += 1
    secs[k] += time.perf_counter() - t
pathlib.Path.is_file = counted
t0 = time.time()
from apps import engine
from tinygrad import Device
eng = engine.Engine.load(engine.resolve_model(sys.argv[1], None, None), max_context=1024, quiet=True, kernels="hand",
                         capture_dir=pathlib.Path(sys.argv[2]))
Device[eng.model.device].synchronize()
next(eng.model.generate(eng.text_ids("The quick brown fox jumps over the lazy dog. " * 8)[:16], 1))
print(f"first token {time.time() - t0:.2f} s after the script's start; is_file: {sum(calls.values())} calls, {sum(secs.values()):.3f} s")
for k, n in calls.most_common(8): print(f"{n:6d} {secs[k]:.3f} s  {k}")
print("loaded:", sorted(m for m in sys.modules if "autogen" in m))
