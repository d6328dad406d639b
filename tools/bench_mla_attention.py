"""Decode attention time per block on the GPU: the hand-written MLA kernels (apps/kernels/mla_attention.py) vs the same
math from tinygrad ops (the portable path apps/mla.py runs), at several context lengths, for the models' shapes.

  DEV=CUDA python3 -m tools.bench_mla_attention [--layers 8] [--iters 50] [--pos 16,128,512,1024,4095] [--cache-type f32,f16]
  DEV=CUDA python3 -m tools.bench_mla_attention --prefill 512,128 [--pos 0,1024]   (a prefill chunk's attention instead:
      the tensor-core kernel vs the CUDA-core one, chunks of those lengths at those start positions; on the tensor cores also
      the form expanded per head: the flash kernel with its expansions, and alone)
  [JITBEAM=2] python3 -m tools.bench_mla_attention --prefill 512 --pos 0 --kernels generated   (the generated path's chunk
      attention kernel by kernel, with each kernel's opts: the absorbed form, and the form expanded per head, its expansions
      included, which a long chunk takes)

Each timed step is one TinyJit replay of `layers` blocks' attentions (separate caches, as in the model), so the host's
dispatch cost is shared; the table shows microseconds per block and the kernels of a step (one more: the stack of the outputs). Runs with python3 +
numpy + upstream/ only (the GPU machine cannot pip install). Also a check: the two paths' outputs agree (max rel err).
"""
from __future__ import annotations
import argparse, math, time
from pathlib import Path
import numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, TinyJit, Device, UOp, dtypes
from tinygrad.uop.ops import Ops
from apps.kernels.mla_attention import mla_decode_attention
from apps.mla import decode_attention_reference

SHAPES = {"glm-4.7-flash": (20, 512, 192, 64, 1e-5), "deepseek-v2-lite / youtu-llm-2b": (16, 512, 128, 64, 1e-6)}
V_HEAD = {"glm-4.7-flash": 256, "deepseek-v2-lite / youtu-llm-2b": 128}

def kernels_per_step(jit: TinyJit) -> int:
  """Programs in the capture, graphs expanded (the stack of outputs included)."""
  n = 0
  for call in jit.captured.linear.src:
    ast = call.src[0]
    if ast.op is Ops.CUSTOM_FUNCTION and ast.arg == "graph": n += sum(1 for c in ast.src[0].src if c.src[0].op is Ops.PROGRAM)
    elif ast.op is Ops.PROGRAM: n += 1
  return n

