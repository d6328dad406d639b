"""A second process's first token after its load (run it twice: the first run captures the steps into CAPTURE_DIR), under
cProfile with PROF=tottime|cumulative; on the CPU, or on the CUDA path's host side: DEV=NULL:NVCC:sm_90 (kernels compiled,
nothing run) with FAKEGRAPH=1 (CUDAGraph, its driver calls faked):
  PROF=tottime DEV=CPU PYTHONPATH=. python3 runs/2026-12-05-start/null_after.py glm-4.7-flash-tiny CAPTURE_DIR
  FAKEGRAPH=1 DEV=NULL:NVCC:sm_90 CACHEDB=CAPTURE_DIR/c.db PYTHONPATH=. python3 runs/2026-12-05-start/null_after.py youtu-llm-2b CAPTURE_DIR"""
import os, sys, time
os.environ.setdefault("NULL_ALLOW_COPYOUT", "1")
from pathlib import Path
t0 = time.perf_counter()
import apps
from apps import engine
from tinygrad import Device
if os.environ.get("FAKEGRAPH"): exec(open(os.path.join(os.path.dirname(__file__), "fakegraph.py")).read())
t1 = time.perf_counter()
src = engine.resolve_model(sys.argv[1], None, None)
eng = engine.Engine.load(src, max_context=1024, quiet=True, capture_dir=Path(sys.argv[2]))
t2 = time.perf_counter()
ids = (eng.text_ids("The quick brown fox jumps over the lazy dog. " * 8))[:16]
import cProfile, pstats
pr = cProfile.Profile()
if os.environ.get("PROF"): pr.enable()
first = next(eng.model.generate(ids, 1))
pr.disable()
t3 = time.perf_counter()
print(f"import {t1-t0:.3f} load {t2-t1:.3f} {eng.load_seconds} first {t3-t2:.3f} captures {eng.model.captures.loaded}")
if os.environ.get("PROF"): pstats.Stats(pr).sort_stats(os.environ["PROF"]).print_stats(35)
