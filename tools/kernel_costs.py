"""What each hand-written kernel family costs inside the decode stack's graph, by taking kernels out.

  DEV=CUDA python3 -m tools.kernel_costs --model youtu-llm-2b [--count 30] [--rounds 3] [--json out.json]
  DEV=CUDA python3 -m tools.kernel_costs --model youtu-llm-2b --kernels generated   # tinygrad's own kernels, the same way

Per-kernel profilers (ncu) serialize kernels and flush caches, so their times miss what a graph with programmatic
dependent launch overlaps. This measures in place instead: the stack (bench_block's `stack` target: every block, one
decode token) is captured several times, each time with some kernel families *hollowed*: the kernel is kept as a graph
node (same edges, same GRID_WAIT()) but does nothing on one workgroup. A family is every kernel with the same name (the
name carries the shape, so one family is one layer kind across blocks). Reported per family:

  without  stack time with the family hollowed: `base - without` is what the stack saves if those kernels cost nothing
  alone    stack time with everything else hollowed, minus the all-hollow stack: the family on its own, kernel after
           kernel, which with the weight bytes it reads gives its in-graph bandwidth
On CUDA every stack time is device time (CUDA events behind a spin kernel: the host's part of the step excluded);
elsewhere the synchronized step time. The outputs are wrong while kernels are hollowed (a hollowed router leaves `sel` as
it was): timing only. --floor: the no-work floor; --chain N: a graph of N trivial kernels (what one node costs).
With --kernels generated every kernel is tinygrad's: a hollow one keeps its launch dims (CUDA source only: its body becomes
the grid wait), swapped in for the lowered program in tinygrad's program cache, so the next capture launches it instead.
"""
from __future__ import annotations
import argparse, json, sys, time
from collections import Counter
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
import apps  # noqa: F401
from tinygrad import Device, Tensor, TinyJit, dtypes
from tinygrad.uop.ops import Ops, UOp
import apps.kernels as K
import bench_block as bb
from tinygrad.helpers import JIT_BATCH_SIZE, ansistrip

_hollow: set[str] = set()   # kernel names to hollow in the next capture
_hollow_body = "  GRID_WAIT();"
_seen: Counter = Counter()  # kernel names built in the last capture, with the bytes of their weight params where known

def _hollowable(k: K.SourceKernel) -> K.SourceKernel:
  _seen[k.name] += 1
  return replace(k, body=_hollow_body, global_size=(1, 1, 1), local_size=(32, 1, 1), helpers="") if k.name in _hollow else k

_generated = False            # --kernels generated: hollow tinygrad's lowered programs, not hand-written sources
_lowered: dict = {}           # program cache key -> the program as tinygrad lowered it (before any hollowing)

def _hollow_program(prg: UOp) -> UOp:
  """A lowered CUDA program with the same name, params and launch dims whose body only waits on its grid dependencies (or,
  where _hollow_body does not wait, is empty)."""
  code = next(u.arg for u in prg.src if u.op is Ops.SOURCE)
  wait = '  asm volatile("griddepcontrol.wait;" ::: "memory");\n' if "griddepcontrol.wait" in code and "GRID_WAIT" in _hollow_body else ""
  code = code[:code.index("{", code.index('extern "C" __global__ void')) + 1] + "\n" + wait + "}\n"
  lib = Device[Device.DEFAULT].renderer.compiler.compile_cached(code)
  return prg.replace(src=tuple(u for u in prg.src if u.op not in (Ops.SOURCE, Ops.BINARY)) + (UOp(Ops.SOURCE, arg=code), UOp(Ops.BINARY, arg=lib)))

def hollow(names: set[str]) -> None:
  """The kernels built from now on: those named hollow, the others as written. Hand-written: apps.kernels.set_rewrite, which
  also drops the programs built so far, so the next capture builds every kernel again and _seen counts them. Generated:
  the programs tinygrad lowered so far (a first capture lowers them), hollow or as lowered, in its program cache."""
  global _hollow
  _hollow = set(names)
  _seen.clear()
  if not _generated: return K.set_rewrite(_hollowable)
  from tinygrad.codegen import to_program_cache
  for key, prg in list(to_program_cache.items()):
    orig = _lowered.setdefault(key, prg)
    to_program_cache[key] = _hollow_program(orig) if orig.arg.name in _hollow else orig

def stack_ms(bench: bb.Bench, hollow_names: set[str], count: int, rounds: int) -> float:
  hollow(hollow_names)
  step = bench.step("stack")
  bb.warm(step)
  if bench.dev.split(":")[0] == "CUDA": return device_ms(step, bench.dev, count * rounds)
  res = bb.combine_rounds(bb.time_step(step, count, rounds))
  return res["median"] * 1e3

