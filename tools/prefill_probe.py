#!/usr/bin/env python3
"""Where a prompt's prefill goes, call by call: generate(prompt, 1) replayed several times (the steady time, as llama-bench
times pp: warm-ups first, then the median), and the same prefill taken apart with a device sync after each part: the
host's set-up (the sampler's parameters, the padded token buffer), each chunk's captured step, and the read of the first
token. Tells a slow kernel from a slow replay or a slow host.

  DEV=CUDA python3 tools/prefill_probe.py [--presets youtu-llm-2b,deepseek-v2-lite] [--prefill 512] [--runs 6]
"""
from __future__ import annotations
import argparse, sys, time
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
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
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    for i in range(2 + a.runs):   # run 1 compiles, run 2 captures
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
    fill = [timed(dev, lambda: model._fill_jits[L](buf[pos:pos + length], pos))[1:] for _ in range(5)][2:]   # 2 warm-ups
    print(f"  {'the first chunk without head (fill)':40s} {' '.join(f'{m:9.2f} ({h:6.2f})' for m, h in fill)}", flush=True)
    del model
  return 0

if __name__ == "__main__": sys.exit(main())
