"""Where the host time of a step goes: cProfile over `--steps` replays of bench_block's step (default: decode, the real
step with its token read back; fill / prompt: a prefill chunk of --chunk tokens as generate() replays it, each call with
its arguments made as generate() makes them), after the warm-up, sorted by cumulative time.

  DEV=CUDA python3 -m tools.host_profile --model youtu-llm-2b [--target decode] [--steps 200] [--top 30]
  DEV=CUDA python3 -m tools.host_profile --model youtu-llm-2b --target prompt --chunk 512 --pos 0 --steps 20
"""
from __future__ import annotations
import argparse, cProfile, io, pstats, sys, time
import bench_block as bb

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python3 -m tools.host_profile", description=__doc__.split("\n\n")[0])
  ap.add_argument("--model", default=None)
  ap.add_argument("--target", default="decode", choices=("decode", "stack", "fill", "prompt"))
  ap.add_argument("--chunk", type=int, default=None, help="fill, prompt: the prefill chunk length (default: the model's shortest)")
  ap.add_argument("--steps", type=int, default=200)
  ap.add_argument("--pos", type=int, default=128)
  ap.add_argument("--top", type=int, default=30)
  a = ap.parse_args(argv)
  if a.chunk is not None and (a.target not in ("fill", "prompt") or a.chunk < 1):
    ap.error("--chunk is a positive chunk length, for --target fill or prompt")
  m = bb.load_model(bb.resolve_model(a.model or bb.default_model()), max(4096, a.pos + (a.chunk or 0) + 1), bb.DEFAULT_SPLIT_MASK)
  if a.chunk is not None: m.set_prefill_chunks(a.chunk)
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
