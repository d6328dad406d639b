"""BEAM on a step's slowest kernels, one at a time, each checked against the heuristics' kernel on the same buffers.

  python3 -m tools.beam_kernels --model deepseek-v2-lite --kernels generated --target prompt --chunk 512 --pos 0 [--top 6] [--beam 2]

The step (bench_block's targets) is captured with graphs off while each kernel's AST is kept as it went into the code
generator; its kernels are timed one by one (tools.profile's timing) and the --top slowest distinct kernels, by their time
summed over the step's calls, are searched by tinygrad's BEAM at --beam from that AST (the search starts from the
heuristics' pick, patch 24). Each pick runs on the buffers of the kernel's first call, the step's calls before it run
again first (the step reuses a buffer once its last reader is done, so after the whole step a kernel's inputs may hold
another kernel's outputs): its device time against the heuristics' program (medians of --repeat runs, the two
alternating), its opts, and its outputs against the heuristics' outputs from the same inputs. BEAM does not check
results: a pick whose outputs differ is a code-generation bug to fix, not a speedup (a merged warp was one). A pick that
is right and faster is a candidate for a heuristic (the journal's BEAM entries).
"""
from __future__ import annotations
import argparse, sys
from collections import defaultdict
from dataclasses import replace
from typing import Sequence
import numpy as np
import apps  # noqa: F401
import bench_block as bb
from apps import KERNEL_PATHS
from tools.profile import time_kernels, opts_of
import tinygrad.engine.realize as realize
from tinygrad.helpers import Context, ansistrip
from tinygrad.uop.ops import Ops, UOp
from tinygrad.dtype import _to_np_dtype
from tinygrad.engine.jit import _prepare_jit_inputs
from tinygrad.engine.realize import ExecContext, pm_exec, resolve_params, get_call_outs_ins

def capture_with_asts(bench: bb.Bench, target: str) -> tuple[bb.Step, dict[UOp, tuple[UOp, object]]]:
  """The step captured with graphs off, and each compiled program's (AST, renderer) as the code generator received them
  (no disk cache: a program read back from disk never passes through the code generator)."""
  seen: dict[UOp, tuple[UOp, object]] = {}
  to_program = realize.to_program
  def recording(ast, ren):
    prg = to_program(ast, ren)
    seen[prg] = (ast, ren)
    return prg
  realize.to_program = recording
  try:
    step = bench.step(target)
    with Context(JIT=2, CACHELEVEL=0, PARALLEL=0): bb.warm(step, beam=0, extra=0)
  finally: realize.to_program = to_program
  return step, seen

def put_back(saved: list[tuple[object, bytes]]) -> None:
  for buf, data in saved: buf.allocator._copyin(buf._buf, memoryview(bytearray(data)))

def run_once(call: UOp, ctx: ExecContext, saved: list[tuple[object, bytes]]) -> float:
  """Device time of one run of a call, its output buffers put back first (a kernel may read what it writes)."""
  put_back(saved)
  return sum(e for e in (pm_exec.rewrite(call, ctx) or []) if e is not None)

def outputs(call: UOp, ctx: ExecContext) -> list[np.ndarray]:
  """The call's output buffers as float64 arrays."""
  outs, _ = get_call_outs_ins(call)
  bufs = [b.buffer for b in resolve_params(call, ctx.input_uops)]
  return [np.frombuffer(bytes(bufs[i].as_memoryview()), dtype=_to_np_dtype(bufs[i].dtype)).astype(np.float64) for i in outs]

