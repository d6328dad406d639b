"""One process of x read lane-major's experiment (X_LANES=1, experiments/x-lanes.diff applied): the generated decode step as
run (median ms of 40 replays) and its graph's kernels in order (a hash of the names in order, and of the names sorted), for
three captures of the step in the one process: whether the mode belongs to the process or to a capture.
  DEV=CUDA X_LANES=1 python3 runs/2026-11-30-reduce/xl_order.py youtu-llm-2b OUT.json"""
import sys, json, hashlib
import apps  # noqa: F401
import bench_block as bb
from tinygrad.helpers import ansistrip
from tinygrad.uop.ops import Ops

path = bb.resolve_model(sys.argv[1], "release")
m = bb.load_model(path, 4096, bb.DEFAULT_SPLIT_MASK, kernels="generated")
bench = bb.Bench(m, 128, 8)
out = []
for cap in range(3):
  step = bench.step("decode")
  bb.warm(step)
  ms = bb.median(bb.time_step(step, 40)[0]) * 1e3
  jit = bb.jit_of(step)
  names = [ansistrip(c.src[0].arg.name) if c.src[0].op is Ops.PROGRAM else str(c.src[0].op) for c in bb.program_calls(jit)]
  graphs = [len(c.src[0].src[0].src) for c in jit.captured.linear.src if c.src[0].op is Ops.CUSTOM_FUNCTION and c.src[0].arg == "graph"]
  h = lambda xs: hashlib.sha1("\n".join(xs).encode()).hexdigest()[:12]
  print(f"capture {cap}: {ms:.3f} ms  kernels {len(names)}  order {h(names)}  set {h(sorted(names))}  graphs {graphs}", flush=True)
  out.append({"ms": ms, "names": names, "graphs": graphs})
json.dump(out, open(sys.argv[2], "w"))
