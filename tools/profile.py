"""Per-kernel profile of one decode token, grouped by model part (attention, router, experts, shared expert, norms, ...).

  python3 -m tools.profile --model glm-4.7-flash [--target decode] [--pos 128] [--repeat 5] [--json]

  # device times from Nsight Compute instead of events (no launch latency in them; ncu flushes the L2 before each kernel
  # unless --cache-control none):
  ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
      --csv --log-file ncu.csv python3 -m tools.profile --model M --ncu --json > rows.json
  python3 -m tools.profile --ncu-csv ncu.csv --rows rows.json        # the same table with ncu's times and DRAM bytes

The step (bench_block's targets: decode, stack, block, ffn, attn; fill and prompt, a prefill chunk of --chunk tokens
without / with the head and the first token's sampling; mixed, a batched step of --batch sequences with a prompt's chunk of
--chunk tokens as further rows: `--target mixed --batch 8 --chunk 32`) is captured twice: as the app runs it (graphs batch the
kernels on CUDA/Metal: `launches` counts graph launches, `kernels` the programs inside) and with JIT graphs off, whose
kernels are then run one by one with a wait after each, so each gets its own device time (CUDA events; the host clock on
CPU). Times are medians over --repeat passes of the whole step.

Which model part a kernel belongs to comes from the buffers it reads, so it works the same on every backend: a kernel
that reads a block's weights belongs to that weight's part (the largest one if it reads several); the KV cache and rope
tables mean attention; the sampler's state means sampling. A kernel that reads no weights (reductions, softmax, top-k)
is norms when only norms kernels consume its output (the rms reduction of a norm), else takes the part of the kernel
that produced its largest input (sampling when that is the output head), else of one that consumes its output, else
'other'.

Bytes per kernel: tinygrad's estimate (KernelInfo estimates, which counts a re-read per head of the cache), and ours:
the weight bytes the kernel must read (routed experts: k of n_expert a token, for a step or chunk of several tokens those
they reach under uniform routing, bench_block.WeightRef.share) plus the cache rows it reads or writes; GB/s is
ours over the kernel's time when it reads weights or cache, else tinygrad's.
"""
from __future__ import annotations
import argparse, json, sys
from pathlib import Path
from collections import defaultdict
from dataclasses import dataclass, asdict
from typing import Sequence
import apps  # noqa: F401
import bench_block as bb
from apps import CACHE_TYPES, KERNEL_PATHS
from tinygrad.helpers import Context, ansistrip
from tinygrad.uop.ops import Ops, UOp, sym_infer
from tinygrad.engine.jit import _prepare_jit_inputs, TinyJit
from tinygrad.engine.realize import ExecContext, pm_exec, get_call_arg_uops, get_call_outs_ins, estimate_uop

@dataclass
class KernelRow:
  index: int        # position in the step
  name: str
  part: str
  block: int        # block of the weights it reads (-1: none or model-level)
  time_s: float     # median device time
  est_bytes: int    # tinygrad's estimate
  weight_bytes: int # ours: the active share of the weights it reads
  cache_bytes: int  # ours: KV-cache rows (and rope rows) it reads or writes
  how: str          # weights | cache | norms-consumer | producer | consumer | none
  kernel: bool = True   # a program (not a copy): what Nsight Compute lists
  dram_bytes: int = 0   # bytes read + written in DRAM, from Nsight Compute (0: not measured)
  opts: str = ""        # the opts the kernel was built with (heuristics, BEAM or hand-picked), as tinygrad names them
  deps: tuple[int, ...] = ()   # the kernels it waits for in a graph: the last writer of each buffer it touches, the readers of each it writes
  @property
  def bytes(self) -> int: return self.weight_bytes + self.cache_bytes

def _buffer_key(t) -> UOp: return t.uop.base

def opts_of(prg: UOp) -> str:
  """'GROUP:1:32 UPCAST:0:4 ...' for a compiled program (its SINK's KernelInfo.applied_opts)."""
  sink = prg.src[0] if prg.op is Ops.PROGRAM and prg.src else None
  opts = getattr(getattr(sink, "arg", None), "applied_opts", ()) or ()
  return " ".join(f"{o.op.name}:{o.axis}:{o.arg}" for o in opts)