def main(argv: Sequence[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python3 -m tools.beam_kernels", description=__doc__.split("\n\n")[0])
  ap.add_argument("--model", default=None, help="GGUF path or synthetic preset (default: glm-4.7-flash on a GPU, its -tiny variant on CPU)")
  ap.add_argument("--mix", default="release")
  ap.add_argument("--target", default="prompt", choices=bb.TARGETS)
  ap.add_argument("--pos", type=int, default=0)
  ap.add_argument("--chunk", type=int, default=None, help="fill, prompt: the prefill chunk length (default: the model's shortest)")
  ap.add_argument("--max-context", type=int, default=4096)
  ap.add_argument("--kernels", default="generated", choices=KERNEL_PATHS)
  ap.add_argument("--top", type=int, default=6, help="distinct kernels searched, the slowest first")
  ap.add_argument("--beam", type=int, default=2, help="BEAM width")
  ap.add_argument("--repeat", type=int, default=5, help="runs a time is the median of")
  a = ap.parse_args(argv)
  if a.top < 1 or a.beam < 1 or a.repeat < 1: ap.error("--top, --beam and --repeat must be >= 1")
  if a.chunk is not None and (a.target not in ("fill", "prompt") or a.chunk < 1):
    ap.error("--chunk is a positive chunk length, for --target fill or prompt")
  a.model = a.model or bb.default_model()
  path = bb.resolve_model(a.model, a.mix)
  m = bb.load_model(path, max(a.max_context, a.pos + 1), bb.DEFAULT_SPLIT_MASK, kernels=a.kernels)
  if a.chunk is not None: m.set_prefill_chunks(a.chunk)
  step, seen = capture_with_asts(bb.Bench(m, a.pos, 1), a.target)
  jit = bb.jit_of(step)
  args = step.args(0)
  times = time_kernels(jit, args, a.repeat)
  calls = bb.program_calls(jit)
  total, count, first = defaultdict(float), defaultdict(int), {}
  for call, t in zip(calls, times):
    if call.src[0].op is Ops.PROGRAM and call.src[0] in seen:
      total[call.src[0]] += t
      count[call.src[0]] += 1
      first.setdefault(call.src[0], call)
  input_uops, var_vals, _, _ = _prepare_jit_inputs(args, {})
  ctx = ExecContext(var_vals, input_uops, update_stats=False, jit=True, wait=True)
  print("\n".join(bb.header_lines(bb.header(m, path, pos=a.pos, target=a.target))))
  print(f"{'kernel':44s} {'calls':>5s} {'step us':>9s} {'heur us':>9s} {'beam us':>9s} {'x':>6s} {'max rel diff':>12s}  opts (heuristics / BEAM)")
  for prg in sorted(total, key=lambda p: -total[p])[:a.top]:
    call, (ast, ren) = first[prg], seen[prg]
    outs, _ = get_call_outs_ins(call)
    bufs = [b.buffer for b in resolve_params(call, ctx.input_uops)]
    for before in calls[:calls.index(call)]: pm_exec.rewrite(before, ctx)   # its inputs as the step gave them
    saved = [(bufs[i], bytes(bufs[i].as_memoryview())) for i in outs]
    beamed = realize.to_program(ast.replace(arg=replace(ast.arg, beam=a.beam)), ren)
    pick = call.replace(src=(beamed, *call.src[1:]))
    run_once(call, ctx, saved); ref = outputs(call, ctx)
    run_once(pick, ctx, saved); got = outputs(pick, ctx)
    t_heur, t_beam = [], []
    for _ in range(a.repeat): t_heur.append(run_once(call, ctx, saved)); t_beam.append(run_once(pick, ctx, saved))
    t_heur, t_beam = float(np.median(t_heur)), float(np.median(t_beam))
    put_back(saved)
    diff = max(float(np.nanmax(np.abs(g - r)) / max(float(np.nanmax(np.abs(r))), 1e-30)) for r, g in zip(ref, got))
    name, n = ansistrip(prg.arg.name), count[prg]
    print(f"{name[:44]:44s} {n:5d} {total[prg] * 1e6:9.1f} {t_heur * 1e6:9.1f} {t_beam * 1e6:9.1f} {t_heur / t_beam:6.2f} {diff:12.2e}  "
          f"{opts_of(prg)} / {opts_of(beamed)}{'  WRONG' if diff > 1e-3 else ''}", flush=True)
  return 0

if __name__ == "__main__": sys.exit(main())
