"""Where a prompt's prefill goes, call by call: generate(prompt, 1) replayed several times (the steady time, as llama-bench
times pp: warm-ups first, then the median), and the same prefill taken apart with a device sync after each part: the
host's set-up (the sampler's parameters, the padded token buffer), each chunk's captured step, and the read of the first
token. Tells a slow kernel from a slow replay or a slow host. Then the first chunk without its head (the fill step): timed to
its sync, replayed back to back (no sync between calls: the device's own time), and graph by graph (each graph's kernels,
the nodes its replay updates, the host's time to launch it and its device time waited for alone). Where the host's time
goes: `python3 -m tools.host_profile --target prompt`.

  DEV=CUDA python3 -m tools.prefill_probe [--presets youtu-llm-2b,deepseek-v2-lite] [--prefill 512] [--runs 6]
"""
from __future__ import annotations
import argparse, sys, time
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
import apps  # noqa: F401
import numpy as np
from tinygrad import Device
from apps import synth, sampling
from apps.model import Transformer

def timed(dev, fn):
  """(fn(), ms from a device sync to the next one after fn, ms until fn returned: the host's share, its Python and driver
  calls up to the last launch)."""
  dev.synchronize()
  t0 = time.perf_counter()
  r = fn()
  t1 = time.perf_counter()
  dev.synchronize()
  return r, (time.perf_counter() - t0) * 1e3, (t1 - t0) * 1e3

class _Timed:
  """A graph runner that records, per call, the host's time to its return and the device time it reports; with `wait`
  set it waits for its graph (tinygrad's events), so the device time is the graph's alone."""
  def __init__(self, runner, rec: list): self.runner, self.rec, self.wait = runner, rec, False
  def __getattr__(self, name): return getattr(self.runner, name)   # estimates etc.
  def __call__(self, input_uops, var_vals, wait=False):
    t0 = time.perf_counter()
    et = self.runner(input_uops, var_vals, wait=wait or self.wait)
    self.rec.append((self.runner, (time.perf_counter() - t0) * 1e3, et))
    return et

def graphs(jit, args: tuple, dev) -> list[tuple[int, int, float, float]]:
  """Per graph of a captured TinyJit, in launch order: (kernels, nodes updated per replay, host ms, device ms): the host ms
  of a replay without waits (median of 3), the device ms of one with each graph waited for alone."""
  from tinygrad.engine.realize import graph_cache
  from tinygrad.uop.ops import Ops
  asts = [c.src[0] for c in jit.captured.linear.src if c.src[0].op is Ops.CUSTOM_FUNCTION and c.src[0].arg == "graph"]
  runners = {a: graph_cache[a] for a in asts if a in graph_cache}
  if not runners: return []
  rec: list = []
  wrapped = {a: _Timed(r, rec) for a, r in runners.items()}
  graph_cache.update(wrapped)
  try:
    host = []
    for _ in range(3):
      rec.clear()
      timed(dev, lambda: jit(*args))
      host.append([h for _, h, _ in rec])
    rec.clear()
    for w in wrapped.values(): w.wait = True
    timed(dev, lambda: jit(*args))
    order, device = [r for r, _, _ in rec], [et for _, _, et in rec]
  finally: graph_cache.update(runners)
  hosts = [sorted(h[i] for h in host)[1] for i in range(len(order))]
  return [(len(r.calls), len(getattr(r, "updatable", ())), h, (d or 0.0) * 1e3) for r, h, d in zip(order, hosts, device)]

