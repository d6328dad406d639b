# The first replay of captured steps loaded from disk, under cProfile (CPU, GLM-4.7-Flash-tiny, a 40-token prompt): where a
# second process spends its first prompt. DEV=CPU PYTHONPATH=. python3 runs/2026-11-29-load/first_replay.py
import time, cProfile, pstats, sys
sys.path.insert(0, '.')
import apps  # noqa
from apps.engine import Engine, resolve_model
from apps.sampling import Params
from apps import llm
eng = Engine.load(resolve_model("glm-4.7-flash-tiny", None, None), 1024, quiet=True)
ids = eng.text_ids(llm.BENCH_PROMPT)
def run():
  t = time.perf_counter(); g = eng.model.generate(ids, 1, Params()); next(g); g.close(); eng.model.reset(); return time.perf_counter() - t
pr = cProfile.Profile(); pr.enable(); t1 = run(); pr.disable()
t2 = run(); t3 = run()
print(f"first {t1*1e3:.0f} ms, second {t2*1e3:.0f}, third {t3*1e3:.0f}")
pstats.Stats(pr).sort_stats("cumtime").print_stats(25)
st = pstats.Stats(pr); st.sort_stats("cumtime")
st.print_callees("jit.py:90")
st.print_callees("realize.py:127")