_SPIN = K.SourceKernel("spin", (K.Param("out", dtypes.float32, True),), """  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < 3000000ull);
  out[0] = (float)(t - t0);""", (1, 1, 1), (1, 1, 1))

def device_ms(step: bb.Step, dev: str, count: int) -> float:
  """Median device time of a step, host excluded: a 3 ms spin kernel is queued first, so by the time the device reaches
  the first event the step's launches are queued behind it; the events bracket only the step's own work (CUDA only)."""
  import ctypes
  import tinygrad.runtime.autogen.cuda as cuda
  from tinygrad.runtime.ops_cuda import check
  spin_fxn, sink = K.program(_SPIN, dev), Tensor.empty(1, device=dev).realize()
  evs = [cuda.CUevent() for _ in range(2)]
  for e in evs: check(cuda.cuEventCreate(ctypes.byref(e), 0))
  ts = []
  for i in range(count):
    a = step.args(i)
    sink.custom_kernel(fxn=spin_fxn)[0].realize()
    check(cuda.cuEventRecord(evs[0], None))
    out = step.fn(*a)
    check(cuda.cuEventRecord(evs[1], None))
    step.sync(out)
    check(cuda.cuEventSynchronize(evs[1]))
    check(cuda.cuEventElapsedTime(ctypes.byref(ms := ctypes.c_float()), evs[0], evs[1]))
    ts.append(ms.value)
  for e in evs: cuda.cuEventDestroy_v2(e)
  return bb.median(ts)

def floor(bench: bb.Bench, hand: list[str], count: int) -> None:
  """Where a step's time goes with no work in it: synchronized, host and pipelined ms per stack, with real kernels, with
  every hand-written kernel hollow (waiting on its grid, so its graph edges are programmatic) and hollow without the wait."""
  global _hollow_body
  for label, names, body in (("real", set(), ""), ("hollow, wait", set(hand), "  GRID_WAIT();"), ("hollow, no wait", set(hand), "  return;")):
    _hollow_body = body
    hollow(names)
    step = bench.step("stack")
    bb.warm(step)
    sync = bb.combine_rounds(bb.time_step(step, count, 3))["median"] * 1e3
    hp = bb.host_and_pipelined(step, count)
    dms = device_ms(step, bench.dev, count) if bench.dev.split(":")[0] == "CUDA" else float("nan")
    print(f"  {label:16s} synchronized {sync:.3f} ms  host {hp['host_ms']:.3f} ms  device {dms:.3f} ms  pipelined {hp['pipelined_ms']:.3f} ms "
          f"({len(bb.program_calls(bb.jit_of(step)))} kernels, "
          f"{sum(1 for c in bb.jit_of(step).captured.linear.src if c.src[0].op.name == 'CUSTOM_FUNCTION')} graphs)", flush=True)
  _hollow_body = "  GRID_WAIT();"

def chain(n: int, funcs: int, count: int, params: int = 0) -> None:
  """A TinyJit of n trivial source kernels chained through a 32-float buffer, `funcs` distinct ones used round-robin: what
  one graph node costs when the kernel does nothing."""

  dev = Device.DEFAULT
  for wait in (True, False):
    extra = tuple(K.Param(f"w{j}", dtypes.uint8) for j in range(params))
    fx = [K.program(K.SourceKernel(f"nop{k}_{int(wait)}_{params}", (K.Param("out", dtypes.float32, True), K.Param("a", dtypes.float32), *extra),
                                  ("  GRID_WAIT();\n" if wait else "") + f"  out[LID_X] = a[LID_X] + {k}.0f;", (1, 1, 1), (32, 1, 1)), dev)
          for k in range(funcs)]
    ws = [Tensor.empty(2**20, dtype=dtypes.uint8, device=dev).realize() for _ in range(4 * params)]
    def run(a: Tensor) -> Tensor:
      for i in range(n):
        a = Tensor.empty(32, device=dev).custom_kernel(a, *(ws[(i * params + j) % len(ws)] for j in range(params)), fxn=fx[i % funcs])[0]
      return a.realize()
    x = Tensor.zeros(32, device=dev).contiguous().realize()
    step = bb.Step("chain", TinyJit(run), lambda i: (x,), lambda out: Device[dev].synchronize(), 0, {"total": 0}, 0, "step")
    bb.warm(step)
    sync = bb.median(bb.time_step(step, count)[0]) * 1e3
    hp = bb.host_and_pipelined(step, count)
    dms = device_ms(step, dev, count) if dev.split(":")[0] == "CUDA" else float("nan")
    print(f"  chain of {n} nop kernels, {funcs} distinct, {params} extra params, wait={wait}: synchronized {sync:.3f} ms, "
          f"host {hp['host_ms']:.3f} ms, "
          f"device {dms:.3f} ms ({dms / n * 1e3:.2f} us per node), pipelined {hp['pipelined_ms']:.3f} ms", flush=True)

