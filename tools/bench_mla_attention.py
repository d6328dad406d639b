#!/usr/bin/env python3
"""Decode attention time per block on the GPU: the hand-written MLA kernels (apps/kernels/mla_attention.py) vs the same
math from tinygrad ops (the portable path apps/mla.py runs), at several context lengths, for the models' shapes.

  DEV=CUDA python3 tools/bench_mla_attention.py [--layers 8] [--iters 50] [--pos 16,128,512,1024,4095]

Each timed step is one TinyJit replay of `layers` blocks' attentions (separate caches, as in the model), so the host's
dispatch cost is shared; the table shows microseconds per block and the kernels of a step (one more: the stack of the outputs). Runs with python3 +
numpy + upstream/ only (the GPU machine cannot pip install). Also a check: the two paths' outputs agree (max rel err).
"""
from __future__ import annotations
import argparse, math, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, TinyJit, Device, UOp, dtypes
from tinygrad.uop.ops import Ops
from apps.kernels.mla_attention import mla_decode_attention, mla_decode_attention_reference

SHAPES = {"glm-4.7-flash": (20, 512, 192, 64, 1e-5), "deepseek-v2-lite / youtu-llm-2b": (16, 512, 128, 64, 1e-6)}

def kernels_per_step(jit: TinyJit) -> int:
  """Programs in the capture, graphs expanded (the stack of outputs included)."""
  n = 0
  for call in jit.captured.linear.src:
    ast = call.src[0]
    if ast.op is Ops.CUSTOM_FUNCTION and ast.arg == "graph": n += sum(1 for c in ast.src[0].src if c.src[0].op is Ops.PROGRAM)
    elif ast.op is Ops.PROGRAM: n += 1
  return n

def bench(name: str, shape: tuple, positions: list[int], layers: int, iters: int) -> None:
  H, KV, NOPE, R, eps = shape
  mc = max(positions) + 1
  rng = np.random.default_rng(0)
  ang = np.arange(mc)[:, None] * (1.0 / 10000.0 ** (np.arange(0, R, 2) / R))[None, :]
  cos, sin = Tensor(np.cos(ang).astype(np.float32)).realize(), Tensor(np.sin(ang).astype(np.float32)).realize()
  rows = rng.standard_normal((mc, KV + R)).astype(np.float32)
  caches = [Tensor(rows).realize() for _ in range(layers)]
  ins = [[Tensor(rng.standard_normal(s).astype(np.float32)).realize() for s in ((H, KV), (H, NOPE + R), (KV + R,), (KV,))]
         for _ in range(layers)]
  kw = dict(n_head=H, kv_lora=KV, qk_nope=NOPE, qk_rope=R, scale=1 / math.sqrt(NOPE + R), eps=eps)
  v_pos = UOp.variable("start_pos", 0, mc - 1)
  def kernel_step(pos: Tensor) -> Tensor:
    return Tensor.stack(*[mla_decode_attention(*x[:3], x[3], c, cos, sin, pos, **kw) for x, c in zip(ins, caches)]).realize()
  def reference_step(p: UOp) -> Tensor:
    return Tensor.stack(*[mla_decode_attention_reference(*x[:3], x[3], c, cos, sin, p, **kw) for x, c in zip(ins, caches)]).realize()
  jk, jr = TinyJit(kernel_step), TinyJit(reference_step)
  print(f"\n{name}: n_head {H}, kv_lora {KV}, qk_rope {R}; {layers} blocks per step, {iters} steps")
  print(f"{'pos':>6s} {'kernel us':>10s} {'reference us':>13s} {'speedup':>8s} {'kernels':>8s} {'ref kernels':>12s} {'rel err':>9s}")
  for p in positions:
    pos_t = Tensor([p], dtype=dtypes.int32).realize()
    res = {}
    for tag, fn, arg in (("k", jk, pos_t), ("r", jr, v_pos.bind(p))):
      for _ in range(3): out = fn(arg)  # capture, then warm
      Device[Device.DEFAULT].synchronize()
      t0 = time.perf_counter()
      for _ in range(iters): out = fn(arg)
      Device[Device.DEFAULT].synchronize()
      res[tag] = ((time.perf_counter() - t0) / iters / layers * 1e6, kernels_per_step(fn), out.numpy())
    err = float(np.abs(res["k"][2] - res["r"][2]).max() / np.abs(res["r"][2]).max())
    print(f"{p:6d} {res['k'][0]:10.1f} {res['r'][0]:13.1f} {res['r'][0] / res['k'][0]:8.2f} {res['k'][1]:8d} {res['r'][1]:12d} {err:9.1e}",
          flush=True)

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--layers", type=int, default=8)
  ap.add_argument("--iters", type=int, default=50)
  ap.add_argument("--pos", default="16,128,512,1024,4095")
  args = ap.parse_args()
  print(f"device {Device.DEFAULT}")
  for name, shape in SHAPES.items(): bench(name, shape, [int(p) for p in args.pos.split(",")], args.layers, args.iters)

if __name__ == "__main__": main()
