# the cost a loaded capture no longer pays: its written buffers found again from its kernels (CapturedJit._written_uops), per
# capture file of a model's second process. ./run python runs/2026-11-28-cpu-start/written.py <preset> <capture dir>
import time, sys
from pathlib import Path
import apps
from apps import engine
from tinygrad.engine.jit import CapturedJit
src = engine.resolve_model(sys.argv[1], None, None)
eng = engine.Engine.load(src, max_context=1024, quiet=True, kernels="hand", capture_dir=Path(sys.argv[2]))
ids = eng.text_ids("The quick brown fox jumps over the lazy dog. " * 8)[:16]
first = next(eng.model.generate(ids, 1))
for p in sorted(Path(sys.argv[2]).rglob("*.pkl")):
  t0 = time.perf_counter(); cj = eng.model.captures._read(p); t1 = time.perf_counter()
  w = CapturedJit._written_uops.func(cj); t2 = time.perf_counter()
  print(f"{p.name[-20:]} calls {len(cj.linear.src)} read {t1-t0:.3f} s, written set {t2-t1:.3f} s ({len(w)} buffers)")