def read_bytes(call) -> int:
  """Bytes of the buffers a kernel call only reads (weights, for a matvec; the KV cache for attention)."""
  ins = set(call.src[0].arg.ins)
  return sum(u.buffer.nbytes for i, u in enumerate(call.src[1:]) if i in ins and u.op.name == "BUFFER")

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python3 -m tools.kernel_costs", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--model", default="youtu-llm-2b")
  ap.add_argument("--count", type=int, default=30)
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--pos", type=int, default=128)
  ap.add_argument("--json")
  ap.add_argument("--batch", type=int, default=0, help="capture with this JIT_BATCH_SIZE (kernels per CUDA graph; tinygrad doubles it per graph)")
  ap.add_argument("--floor", action="store_true", help="only the no-work floor (real / hollow / hollow without the wait)")
  ap.add_argument("--chain", type=int, default=0, help="only time a chain of this many trivial kernels (see --funcs)")
  ap.add_argument("--funcs", type=int, default=1)
  ap.add_argument("--params", type=int, default=0, help="--chain: extra buffer parameters per kernel (as weights are)")
  ap.add_argument("--kernels", choices=("hand", "generated"), default="hand", help="whose kernels: the hand-written ones or tinygrad's")
  a = ap.parse_args(argv)
  global _generated
  _generated = a.kernels == "generated"
  from tinygrad.renderer.cstyle import CUDARenderer
  if _generated and not isinstance(Device[Device.DEFAULT].renderer, CUDARenderer):
    ap.error("--kernels generated hollows CUDA sources: run it with DEV=CUDA")
  if a.batch: JIT_BATCH_SIZE.value = a.batch
  if a.chain:
    chain(a.chain, a.funcs, a.count, a.params)
    return 0
  path = bb.resolve_model(a.model)
  m = bb.load_model(path, max(a.pos + 2, 256), bb.DEFAULT_SPLIT_MASK, kernels=a.kernels)
  bench = bb.Bench(m, a.pos, 1)
  t0 = time.perf_counter()
  base = stack_ms(bench, set(), a.count, a.rounds)
  step = bench.step("stack")   # one more capture to list what ran
  bb.warm(step, extra=0)
  calls = bb.program_calls(bb.jit_of(step))
  fams = Counter(c.src[0].arg.name for c in calls if c.src[0].op.name == "PROGRAM")
  read = {c.src[0].arg.name: read_bytes(c) for c in calls if c.src[0].op.name == "PROGRAM"}
  hand = sorted(fams) if _generated else sorted(n for n in fams if n in _seen)
  kind = "generated" if _generated else "hand-written"
  empty = stack_ms(bench, set(hand), a.count, a.rounds)
  print(f"{a.model} on {Device.DEFAULT}: stack {base:.3f} ms ({sum(fams.values())} kernels, {len(hand)} {kind} families); "
        f"all {kind} kernels hollow {empty:.3f} ms", flush=True)
  if a.floor:
    floor(bench, hand, a.count)
    return 0
  rows = []
  for n in sorted(hand, key=lambda n: (-read[n] * fams[n], -fams[n])):   # the most bytes a token first: a run cut short has the products
    without = stack_ms(bench, {n}, a.count, a.rounds)
    alone = stack_ms(bench, set(hand) - {n}, a.count, a.rounds) - empty
    each = alone / fams[n] * 1e3
    rows.append({"family": ansistrip(n), "count": fams[n], "saves_ms": base - without, "alone_ms": alone, "alone_us_each": each,
                 "read_bytes_each": read[n]})
    print(f"  {ansistrip(n):60s} x{fams[n]:3d}  saves {base - without:7.3f} ms  alone {alone:7.3f} ms ({each:6.2f} us each, "
          f"reads {read[n] / 2**20:6.2f} MiB: {read[n] / each / 1e3 if each > 0 else float('nan'):6.0f} GB/s)", flush=True)
  print(f"sum of saves {sum(r['saves_ms'] for r in rows):.3f} ms, sum alone {sum(r['alone_ms'] for r in rows):.3f} ms, "
        f"stack - hollow {base - empty:.3f} ms ({time.perf_counter() - t0:.0f} s)")
  if a.json:
    Path(a.json).write_text(json.dumps({"model": a.model, "device": Device.DEFAULT, "base_ms": base, "hollow_ms": empty, "rows": rows}, indent=1))
  return 0

if __name__ == "__main__": sys.exit(main())