def buffer_parts(m, pos: int, tokens: int = 1) -> dict[UOp, tuple[str, int, int, str]]:
  """BUFFER UOp -> (part, block, bytes a step of `tokens` tokens reads from it, kind) for every weight, KV cache, rope
  table and sampler tensor (a batched step's routed experts: those its tokens reach, bench_block.WeightRef.reached)."""
  out: dict[UOp, tuple[str, int, int, str]] = {}
  for r in bb.model_weights(m):
    for t in r.tensors: out[_buffer_key(t)] = (r.part, r.block, int(round(t.nbytes() * r.share(tokens))), "weights")
  row = (m.cfg.kv_lora_rank + m.cfg.qk_rope) * m.caches[0].dtype.itemsize
  for i, c in enumerate(m.caches): out[_buffer_key(c)] = ("attention", i, (pos + 1) * row, "cache")
  for t in (m.rope_cos, m.rope_sin): out[_buffer_key(t)] = ("attention", -1, t.shape[-1] * t.dtype.itemsize, "cache")
  for v in vars(m.sampler).values():
    if hasattr(v, "uop") and v.uop.base.op is Ops.BUFFER: out.setdefault(_buffer_key(v), ("sampling", -1, v.nbytes(), "sampler"))
  return out

def attribute(calls: Sequence[UOp], parts: dict[UOp, tuple[str, int, int, str]], cache_row: int) -> list[tuple[str, int, int, int, str]]:
  """(part, block, weight bytes, cache bytes, how) per call, in order."""
  n = len(calls)
  res: list[list] = [["", -1, 0, 0, "none"] for _ in range(n)]
  writer: dict[UOp, int] = {}
  producers: list[list[int]] = [[] for _ in range(n)]
  consumers: list[list[int]] = [[] for _ in range(n)]
  for i, call in enumerate(calls):
    args = get_call_arg_uops(call)
    outs, ins = get_call_outs_ins(call)
    found = [parts[args[k]] for k in ins if args[k] in parts]
    # a cache row written (a kernel may read the cache too: the CPU's decode attention appends its row and attends over all)
    found += [(p[0], p[1], cache_row, p[3]) for k in outs if (p := parts.get(args[k])) is not None and p[3] == "cache"]
    # producers, the one behind the largest input first
    for k in sorted(ins, key=lambda k: -args[k].max_numel() * args[k].dtype.itemsize):
      if args[k] not in parts and (w := writer.get(args[k])) is not None and w not in producers[i]:
        producers[i].append(w)
        consumers[w].append(i)
    if found:  # a norm weight is tiny: any other weight or the cache decides first
      part, blk, _, kind = max(found, key=lambda p: (p[0] != "norms", p[2]))
      res[i] = [part, blk, sum(p[2] for p in found if p[3] == "weights"), sum(p[2] for p in found if p[3] != "weights"), kind]
    for k in outs:
      if args[k] not in parts: writer[args[k]] = i
  for i in range(n):  # kernels that read no weights: the norm they feed (an rms reduction), else their producer
    if res[i][0]: continue
    if consumers[i] and all(res[c][0] == "norms" for c in consumers[i]): res[i][0], res[i][4] = "norms", "norms-consumer"
    elif (src := next((p for p in producers[i] if res[p][0]), None)) is not None:
      # what consumes the logits is the sampler
      res[i][0], res[i][1], res[i][4] = "sampling" if res[src][0] in ("output", "sampling") else res[src][0], res[src][1], "producer"
  for i in reversed(range(n)):  # else a consumer
    if res[i][0]: continue
    if (dst := next((c for c in consumers[i] if res[c][0]), None)) is not None: res[i][0], res[i][1], res[i][4] = res[dst][0], res[dst][1], "consumer"
    else: res[i][0] = "other"
  return [tuple(r) for r in res]

def dependencies(calls: Sequence[UOp]) -> list[tuple[int, ...]]:
  """What each call waits for in a graph (tinygrad's DepsTracker, over whole buffers): the last writer of every buffer it
  reads or writes, and the readers since then of every buffer it writes."""
  writer: dict[UOp, int] = {}
  readers: dict[UOp, list[int]] = defaultdict(list)
  res = []
  for i, call in enumerate(calls):
    args = get_call_arg_uops(call)
    outs, ins = get_call_outs_ins(call)
    bufs = {args[k].base for k in ins} | {args[k].base for k in outs}
    wrote = {args[k].base for k in outs}
    res.append(tuple(sorted({writer[b] for b in bufs if b in writer} | {r for b in wrote for r in readers[b]})))
    for b in wrote: writer[b], readers[b] = i, []
    for b in bufs - wrote: readers[b].append(i)
  return res