def bench(name: str, shape: tuple, positions: list[int], layers: int, iters: int, alternatives: list[str] = (), cache_type: str = "f32") -> None:
  """The decode attention per block: the hand-written kernels (and those of each other mla_attention.py in `alternatives`,
  an A/B) against the reference from tinygrad ops, at each position, over caches of `cache_type` (f32 or f16)."""
  from tools.ab import load_variant
  H, KV, NOPE, R, eps = shape
  mc = max(positions) + 1
  rng = np.random.default_rng(0)
  ang = np.arange(mc)[:, None] * (1.0 / 10000.0 ** (np.arange(0, R, 2) / R))[None, :]
  cos, sin = Tensor(np.cos(ang).astype(np.float32)).realize(), Tensor(np.sin(ang).astype(np.float32)).realize()
  rows = rng.standard_normal((mc, KV + R)).astype(np.float32)
  caches = [Tensor(rows).cast(dtypes.half if cache_type == "f16" else dtypes.float).contiguous().realize() for _ in range(layers)]
  ins = [[Tensor(rng.standard_normal(s).astype(np.float32)).realize() for s in ((H, KV), (H, NOPE + R), (KV + R,), (KV,))]
         for _ in range(layers)]
  kw = dict(n_head=H, kv_lora=KV, qk_nope=NOPE, qk_rope=R, scale=1 / math.sqrt(NOPE + R), eps=eps)
  v_pos = UOp.variable("start_pos", 0, mc - 1)
  def kernel_step(attention):
    return lambda pos: Tensor.stack(*[attention(*x[:3], x[3], c, cos, sin, pos, **kw) for x, c in zip(ins, caches)]).realize()
  def reference_step(p: UOp) -> Tensor:
    return Tensor.stack(*[decode_attention_reference(*x[:3], x[3], c, cos, sin, p, **kw) for x, c in zip(ins, caches)]).realize()
  steps = {"kernel": TinyJit(kernel_step(mla_decode_attention))}
  for path in alternatives: steps[Path(path).stem] = TinyJit(kernel_step(load_variant(Path(path), "mla_attention").mla_decode_attention))
  print(f"\n{name}: n_head {H}, kv_lora {KV}, qk_rope {R}, {cache_type} cache; {layers} blocks per step, {iters} steps")
  print(f"{'pos':>6s} {'kernel':>12s} {'us':>10s} {'reference us':>13s} {'speedup':>8s} {'kernels':>8s} {'ref kernels':>12s} {'rel err':>9s}")
  jr = TinyJit(reference_step)
  def timed(fn, arg):
    for _ in range(3): out = fn(arg)  # capture, then warm
    Device[Device.DEFAULT].synchronize()
    t0 = time.perf_counter()
    for _ in range(iters): out = fn(arg)
    Device[Device.DEFAULT].synchronize()
    return (time.perf_counter() - t0) / iters / layers * 1e6, kernels_per_step(fn), out.numpy()
  for p in positions:
    pos_t = Tensor([p, 0], dtype=dtypes.int32).realize()   # [position, first cache row]
    ref = timed(jr, v_pos.bind(p))
    for tag, fn in steps.items():
      got = timed(fn, pos_t)
      err = float(np.abs(got[2].reshape(ref[2].shape) - ref[2]).max() / np.abs(ref[2]).max())   # the kernel's rows are (1, H, kv_lora)
      print(f"{p:6d} {tag:>12s} {got[0]:10.1f} {ref[0]:13.1f} {ref[0] / got[0]:8.2f} {got[1]:8d} {ref[1]:12d} {err:9.1e}", flush=True)

def bench_prefill(name: str, shape: tuple, tokens: int, start: int, layers: int, iters: int, alternatives: list[str]) -> None:
  """One chunk's attention per block: each kernel the device can run (the tensor-core one first), timed as TinyJit replays
  of `layers` blocks; their outputs compared."""
  from apps.kernels import program, has_mma
  from tools.ab import load_variant
  from apps.kernels.mla_attention import (AttentionShape, prefill_attend_kernel, prefill_mma_kernel, combine_kernel, prefill_splits,
                                          launch_prefill)
  H, KV, NOPE, R, _ = shape
  s, mc, dev = AttentionShape(H, KV, NOPE, R), start + tokens, Device.DEFAULT
  rng = np.random.default_rng(0)
  caches = [Tensor(rng.standard_normal((mc, KV + R)).astype(np.float32)).realize() for _ in range(layers)]
  qs = [(Tensor(rng.standard_normal((tokens, H, KV)).astype(np.float32)).realize(),
         Tensor(rng.standard_normal((tokens, H, R)).astype(np.float32)).realize()) for _ in range(layers)]
  pos, scale = Tensor([start, 0], dtype=dtypes.int32).realize(), 1 / math.sqrt(NOPE + R)   # [position, first cache row]
  variants = {}
  if has_mma(dev): variants["tensor cores"] = (program(prefill_mma_kernel(s, scale, tokens, mc), dev), None)
  for path in alternatives if has_mma(dev) else ():   # other versions of the tensor-core kernel (an A/B)
    variants[Path(path).stem] = (program(load_variant(Path(path), "mla_attention").prefill_mma_kernel(s, scale, tokens, mc), dev), None)
  combine = program(combine_kernel(s, tokens, mc), dev) if prefill_splits(tokens) > 1 else None
  variants["CUDA cores"] = (program(prefill_attend_kernel(s, scale, tokens, mc), dev), combine)
  outs = {}
  for tag, (attend, combine) in variants.items():
    step = TinyJit(lambda: Tensor.stack(*[launch_prefill(attend, combine, q, qpe, c, pos) for (q, qpe), c in zip(qs, caches)]).realize())
    for _ in range(3): out = step()
    Device[dev].synchronize()
    t0 = time.perf_counter()
    for _ in range(iters): out = step()
    Device[dev].synchronize()
    outs[tag] = ((time.perf_counter() - t0) / iters / layers * 1e6, out.numpy())
  ref = outs["CUDA cores"][1]
  for tag, (us, out) in outs.items():
    err = float(np.abs(out - ref).max() / np.abs(ref).max())
    print(f"{name:32s} {tokens:6d} {start:6d} {tag:>13s} {us:10.1f} {outs['CUDA cores'][0] / us:8.2f} {err:9.1e}", flush=True)
  if has_mma(dev): bench_flash_prefill(name, shape, tokens, start, layers, iters, caches, [q for q, _ in qs], [qpe for _, qpe in qs], pos,
                                       outs["CUDA cores"][0])

