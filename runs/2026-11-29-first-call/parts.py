# A loaded model's first prompt (steps on disk) with the parts of its graphs' construction timed, no profiler:
#   DEV=CPU PYTHONPATH=. [CAPTURES=<dir>] python3 runs/2026-11-29-first-call/parts.py <preset>
import time, sys, collections
sys.path.insert(0, '.')
import apps  # noqa
from tinygrad.engine import realize, jit
from tinygrad.renderer import Estimates
spent = collections.Counter()
def timed(name, f):
  def g(*a, **k):
    t = time.perf_counter()
    try: return f(*a, **k)
    finally: spent[name] += time.perf_counter() - t
  return g
realize.get_runtime = jit.get_runtime = timed("get_runtime", realize.get_runtime)
jit.unwrap_multi = timed("unwrap_multi", realize.unwrap_multi)
Estimates.simplify = timed("estimates.simplify", Estimates.simplify)
def get_graph_runtime(ast, input_uops=None):
  if (runtime:=realize.graph_cache.get(ast)) is None and input_uops is not None:
    t = time.perf_counter()   # the tree's own way to the graph's device (patches/0052's graph_device where it has it)
    dev = realize.to_tuple(realize.graph_device(ast) if hasattr(realize, "graph_device") else ast.device)[0]
    spent["graph ast.device"] += time.perf_counter() - t
    t = time.perf_counter(); realize.graph_cache[ast] = runtime = realize.Device[dev].graph(ast, input_uops=input_uops)
    spent["graph construction"] += time.perf_counter() - t
  return runtime
realize.get_graph_runtime = get_graph_runtime
from apps.engine import Engine, resolve_model
from apps.sampling import Params
from apps import llm
import os, pathlib
eng = Engine.load(resolve_model(sys.argv[1], None, None), 1024, quiet=True,
                  capture_dir=pathlib.Path(os.environ['CAPTURES']) if 'CAPTURES' in os.environ else None)
ids = eng.text_ids(llm.BENCH_PROMPT)
def run():
  t = time.perf_counter(); g = eng.model.generate(ids, 1, Params()); next(g); g.close(); eng.model.reset(); return time.perf_counter() - t
t1 = run(); first = dict(spent); t2 = run()
print(f"{sys.argv[1]}: first {t1*1e3:.0f} ms, then {t2*1e3:.0f};", ", ".join(f"{k} {v*1e3:.0f} ms" for k, v in first.items()))