def critical_path(rows: Sequence[KernelRow]) -> list[int]:
  """The chain of dependent kernels (KernelRow.deps) whose device times add up to the most: a lower bound on the step as a
  graph runs it, however many kernels run side by side (the launches between the step's graphs not counted)."""
  finish, back = [0.0] * len(rows), [-1] * len(rows)
  for i, r in enumerate(rows):
    before = max(r.deps, key=lambda d: finish[d], default=-1)
    finish[i], back[i] = r.time_s + (finish[before] if before >= 0 else 0.0), before
  path, i = [], max(range(len(rows)), key=lambda i: finish[i], default=-1)
  while i >= 0: path, i = [i] + path, back[i]
  return path

def critical_line(rows: Sequence[KernelRow]) -> str | None:
  """The critical path's kernels and time, by part; None for rows without dependencies (an older --json)."""
  if not any(r.deps for r in rows): return None
  path = [rows[i] for i in critical_path(rows)]
  on: dict[str, list] = defaultdict(lambda: [0, 0.0])
  for r in path: on[r.part][0], on[r.part][1] = on[r.part][0] + 1, on[r.part][1] + r.time_s
  return f"critical path: {len(path)} kernels, {sum(r.time_s for r in path) * 1e3:.3f} ms of their times (" + \
         ", ".join(f"{p} {n} / {t * 1e3:.3f} ms" for p, (n, t) in sorted(on.items(), key=lambda kv: -kv[1][1])) + ")"

def _cuda_profiler(start: bool) -> None:
  """Open / close the range Nsight Compute profiles (ncu --profile-from-start off)."""
  import ctypes
  lib = ctypes.CDLL("libcuda.so.1")
  assert (lib.cuProfilerStart() if start else lib.cuProfilerStop()) == 0

def time_kernels(jit: TinyJit, args: tuple, repeat: int, ncu: bool = False) -> list[float]:
  """Median device time of each kernel of a graph-less capture, each run with a wait (as tinygrad's DEBUG=2 timing does).
  ncu: one more pass inside the CUDA profiler range, for Nsight Compute."""
  cap = jit.captured
  input_uops, var_vals, _, _ = _prepare_jit_inputs(args, {})
  from tinygrad.engine.jit import _copy_input
  concrete = tuple(_copy_input(u) if u in cap._written_uops else u for u in input_uops)
  ctx = ExecContext(var_vals, concrete, update_stats=False, jit=True, wait=True)
  times: list[list[float]] = [[] for _ in cap.linear.src]
  for _ in range(repeat):
    for i, call in enumerate(cap.linear.src): times[i].append(sum(e for e in (pm_exec.rewrite(call, ctx) or []) if e is not None))
  if ncu:
    _cuda_profiler(True)
    for call in cap.linear.src: pm_exec.rewrite(call, ctx)
    _cuda_profiler(False)
  return [bb.median(t) for t in times]

def profile(bench: bb.Bench, target: str = "decode", repeat: int = 5, count: int = 10, ncu: bool = False) -> dict:
  m = bench.m
  # 1) as the app runs it: step time, kernels and launches with graphs
  step = bench.step(target)
  bb.warm(step)
  step_s = bb.median(bb.time_step(step, count)[0])
  counts = bb.kernel_counts(bb.jit_of(step))
  # 2) graphs off: one call per kernel, timed one by one
  flat = bench.step(target)
  with Context(JIT=2): bb.warm(flat, extra=0)
  jit = bb.jit_of(flat)
  args = flat.args(0)
  calls = bb.program_calls(jit)
  times = time_kernels(jit, args, repeat, ncu)
  var_vals = _prepare_jit_inputs(args, {})[1]
  row = (m.cfg.kv_lora_rank + m.cfg.qk_rope) * m.caches[0].dtype.itemsize
  attr = attribute(calls, buffer_parts(m, bench.pos, step.tokens), row)
  rows = []
  for i, (call, t, (part, blk, wbytes, cbytes, how), deps) in enumerate(zip(calls, times, attr, dependencies(calls))):
    ast = call.src[0]
    name = ansistrip(ast.arg.name) if ast.op is Ops.PROGRAM else ("copy" if ast.op is Ops.COPY else str(ast.arg))
    est = int(sym_infer(estimate_uop(call).mem, var_vals))
    rows.append(KernelRow(i, name, part, blk, t, est, wbytes, cbytes, how, ast.op is Ops.PROGRAM, opts=opts_of(ast), deps=deps))
  return {"target": target, "step_s": step_s, "kernel_sum_s": sum(r.time_s for r in rows), **counts, "n_rows": len(rows), "rows": rows}

