# A loaded model's first prompt (its steps on disk) against its second, no profiler:
#   DEV=CPU PYTHONPATH=. python3 runs/2026-11-29-load/first_call.py <preset>
import time, sys
sys.path.insert(0, '.')
import apps  # noqa
from apps.engine import Engine, resolve_model
from apps.sampling import Params
from apps import llm
eng = Engine.load(resolve_model(sys.argv[1], None, None), 1024, quiet=True)
ids = eng.text_ids(llm.BENCH_PROMPT)
def run():
  t = time.perf_counter(); g = eng.model.generate(ids, 1, Params()); next(g); g.close(); eng.model.reset(); return time.perf_counter() - t
print(f"{sys.argv[1]} first {run()*1e3:.0f} ms, then {run()*1e3:.0f}")