def parts(model: Transformer, prompt: list[int]) -> list[tuple[str, float, float]]:
  """The prefill of generate(prompt, 1) in its parts: (name, ms to a device sync, ms of it the call took)."""
  dev, out = Device[model.device], []
  def timed_part(name, fn):
    """fn() timed; name: a label, or a function of fn's result that makes it."""
    r, ms, host = timed(dev, fn)
    out.append((name(r) if callable(name) else name, ms, host))
    return r
  model.reset()
  params = sampling.Params()
  timed_part("sampler.configure", lambda: model.sampler.configure(params, prompt))
  buf = timed_part("token buffer", lambda: model._token_buffer(prompt))
  steps = model._prefill(buf, len(prompt), 0, params)   # generate()'s chunks, one per next()
  label = lambda c: f"chunk {c[0]}..{c[0] + c[1] - 1} ({'last, ' if c[0] + c[1] == len(prompt) else ''}length {c[2]})"
  for _ in model._chunks(len(prompt), 0): timed_part(label, lambda: next(steps))
  read = model._readback()
  timed_part("read first token", lambda: (read.capture(), read.value()))
  model.cached = list(prompt)
  return out

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python3 -m tools.prefill_probe", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--presets", default="youtu-llm-2b,deepseek-v2-lite")
  ap.add_argument("--prefill", type=int, default=512)
  ap.add_argument("--runs", type=int, default=6, help="timed generate(prompt, 1) replays after two warm-ups")
  ap.add_argument("--chunks", default=None, help="prefill chunk lengths joined by + (default: the model's)")
  a = ap.parse_args(argv)
  if a.prefill < 1 or a.runs < 1: ap.error("--prefill and --runs are positive")
  for preset in a.presets.split(","):
    model = Transformer.from_gguf(synth.generate(preset, "release", progress=False), max_context=a.prefill + 64)
    if a.chunks: model.set_prefill_chunks(*(int(n) for n in a.chunks.split("+")))
    prompt = np.random.default_rng(0).integers(0, 100000, a.prefill).tolist()
    times = []
    for i in range(2 + a.runs):   # run 1 compiles and captures, run 2 is the first replay
      model.reset()
      t0 = time.perf_counter()
      first = next(model.generate(prompt, 1))
      times.append((time.perf_counter() - t0) * 1e3)
    steady = np.array(times[2:])
    print(f"{preset} on {Device.DEFAULT}, chunks {'+'.join(map(str, model.prefill_chunks))}, prompt {a.prefill}: first token {first}; "
          f"compile {times[0] / 1e3:.1f} s, capture {times[1]:.1f} ms; steady median {np.median(steady):.2f} ms "
          f"({a.prefill / np.median(steady) * 1e3:.0f} tok/s), min {steady.min():.2f}, max {steady.max():.2f} over {a.runs}", flush=True)
    rows = [parts(model, prompt) for _ in range(3)]
    print(f"  {'part (ms to the sync, of which the call)':40s}", flush=True)
    for k, (name, _, _) in enumerate(rows[0]):
      print(f"  {name:40s} {' '.join(f'{r[k][1]:9.2f} ({r[k][2]:6.2f})' for r in rows)}", flush=True)
    print(f"  {'sum of parts':40s} {' '.join(f'{sum(m for _, m, _ in r):9.2f}         ' for r in rows)}", flush=True)
    # the first chunk again as a chunk whose logits nobody needs (Transformer._fill: no head, no sampling)
    L = next(model._chunks(len(prompt), 0))[2]
    pos, length = model.start_pos.bind(0), model._v_len[L].bind(min(L, len(prompt)))
    buf, dev = model._token_buffer(prompt), Device[model.device]
    fill = [timed(dev, lambda m=model: m.captures.jit(("fill", L), m._fill)(buf, pos, length))[1:] for _ in range(5)][2:]   # 2 warm-ups
    print(f"  {'the first chunk without head (fill)':40s} {' '.join(f'{m:9.2f} ({h:6.2f})' for m, h in fill)}", flush=True)
    # the same chunk replayed back to back: the device's own time per call once the host keeps ahead
    jit, args = model.captures.jit(("fill", L), model._fill), (buf, pos, length)
    _, ms4, _ = timed(dev, lambda: [jit(*args) for _ in range(4)])
    print(f"  {'the same, 4 calls back to back, per call':40s} {ms4 / 4:9.2f}", flush=True)
    gs = graphs(jit, args, dev)
    if not gs: print("  (no graphs on this device)", flush=True)
    for i, (k, u, h, d) in enumerate(gs):
      print(f"  graph {i}: {k:4d} kernels, {u:4d} nodes updated; host {h:6.2f} ms, device {d:6.2f} ms (waited alone)", flush=True)
    if gs: print(f"  {'graphs: host sum, device sum':40s} {sum(g[2] for g in gs):9.2f} {sum(g[3] for g in gs):9.2f}", flush=True)
    del model
  return 0

if __name__ == "__main__": sys.exit(main())