def bench_flash_prefill(name: str, shape: tuple, tokens: int, start: int, layers: int, iters: int, caches: list, qs: list, qpes: list,
                        pos: Tensor, base_us: float) -> None:
  """The same chunk in the form expanded per head (apps/mla.expanded_attention's keys and values from the cache rows, k_b and
  v_b as floats): the flash kernel with the expansions (tensor ops) it needs, and alone; its output against the expanded
  tensor ops' (causal_attention), on the first block. The speedup column is against the absorbed CUDA-core kernel."""
  from apps.kernels.mla_attention import mla_flash_prefill, split_halves, flash_form
  from apps.mla import causal_attention, heads_side_by_side, expand_per_head
  H, KV, NOPE, R, _ = shape
  DV, S, scale = V_HEAD[name], start + tokens, 1 / math.sqrt(NOPE + R)
  rng = np.random.default_rng(1)
  k_b, v_b = (Tensor(rng.standard_normal(s).astype(np.float32) / 16).realize() for s in ((H, KV, NOPE), (H, DV, KV)))
  w_k, w_v = (w.contiguous().realize() for w in heads_side_by_side(k_b, v_b))
  def expand(cache: Tensor) -> tuple[Tensor, Tensor]:   # (S, H, nope + rope) and (S, H, dv): rows are tokens
    return tuple(t.contiguous() for t in expand_per_head(cache[:S], w_k, w_v, H, R))
  qfull = [q[..., :NOPE].cat(qpe, dim=-1).contiguous().realize() for q, qpe in zip(qs, qpes)]   # q_nope's width of the absorbed q
  kvs = [tuple(t.realize() for t in expand(c)) for c in caches]
  kvs16 = [tuple(t.half().contiguous().realize() for t in kv) for kv in kvs]   # an fp16 cache's expansions
  steps = {"flash+expand": lambda: Tensor.stack(*[mla_flash_prefill(q, *expand(c), pos, scale) for q, c in zip(qfull, caches)]).realize(),
           "flash": lambda: Tensor.stack(*[mla_flash_prefill(q, k, v, pos, scale) for q, (k, v) in zip(qfull, kvs)]).realize(),
           "flash w1": lambda: Tensor.stack(*[mla_flash_prefill(q, k, v, pos, scale, ws=1) for q, (k, v) in zip(qfull, kvs)]).realize(),
           "flash f16": lambda: Tensor.stack(*[mla_flash_prefill(q, k, v, pos, scale) for q, (k, v) in zip(qfull, kvs16)]).realize(),
           "flash f16 w2": lambda: Tensor.stack(*[mla_flash_prefill(q, k, v, pos, scale, ws=2) for q, (k, v) in zip(qfull, kvs16)]).realize()}
  if flash_form(NOPE + R, DV, dtypes.float32) == "split":   # an fp32 cache's expansions as fp16 (hi, lo) pairs
    kvs2 = [tuple(split_halves(t).contiguous().realize() for t in kv) for kv in kvs]
    steps["flash split"] = lambda: Tensor.stack(*[mla_flash_prefill(q, k, v, pos, scale) for q, (k, v) in zip(qfull, kvs2)]).realize()
    steps["flash split w1"] = lambda: Tensor.stack(*[mla_flash_prefill(q, k, v, pos, scale, ws=1) for q, (k, v) in zip(qfull, kvs2)]).realize()
  k, v = kvs[0]
  ref = causal_attention(qfull[0], k.permute(1, 0, 2), v.permute(1, 0, 2), start, S, scale).numpy()
  # the last 32 queries (the most keys) in float64 on the host: which side of a difference is off
  n64 = min(32, tokens)
  q64, k64, v64 = (t.numpy().astype(np.float64) for t in (qfull[0][tokens - n64:], k, v))
  ref64 = np.zeros((n64, H, DV))
  for h in range(H):
    sc = q64[:, h] @ k64[:, h].T * scale
    sc[np.arange(S)[None, :] > start + tokens - n64 + np.arange(n64)[:, None]] = -np.inf
    w = np.exp(sc - sc.max(-1, keepdims=True))
    ref64[:, h] = (w / w.sum(-1, keepdims=True)) @ v64[:, h]
  e64 = lambda o: float(np.abs(o[tokens - n64:] - ref64).max() / np.abs(ref64).max())
  print(f"{name:32s} {tokens:6d} {start:6d} {'tensor ops':>13s} {'':>10s} {'':>8s} {'':>9s} {e64(ref):9.1e}", flush=True)
  for tag, fn in steps.items():
    step = TinyJit(fn)
    for _ in range(3): out = step()
    Device[Device.DEFAULT].synchronize()
    t0 = time.perf_counter()
    for _ in range(iters): out = step()
    Device[Device.DEFAULT].synchronize()
    us = (time.perf_counter() - t0) / iters / layers * 1e6
    got = out[0].numpy()
    err = float(np.abs(got - ref).max() / np.abs(ref).max())
    print(f"{name:32s} {tokens:6d} {start:6d} {tag:>13s} {us:10.1f} {base_us / us:8.2f} {err:9.1e} {e64(got):9.1e}", flush=True)

  bench_expansions(name, shape, tokens, start, layers, iters, caches, k_b, v_b, pos, kvs[0])

