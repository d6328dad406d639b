"""A process's start to its first token (16-token prompt), its load and first step under cProfile: run it twice with the
same CACHEDB and capture directory, the second run is a second process's start.
  CACHEDB=/tmp/s/cache.db python3 runs/2026-11-28-start/prof_start.py PRESET CAPTURE_DIR [N_LINES]"""
import cProfile, pstats, sys, time
from pathlib import Path
t0 = time.time()
import apps  # noqa: F401
from apps import engine
from tinygrad import Device
t1 = time.time()
src = engine.resolve_model(sys.argv[1], None, None)
pr = cProfile.Profile(); pr.enable()
eng = engine.Engine.load(src, max_context=1024, quiet=True, kernels="hand", capture_dir=Path(sys.argv[2]))
Device[eng.model.device].synchronize()
t2 = time.time()
first = next(eng.model.generate(eng.text_ids("The quick brown fox jumps over the lazy dog. " * 8)[:16], 1))
pr.disable()
t3 = time.time()
print(f"import {t1-t0:.2f} s, load {t2-t1:.2f} s, first token {t3-t2:.2f} s after it ({eng.model.device})")
pstats.Stats(pr).sort_stats("cumulative").print_stats(int(sys.argv[3]) if len(sys.argv) > 3 else 40)
