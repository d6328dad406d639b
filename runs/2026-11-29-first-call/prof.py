# A loaded model's first prompt (its steps on disk, from an earlier process) under cProfile, with what its graphs' construction
# spends on the programs' keys (UOp.key: a sha256 a node over each program's whole AST, its linear and its source):
#   DEV=CPU PYTHONPATH=. python3 runs/2026-11-29-first-call/prof.py <preset>     (run it twice: the first makes the steps)
import time, cProfile, pstats, sys
sys.path.insert(0, '.')
import apps  # noqa
from apps.engine import Engine, resolve_model
from apps.sampling import Params
from apps import llm
eng = Engine.load(resolve_model(sys.argv[1], None, None), 1024, quiet=True)
ids = eng.text_ids(llm.BENCH_PROMPT)
def run():
  t = time.perf_counter(); g = eng.model.generate(ids, 1, Params()); next(g); g.close(); eng.model.reset(); return time.perf_counter() - t
pr = cProfile.Profile(); pr.enable(); t1 = run(); pr.disable()
print(f"first {t1*1e3:.0f} ms (profiled), then {run()*1e3:.0f}")
st = pstats.Stats(pr); st.sort_stats("cumtime").print_stats(18)
st.print_callers("ops.py.*\\(key\\)")
st.print_callers("__get__")
st.print_callees("jit.py:90")
st.print_callers("lazy_compile")
st.print_callees("realize.py:210")
st.print_callers("ops.py:1760")
st.print_callees("realize.py:160")
st.print_callees("realize.py:134")
