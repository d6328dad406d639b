#!/usr/bin/env python3
"""Where the host time of a decode step goes: cProfile over `--steps` replays of bench_block's step (default: decode, the
real step with its token read back), after the warm-up, sorted by cumulative time.

  DEV=CUDA python3 tools/host_profile.py --model youtu-llm-2b [--target decode] [--steps 200] [--top 30]
"""
from __future__ import annotations
import argparse, cProfile, io, pstats, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bench_block as bb

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--model", default=None)
  ap.add_argument("--target", default="decode", choices=("decode", "stack"))
  ap.add_argument("--steps", type=int, default=200)
  ap.add_argument("--pos", type=int, default=128)
  ap.add_argument("--top", type=int, default=30)
  a = ap.parse_args(argv)
  m = bb.load_model(bb.resolve_model(a.model or bb.default_model()), max(4096, a.pos + 1), bb.DEFAULT_SPLIT_MASK)
  step = bb.Bench(m, a.pos, 1).step(a.target)
  bb.warm(step)
  prof = cProfile.Profile()
  t0 = time.perf_counter()
  prof.enable()
  for i in range(a.steps): step.sync(step.fn(*step.args(i)))
  prof.disable()
  wall = (time.perf_counter() - t0) / a.steps * 1e3
  s = io.StringIO()
  pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(a.top)
  print(f"{a.target}: {wall:.3f} ms per step under cProfile ({a.steps} steps)\n{s.getvalue()}")
  return 0

if __name__ == "__main__": sys.exit(main())
