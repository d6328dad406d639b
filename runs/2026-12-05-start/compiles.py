"""A second process's first token after its load, with the symbolic patterns it compiles on the way (upat_compile: count and
seconds), then 4 more tokens. Run it twice (the first run captures the steps into CAPTURE_DIR):
  DEV=CPU PYTHONPATH=. python3 runs/2026-12-05-start/compiles.py glm-4.7-flash-tiny CAPTURE_DIR
  FAKEGRAPH=1 DEV=NULL:NVCC:sm_90 CACHEDB=CAPTURE_DIR/c.db PYTHONPATH=. python3 runs/2026-12-05-start/compiles.py youtu-llm-2b CAPTURE_DIR
(FAKEGRAPH: CUDAGraph on the NULL device with the driver's graph calls faked, fakegraph.py: the CUDA path's host work, sm_90
kernels compiled by nvcc, nothing run; its tokens are 0.)"""
import sys, time, os, functools
os.environ.setdefault("NULL_ALLOW_COPYOUT", "1")
from pathlib import Path
import apps
import tinygrad.uop.upat as U
tot=[0,0.0]
orig=U.upat_compile.__wrapped__
@functools.cache
def timed(self, fxn):
  t=time.perf_counter(); r=orig(self, fxn); tot[0]+=1; tot[1]+=time.perf_counter()-t; return r
U.upat_compile = timed
from apps import engine
from tinygrad import Device
if os.environ.get("FAKEGRAPH"): exec(open(os.path.join(os.path.dirname(__file__), "fakegraph.py")).read())
src = engine.resolve_model(sys.argv[1], None, None)
eng = engine.Engine.load(src, max_context=1024, quiet=True, capture_dir=Path(sys.argv[2]))
ids = (eng.text_ids("The quick brown fox jumps over the lazy dog. " * 8))[:16]
t1=time.perf_counter()
first = next(eng.model.generate(ids, 1))
t2=time.perf_counter()
nxt = list(eng.model.generate(ids, 4))
print(f'first token {t2-t1:.3f}: compiles {tot[0]} {tot[1]:.3f} s; token {first}, then {nxt}')
