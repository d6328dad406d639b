"""Where a model's load goes on this machine: Engine.load of a preset under cProfile (the slowest calls by their own time and
by their calls' time), with Engine.load_seconds' phases.
  DEV=CUDA python3 runs/2026-12-01-gen/prof_load.py youtu-llm-2b"""
import cProfile, pstats, sys, tempfile, time
from pathlib import Path
t0 = time.perf_counter()
import apps  # noqa: F401
from apps import engine
from tinygrad import Device
print(f"imports {time.perf_counter() - t0:.3f} s")
src = engine.resolve_model(sys.argv[1], None, None)
pr = cProfile.Profile()
t = time.perf_counter()
pr.enable()
eng = engine.Engine.load(src, max_context=1024, quiet=True, capture_dir=Path(tempfile.mkdtemp()))
Device[eng.model.device].synchronize()
pr.disable()
print(f"load {time.perf_counter() - t:.3f} s under cProfile; phases {eng.load_seconds}")
for key in ("tottime", "cumulative"): pstats.Stats(pr).sort_stats(key).print_stats(30)