def bench_expansions(name: str, shape: tuple, tokens: int, start: int, layers: int, iters: int, caches: list, k_b: Tensor, v_b: Tensor,
                     pos: Tensor, want: tuple[Tensor, Tensor]) -> None:
  """The flash prefill's expansions of rows 0..start + tokens - 1 alone, per block, in the flash kernel's forms: from tensor
  ops (fp32 products, then their fp16 pairs where the form is split; over an fp16 cache the products rounded to fp16)
  against the GEMM on the tensor cores (mla_expand), and the GEMM's keys and values against the fp32 products (max rel err,
  the first block). The speedup column is the GEMM's over the tensor ops."""
  from apps.kernels.mla_attention import mla_expand, split_halves, flash_form
  from apps.mla import heads_side_by_side, expand_per_head
  H, KV, NOPE, R, _ = shape
  DV, S = V_HEAD[name], start + tokens
  w_k, w_v = heads_side_by_side(k_b, v_b)
  for cache_dtype in (dtypes.float32, dtypes.float16):
    form = flash_form(NOPE + R, DV, cache_dtype)
    cs = [c.cast(cache_dtype).contiguous().realize() for c in caches]
    wide, bdt = (2, dtypes.float16) if form == "split" else (1, cache_dtype)
    bufs = [tuple(Tensor.zeros(c.shape[0], H, wide * w, dtype=bdt).contiguous().realize() for w in (NOPE + R, DV)) for c in cs]
    pairs = (lambda t: split_halves(t.contiguous())) if form == "split" else (lambda t: t.cast(bdt))
    ops = TinyJit(lambda: Tensor.realize(*[pairs(t) for c in cs for t in expand_per_head(c[:S].float(), w_k, w_v, H, R)]))
    gemm = TinyJit(lambda: Tensor.realize(*[t for c, (kb, vb) in zip(cs, bufs) for t in mla_expand(c, k_b, v_b, pos, kb, vb, tokens)]))
    us = {}
    for tag, step in (("ops", ops), ("gemm", gemm)):
      for _ in range(3): step()
      Device[Device.DEFAULT].synchronize()
      t0 = time.perf_counter()
      for _ in range(iters): step()
      Device[Device.DEFAULT].synchronize()
      us[tag] = (time.perf_counter() - t0) / iters / layers * 1e6
    together = lambda t: (t[..., :t.shape[-1] // 2].float() + t[..., t.shape[-1] // 2:].float() / 2048) if wide == 2 else t.float()
    errs = [float(np.abs(together(g)[:S].numpy() - w.numpy()).max() / np.abs(w.numpy()).max()) for g, w in zip(bufs[0], want)]  # written in place
    print(f"{name:32s} {tokens:6d} {start:6d} {'expand ' + form:>13s} {us['ops']:10.1f} {us['gemm']:10.1f} {us['ops'] / us['gemm']:8.2f} "
          f"{errs[0]:9.1e} {errs[1]:9.1e}", flush=True)

def bench_generated_prefill(name: str, shape: tuple, tokens: int, start: int, layers: int, iters: int, repeat: int = 3) -> None:
  """The generated path's attention of one chunk (apps/mla.py, tensor ops, tinygrad's kernels) at the model's symbolic start
  and chunk length, per block as run (graphs) and kernel by kernel (graphs off), with the opts each kernel got: the
  heuristics', or BEAM's under JITBEAM. Both forms: `latent_attention` (absorbed: q_nope's product with k_b and the output's
  with v_b not included) and `expanded_attention` (k_b / v_b as floats; its expansions included, which stand in for those two
  products)."""
  from apps.mla import latent_attention, expanded_attention
  H, KV, NOPE, R, _ = shape
  mc, scale = start + tokens, 1 / math.sqrt(NOPE + R)
  rng = np.random.default_rng(0)
  caches = [Tensor(rng.standard_normal((mc, KV + R)).astype(np.float32)).realize() for _ in range(layers)]
  qs = [Tensor(rng.standard_normal((tokens, H, KV + R)).astype(np.float32)).realize() for _ in range(layers)]
  outs = [Tensor.empty(tokens, H, KV).realize() for _ in range(layers)]
  v_pos, v_len = UOp.variable("start_pos", 0, start), UOp.variable(f"n_tokens_{tokens}", 1, tokens)
  def step(p: UOp, n: UOp) -> list[Tensor]:   # each block's output stored apart, as the model's blocks use theirs
    return Tensor.realize(*[Tensor(o.uop.after(o[:n].uop.store(latent_attention(q[:n], c, p, KV, scale).uop)))
                            for o, q, c in zip(outs, qs, caches)])
  _time_chunk(name, "absorbed", step, (v_pos.bind(start), v_len.bind(tokens)), tokens, start, layers, iters, repeat)
  DV = V_HEAD[name]
  k_b, v_b = (Tensor(rng.standard_normal(s).astype(np.float32) / 16).realize() for s in ((H, KV, NOPE), (H, DV, KV)))
  qn = [Tensor(rng.standard_normal((tokens, H, NOPE)).astype(np.float32)).realize() for _ in range(layers)]
  outs_e = [Tensor.empty(tokens, H, DV).realize() for _ in range(layers)]
  def step_e(p: UOp, n: UOp) -> list[Tensor]:
    return Tensor.realize(*[Tensor(o.uop.after(o[:n].uop.store(expanded_attention(a[:n], q[:n, :, KV:], c, p, k_b, v_b, KV, scale).uop)))
                            for o, a, q, c in zip(outs_e, qn, qs, caches)])
  _time_chunk(name, "expanded", step_e, (v_pos.bind(start), v_len.bind(tokens)), tokens, start, layers, iters, repeat)

def _time_chunk(name: str, form: str, step, args: tuple, tokens: int, start: int, layers: int, iters: int, repeat: int) -> None:
  import bench_block as bb
  from tools.profile import time_kernels, opts_of
  from tinygrad.helpers import Context, ansistrip
  graphed, flat = TinyJit(step), TinyJit(step)
  for _ in range(3): graphed(*args)
  Device[Device.DEFAULT].synchronize()
  t0 = time.perf_counter()
  for _ in range(iters): graphed(*args)
  Device[Device.DEFAULT].synchronize()
  us = (time.perf_counter() - t0) / iters / layers * 1e6
  with Context(JIT=2):
    for _ in range(3): flat(*args)
  per: dict[str, list] = {}
  for call, t in zip(bb.program_calls(flat), time_kernels(flat, args, repeat)):
    ast = call.src[0]
    if ast.op is not Ops.PROGRAM: continue
    row = per.setdefault(ansistrip(ast.arg.name), [0.0, 0, opts_of(ast)])
    row[0], row[1] = row[0] + t, row[1] + 1
  print(f"{name:32s} {tokens:6d} {start:6d} {form:>13s} {us:10.1f}", flush=True)
  for k, (t, n, opts) in sorted(per.items(), key=lambda kv: -kv[1][0]):
    print(f"{'':34s}{t / layers * 1e6:9.1f} us/block  {n // layers} a block  {k}  opts {opts}", flush=True)

def main() -> None:
  ap = argparse.ArgumentParser(prog="python3 -m tools.bench_mla_attention", description=__doc__.splitlines()[0])
  ap.add_argument("--layers", type=int, default=8)
  ap.add_argument("--iters", type=int, default=50)
  ap.add_argument("--pos", default="16,128,512,1024,4095")
  ap.add_argument("--prefill", help="comma list of chunk lengths: time a prefill chunk's attention instead (--pos: its starts)")
  ap.add_argument("--kernels", choices=["hand", "generated"], default="hand", help="with --prefill: the hand-written kernels, or "
                  "the generated path's tensor-op attention kernel by kernel (JITBEAM=n: BEAM's kernels)")
  ap.add_argument("--variants", default="", help="comma list of other apps/kernels/mla_attention.py files, whose decode (with "
                  "--prefill: tensor-core) kernels are timed too")
  ap.add_argument("--cache-type", default="f32", help="comma list of the decode caches' types: f32, f16")
  args = ap.parse_args()
  print(f"device {Device.DEFAULT}")
  if args.prefill:
    print(f"{'shape':32s} {'tokens':>6s} {'start':>6s} {'kernel':>13s} {'us/block':>10s} {'speedup':>8s} {'rel err':>9s} {'vs f64':>9s}")
    for name, shape in SHAPES.items():
      for T in (int(t) for t in args.prefill.split(",")):
        for p in (int(p) for p in args.pos.split(",")):
          if args.kernels == "generated": bench_generated_prefill(name, shape, T, p, args.layers, args.iters)
          else: bench_prefill(name, shape, T, p, args.layers, args.iters, [v for v in args.variants.split(",") if v])
    return
  for name, shape in SHAPES.items():
    for c in args.cache_type.split(","):
      bench(name, shape, [int(p) for p in args.pos.split(",")], args.layers, args.iters, [v for v in args.variants.split(",") if v], c)

if __name__ == "__main__": main()