def read_ncu_csv(path: Path, names: bool = False) -> list[dict]:
  """Nsight Compute --csv output -> one {metric: value} per profiled kernel, in launch order (values in ns and bytes; names:
  its name under "kernel" too)."""
  import csv
  text = Path(path).read_text(errors="replace")
  lines = text.splitlines()
  start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
  if start is None: raise SystemExit(f"profile: {path} has no Nsight Compute CSV table")
  scale = {"ns": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "nsecond": 1, "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6,
           "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}
  out: dict[int, dict[str, float]] = {}
  for r in csv.DictReader(lines[start:]):
    v = float(r["Metric Value"].replace(",", "")) * scale.get(r.get("Metric Unit", ""), 1)
    out.setdefault(int(r["ID"]), {"kernel": r["Kernel Name"]} if names else {})[r["Metric Name"]] = v
  return [out[k] for k in sorted(out)]

def report_csv(kernels: list[dict], top: int) -> list[str]:
  """read_ncu_csv's kernels (with names) summed by name, the slowest first: calls, device time, share, DRAM bytes and GB/s."""
  g: dict[str, list[float]] = {}
  for k in kernels:
    e = g.setdefault(k["kernel"], [0, 0.0, 0.0])
    e[0] += 1
    e[1] += k.get("gpu__time_duration.sum", 0.0)
    e[2] += k.get("dram__bytes_read.sum", 0.0) + k.get("dram__bytes_write.sum", 0.0)
  total = sum(e[1] for e in g.values()) or 1e-9
  lines = [f"device times (Nsight Compute): {total / 1e6:.3f} ms over {len(kernels)} kernels, {len(g)} distinct",
           f"{'kernel':60s} {'calls':>5s} {'time us':>10s} {'%':>6s} {'us each':>8s} {'DRAM MB':>9s} {'DRAM GB/s':>9s}"]
  for name, (n, t, b) in sorted(g.items(), key=lambda kv: -kv[1][1])[:top]:
    lines.append(f"{name[:60]:60s} {n:5d} {t / 1e3:10.1f} {100 * t / total:5.1f}% {t / 1e3 / n:8.1f} {b / 1e6:9.3f} {b / t if t else 0.0:9.1f}")
  if len(g) > top: lines.append(f"... {len(g) - top} more kernels")
  return lines

def merge_ncu(doc: dict, kernels: list[dict[str, float]]) -> dict:
  """profile()'s JSON (--json) with each kernel's time and DRAM bytes replaced by Nsight Compute's."""
  rows = rows_of(doc)
  progs = [r for r in rows if r.kernel]
  if len(progs) != len(kernels): raise SystemExit(f"profile: {len(kernels)} kernels in the CSV, {len(progs)} in the step")
  for r, k in zip(progs, kernels):
    r.time_s = k["gpu__time_duration.sum"] * 1e-9
    r.dram_bytes = int(k.get("dram__bytes_read.sum", 0) + k.get("dram__bytes_write.sum", 0))
  for r in rows:
    if not r.kernel: r.time_s = 0.0
  return {**{k: v for k, v in doc.items() if k not in ("rows", "grouped")}, "kernel_sum_s": sum(r.time_s for r in rows), "rows": rows,
          "source": "ncu"}

def rows_of(doc: dict) -> list[KernelRow]:
  return [KernelRow(**{k: tuple(v) if k == "deps" else v for k, v in r.items() if k in KernelRow.__dataclass_fields__}) for r in doc["rows"]]

def timed_by_name(measured: list[KernelRow], other: list[KernelRow]) -> tuple[list[KernelRow], set[str]]:
  """other's kernels with the times of measured's kernels of the same name (their median; a name measured lacks takes the
  one that differs from it by a `_residual` suffix), and the names with no time: an unmeasured variant of a step (the
  same step rendered with a change, anywhere) judged by its critical path."""
  by_name: dict[str, list[float]] = defaultdict(list)
  for r in measured:
    if r.kernel: by_name[r.name].append(r.time_s)
  med = {n: sorted(t)[len(t) // 2] for n, t in by_name.items()}
  missing: set[str] = set()
  for r in other:
    t = med.get(r.name, med.get(r.name + "_residual", med.get(r.name.removesuffix("_residual")))) if r.kernel else 0.0
    if t is None: missing.add(r.name)
    r.time_s = t or 0.0
  return other, missing

def grouped(rows: Sequence[KernelRow]) -> list[dict]:
  """Rows merged by (part, kernel name): calls per token, total time, bytes."""
  g: dict[tuple[str, str], dict] = {}
  for r in rows:
    e = g.setdefault((r.part, r.name), {"part": r.part, "name": r.name, "calls": 0, "time_s": 0.0, "est_bytes": 0, "bytes": 0, "dram_bytes": 0,
                                        "opts": r.opts})
    e["calls"] += 1
    e["dram_bytes"] += r.dram_bytes
    e["time_s"] += r.time_s
    e["est_bytes"] += r.est_bytes
    e["bytes"] += r.bytes
  order = {p: i for i, p in enumerate(bb.PARTS)}
  return sorted(g.values(), key=lambda e: (order.get(e["part"], 99), -e["time_s"]))

def report(res: dict, top: int = 12) -> list[str]:
  total = res["kernel_sum_s"] or 1e-12
  gbs = lambda b, t: b / t / 1e9 if t > 0 else 0.0
  ncu = res.get("source") == "ncu"
  how = "device times (Nsight Compute)" if ncu else "kernels one by one"
  lines = [f"{res['target']}: step {res['step_s'] * 1e3:.3f} ms as run ({res['kernels']} kernels in {res['launches']} launches"
           f"{', ' + str(res['graphs']) + ' graphs' if res['graphs'] else ''}); {how}: {total * 1e3:.3f} ms"
           f" over {res['n_rows']} kernels" + (f"; the rest, {(res['step_s'] - total) * 1e3:.3f} ms, is launches and gaps" if ncu else ""),
           f"{'part':14s} {'kernel':44s} {'calls':>5s} {'time us':>10s} {'%':>6s} {'est MB':>9s} {'MB':>9s} {'GB/s':>8s}"
           + (f" {'DRAM MB':>9s} {'DRAM GB/s':>9s}" if ncu else "")]
  dram = lambda e, t: f" {e['dram_bytes'] / 1e6:9.3f} {gbs(e['dram_bytes'], t):9.1f}" if ncu else ""
  if (line := critical_line(res["rows"])) is not None: lines.insert(1, line)
  by_part: dict[str, list[dict]] = defaultdict(list)
  for e in grouped(res["rows"]): by_part[e["part"]].append(e)
  for part, es in by_part.items():
    t, est, b, n = sum(e["time_s"] for e in es), sum(e["est_bytes"] for e in es), sum(e["bytes"] for e in es), sum(e["calls"] for e in es)
    d = {"dram_bytes": sum(e["dram_bytes"] for e in es)}
    lines.append(f"{part:14s} {'(all)':44s} {n:5d} {t * 1e6:10.1f} {100 * t / total:5.1f}% {est / 1e6:9.3f} {b / 1e6:9.3f} {gbs(b or est, t):8.1f}"
                 + dram(d, t))
    for e in es[:top]:
      lines.append(f"{'':14s} {e['name'][:44]:44s} {e['calls']:5d} {e['time_s'] * 1e6:10.1f} {100 * e['time_s'] / total:5.1f}%"
                   f" {e['est_bytes'] / 1e6:9.3f}"
                   f" {e['bytes'] / 1e6:9.3f} {gbs(e['bytes'] or e['est_bytes'], e['time_s']):8.1f}" + dram(e, e['time_s']))
      if e.get("opts"): lines.append(f"{'':16s} opts {e['opts']}")
    if len(es) > top: lines.append(f"{'':14s} ... {len(es) - top} more kernels")
  return lines

def main(argv: Sequence[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python3 -m tools.profile", description=__doc__.split("\n\n")[0])
  ap.add_argument("--model", default=None, help="GGUF path or synthetic preset (default: glm-4.7-flash on a GPU, its -tiny variant on CPU)")
  ap.add_argument("--mix", default="release")
  ap.add_argument("--target", default="decode", choices=bb.TARGETS)
  ap.add_argument("--pos", type=int, default=128)
  ap.add_argument("--bank", type=int, default=8)
  ap.add_argument("--mask", type=int, default=bb.DEFAULT_SPLIT_MASK)
  ap.add_argument("--max-context", type=int, default=4096)
  ap.add_argument("--repeat", type=int, default=5, help="passes over the kernels; each kernel's time is the median")
  ap.add_argument("--count", type=int, default=10, help="timed replays of the step as run")
  ap.add_argument("--top", type=int, default=12, help="kernels listed per part")
  ap.add_argument("--chunk", type=int, default=None, help="fill, prompt, mixed: the prefill chunk length (default: the model's shortest)")
  ap.add_argument("--batch", type=int, default=1, help="decode, mixed: a batched step of this many sequences (Transformer.step), each at "
                  "--pos (mixed: with a prompt's chunk as further rows)")
  ap.add_argument("--kernels", default="hand", choices=KERNEL_PATHS, help="hand-written kernels where the device has them, or generated only")
  ap.add_argument("--cache-type", choices=CACHE_TYPES, default="f32", help="the latent cache's elements")
  ap.add_argument("--json", action="store_true")
  ap.add_argument("--ncu", action="store_true", help="run one more pass inside the CUDA profiler range (run under ncu)")
  ap.add_argument("--ncu-csv", metavar="CSV", help="measure nothing: print --rows's table with this Nsight Compute CSV's times "
                  "(without --rows: the CSV's kernels by name)")
  ap.add_argument("--rows", metavar="JSON", help="the --json output of the profiled run (with --ncu-csv)")
  ap.add_argument("--like", metavar="JSON", nargs="+", help="with --ncu-csv and --rows: the critical path of these steps' --json "
                  "(a variant rendered anywhere, e.g. DEV=NULL:NVCC:sm_90) with the measured kernels' times by name")
  a = ap.parse_args(argv)
  if a.ncu_csv and not a.rows:   # the CSV alone (its run's --json lost, or a pass cut short): kernels by name, no parts
    print("\n".join(report_csv(read_ncu_csv(Path(a.ncu_csv), names=True), a.top)))
    return 0
  if a.ncu_csv:
    try: doc = json.loads(Path(a.rows).read_text())
    except (OSError, json.JSONDecodeError) as e: raise SystemExit(f"profile: cannot read {a.rows}: {e}")
    res = merge_ncu(doc, read_ncu_csv(Path(a.ncu_csv)))
    for other in a.like or []:
      try: rows, missing = timed_by_name(res["rows"], rows_of(json.loads(Path(other).read_text())))
      except (OSError, json.JSONDecodeError) as e: raise SystemExit(f"profile: cannot read {other}: {e}")
      print(f"{other}: " + (critical_line(rows) or "no dependencies in it (an older --json)") +
            (f"; no time for {', '.join(sorted(missing))}" if missing else ""))
    if a.like: return 0
    print("\n".join(bb.header_lines(doc["header"]) + [f"pos {doc['header'].get('pos')}  target {res['target']}"] + report(res, a.top)))
    return 0
  if a.repeat < 1 or a.count < 1: ap.error("--repeat and --count must be >= 1")
  if a.chunk is not None and (a.target not in ("fill", "prompt", "mixed") or a.chunk < 1):
    ap.error("--chunk is a positive chunk length, for --target fill, prompt or mixed")
  a.model = a.model or bb.default_model()
  path = bb.resolve_model(a.model, a.mix)
  if a.batch < 1 or (a.batch > 1 and a.target not in ("decode", "mixed")):
    ap.error("--batch is a positive number of sequences, for --target decode or mixed")
  m = bb.load_model(path, max(a.max_context, a.pos + (a.chunk or 1)), a.mask, kernels=a.kernels, slots=a.batch + (a.target == "mixed"),
                    cache_type=a.cache_type)
  if a.chunk is not None: m.set_prefill_chunks(a.chunk)
  bench = bb.Bench(m, a.pos, a.bank, rows=a.batch)
  res = profile(bench, a.target, a.repeat, a.count, a.ncu)
  h = bb.header(m, path, pos=a.pos, target=a.target, batch=a.batch)
  if a.json:
    print(json.dumps({"header": h, **{k: v for k, v in res.items() if k != "rows"}, "rows": [{**asdict(r), "bytes": r.bytes} for r in res["rows"]],
                      "grouped": grouped(res["rows"])}, default=str))
  else: print("\n".join(bb.header_lines(h) + [f"pos {a.pos}  target {a.target}  repeat {a.repeat}"] + report(res, a.top)))
  return 0

if __name__ == "__main__": sys.exit(main())
