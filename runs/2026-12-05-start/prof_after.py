"""A second process's first token after its load, under cProfile: `DEV=CPU PYTHONPATH=. python3 runs/2026-12-05-start/prof_after.py
glm-4.7-flash-tiny CAPTURE_DIR [tottime|cumulative]` (run it twice: the first run captures the steps into CAPTURE_DIR)."""
import cProfile, pstats, sys, time
from pathlib import Path
t0=time.perf_counter()
import apps
from apps import engine
from tinygrad import Device
t1=time.perf_counter()
src = engine.resolve_model(sys.argv[1], None, None)
eng = engine.Engine.load(src, max_context=1024, quiet=True, capture_dir=Path(sys.argv[2]))
Device[eng.model.device].synchronize()
t2=time.perf_counter()
ids = (eng.text_ids("The quick brown fox jumps over the lazy dog. " * 8))[:16]
pr=cProfile.Profile(); pr.enable()
first = next(eng.model.generate(ids, 1))
pr.disable()
t3=time.perf_counter()
print(f"import {t1-t0:.3f} load {t2-t1:.3f} {eng.load_seconds} first {t3-t2:.3f}")
pstats.Stats(pr).sort_stats(sys.argv[3] if len(sys.argv)>3 else 'tottime').print_stats(25)
