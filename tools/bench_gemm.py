"""Prefill GEMM time per call on the GPU: the tensor-core kernel (apps/kernels/gemm.py `build_mma`) on the products of one
chunk of each model (512 tokens by default; up to 64, a batched step's, with K split as gemm.split_k splits it), as the
model's rule builds it and, with --sweep, every tile x steps x workgroups-per-SM (x K slices, --splits) variant that fits,
so a rule can be chosen from the table.

  DEV=CUDA python3 -m tools.bench_gemm [--tokens 512] [--models youtu,dsv2,glm] [--sweep steps|tiles] [--tiles 16x128,..] [--steps 4,2,1]
                                       [--mbs 1,3,4] [--splits 1,2,4] [--stages 0,4] [--iters 20]
  DEV=CUDA python3 -m tools.bench_gemm --kernels generated [--opts U0:8,U1:4,R3:0,L1:32,L0:2]

--kernels generated times instead the kernel tinygrad generates for each dense product (apps/quantized.py on the generated
path: the weight dequantized inside the product, fp32 on the CUDA cores) with the heuristics' opts, or with --opts in place
of them (the layers' own switch, QuantizedLinear.opts; tools.bench_quantized's letters: U/L/R/G = UPCAST/LOCAL/UNROLL/GROUP,
axis:amount).

A timed step is one TinyJit replay of `copies` calls of the kernel on distinct weight copies (together past the L2 cache,
as a chunk's products read weights the previous kernels evicted), one x and one output (so the graph runs the calls one
after another: independent calls overlapped, which flattered tiles that leave SMs idle); the table shows microseconds per call, the
integer tensor-core throughput (two int8 mma a product: x is 16-bit), the weights' bytes read a second (routed experts: those
of the experts the uniform random routing reaches) and, for variants, the ratio to the rule's kernel.
Only the quantized x records are timed (build_xq runs once, apart). Runs with python3 + numpy + upstream/ only.
"""
from __future__ import annotations
import argparse, itertools, math, time
from dataclasses import replace
import numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, TinyJit, Device, dtypes
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.kernels import program, gemm
from apps.kernels.gemm import GemmShape, build_mma, mma_tile, _mma_steps, mma_supports, KB, XQ_WORDS
from tools.bench_quantized import random_raw, parse_opts

Q4_0, Q5_K, Q6_K = GGMLType.Q4_0, GGMLType.Q5_K, GGMLType.Q6_K
# (name, type, N, K, form): form "" linear, "glu", "res", "e<E>j<J>" routed experts (gate_up: glu; down: x per slot),
# "b<J>" per-slot (MLA's k_b / v_b); the chunk's products of apps/mla.py with the release quant mix (apps/synth.py)
MODELS = {
  "youtu": [("q_a+kv_a", Q4_0, 2112, 2048, ""), ("q_b", Q4_0, 3072, 1536, ""), ("k_b", Q4_0, 512, 128, "b16"),
            ("v_b", Q4_0, 128, 512, "b16"), ("attn_output", Q4_0, 2048, 2048, "res"), ("gate_up", Q4_0, 6144, 2048, "glu"),
            ("down", Q4_0, 2048, 6144, "res"), ("output", Q4_0, 128256, 2048, "")],
  "dsv2": [("q+kv_a", Q4_0, 3648, 2048, ""), ("attn_output", Q4_0, 2048, 2048, "res"), ("gate_up_shexp", Q5_K, 2816, 2048, "glu"),
           ("down_shexp", Q6_K, 2048, 2816, "res"), ("gate_up_exps", Q4_0, 1408, 2048, "e64j6glu"),
           ("down_exps", Q4_0, 2048, 1408, "e64j6"), ("output", Q6_K, 102400, 2048, "")],
  "glm": [("q_a+kv_a", Q4_0, 1344, 2048, ""), ("q_b", Q4_0, 5120, 768, ""), ("k_b", Q4_0, 512, 192, "b20"), ("v_b", Q4_0, 256, 512, "b20"),
          ("attn_output", Q4_0, 2048, 5120, "res"), ("gate_up_shexp", Q5_K, 1536, 2048, "glu"), ("down_shexp", Q6_K, 2048, 1536, "res"),
          ("gate_up_exps", Q4_0, 1536, 2048, "e64j4glu"), ("down_exps", Q4_0, 2048, 1536, "e64j4"), ("output", Q6_K, 154880, 2048, "")],
}

def shape_of(typ: GGMLType, T: int, N: int, K: int, form: str) -> GemmShape:
  glu, res = form.endswith("glu"), form == "res"
  if form.startswith("e"):
    E, J = map(int, form.rstrip("glu")[1:].split("j"))
    return GemmShape(typ, T, N, K, J, E, x_per_slot=not glu, glu=glu)
  if form.startswith("b"): J = int(form[1:]); return GemmShape(typ, T, N, K, J, J, True, True)
  return GemmShape(typ, T, N, K, glu=glu, residual=res)

def variants(s: GemmShape, tiles: bool | list[tuple[int, int]], steps=(4, 2, 1), mbs=(1, 3, 4),
             splits=()) -> list[tuple[tuple[int, int], int, int, int]]:
  """(tile, steps, workgroups per SM, K slices) of the rule first, then the others that fit the shape and shared memory: the
  rule's tile (with `tiles`, every tile, or those listed) x steps 4, 2, 1 x registers as they come or capped for 3 or 4
  workgroups per SM x the rule's slices of K (or each of `splits` that divides the steps)."""
  rule = (mma_tile(s), _mma_steps(s, mma_tile(s)), build_mma(s).min_blocks, s.split)
  out = [rule]
  alts = tiles if isinstance(tiles, list) else [(64, 128), (16, 256), (32, 128), (48, 128), (32, 256), (64, 64), (32, 64)] if s.experts else \
         [(tt, tn) for tn in ((128, 256) if s.glu else (64, 128)) for tt in (64, 32, 16, 8) if tt < 2 * s.T]
  for tile in [rule[0]] + ([t for t in alts if t != rule[0]] if tiles else []):
    for sb in steps:
      if not gemm.mma_steps_fit(s, tile, sb): continue
      for mb in mbs:
        for sp in splits or (s.split,):
          v = (tile, sb, mb, sp)
          if v not in out and (s.K // KB // sb) % sp == 0 and (sp == 1 or not (s.batched or s.residual)): out.append(v)
  return out

def bench(model: str, name: str, s: GemmShape, sweep: str, iters: int, rng, steps, mbs, splits, stages=(None,), tiles=None) -> None:
  dev = Device.DEFAULT
  ne = (s.K, s.N * (2 if s.glu else 1), *([s.E] if s.E else []))
  w_bytes = math.prod(ne) // 32 * 18
  copies = max(2, math.ceil(64 * 2**20 / w_bytes))
  raw = random_raw(s.type, math.prod(ne), rng)
  w0 = PackedTensor.from_bytes(raw, s.type, ne)
  ws = [w0.part_list()] + [[(p + 0).contiguous().realize() for p in w0.part_list()] for _ in range(copies - 1)]
  R = s.T * s.J if (s.x_per_slot or s.batched) else s.T
  xq = Tensor(rng.integers(0, 2**32, (s.K // KB * R * XQ_WORDS,), dtype=np.uint32)).realize()
  extra = []
  read = len(raw)   # the weights' bytes the product reads: routed experts, those of the experts sel reaches
  if s.experts:
    sel = rng.integers(0, s.E, (s.T, s.J)).astype(np.int32)
    extra.append(Tensor(sel).realize())
    read = read // s.E * len(np.unique(sel))
  if s.residual: extra.append(Tensor(rng.standard_normal((s.T, s.N)).astype(np.float32)).realize())
  flops = 2 * 2 * s.T * s.J * s.N * s.K * (2 if s.glu else 1)   # int8 multiply-adds: (h, l) per product
  base = None
  vs = variants(s, tiles or sweep == "tiles", steps, mbs, splits) if sweep else variants(s, False)[:1]
  for (tile, sb, mb, sp), st in itertools.product(vs, stages):
    v = replace(s, split=sp)
    try: k = build_mma(v, tile, sb, mb, st)
    except AssertionError: continue
    fxn = program(k, dev)
    out_elems = sp * s.T * (s.J if s.E else 1) * s.N * (2 if sp > 1 and s.glu else 1)   # a split product: each slice's sums, W's rows
    def step(fxn=fxn):   # every call writes the one output: the graph runs them one after another, as a chunk's products run
      out = Tensor.empty(out_elems, dtype=dtypes.float32)
      for w in ws: out = out.custom_kernel(xq, *extra, *w, fxn=fxn)[0]
      return out.realize()
    jit = TinyJit(step)
    for _ in range(3): jit()
    Device[dev].synchronize()
    t0 = time.perf_counter()
    for _ in range(iters): jit()
    Device[dev].synchronize()
    us = (time.perf_counter() - t0) / iters / copies * 1e6
    base = base or us
    print(f"{model:6s} {name:15s} {s.type.name:5s} {s.T:5d} {s.N:6d} {s.K:6d} {str(tile):>10s} {sb:3d} {mb:3d} {sp:3d} {us:9.1f} "
          f"{flops / us / 1e6:8.1f} {read / us / 1e3:6.0f} {base / us:6.3f} {k.name.rsplit('_', 1)[1] if '_st' in k.name else 'reg':>4s}", flush=True)

def bench_generated(model: str, name: str, typ: GGMLType, T: int, N: int, K: int, iters: int, rng, opts: str | None = None) -> None:
  from apps.quantized import QuantizedLinear
  from tools.bench_quantized import time_jit, weight_copies
  w0 = PackedTensor.from_bytes(random_raw(typ, N * K, rng), typ, (K, N))
  layers = [QuantizedLinear(w) for w in [w0, *weight_copies(w0, max(2, math.ceil(64 * 2**20 / (N * K // 32 * 18))) - 1)]]
  for l in layers: l.kernels, l.opts = "generated", parse_opts(opts) if opts else None   # as the model sets its layers; --opts
  xs = [Tensor(rng.standard_normal((T, K), dtype=np.float32)).realize() for _ in range(2)]
  us = time_jit(TinyJit(lambda x: [l(x).contiguous() for l in layers]), [(x,) for x in xs], iters)[1] / len(layers) * 1e6
  print(f"{model:6s} {name:15s} {typ.name:5s} {T:5d} {N:6d} {K:6d} {us:9.1f} {2 * T * N * K / us / 1e6:8.2f}", flush=True)

def main() -> None:
  ap = argparse.ArgumentParser(prog="python3 -m tools.bench_gemm", description=__doc__.splitlines()[0])
  ap.add_argument("--tokens", type=int, default=512)
  ap.add_argument("--models", default=",".join(MODELS))
  ap.add_argument("--only", default="", help="comma list of product names to time (default: all)")
  ap.add_argument("--sweep", choices=["steps", "tiles"], help="also the variants: steps x workgroups per SM of the rule's tile "
                  "(steps), or of every tile (tiles)")
  ap.add_argument("--tiles", default="", help="the sweep's tiles instead of every tile, as TTxTN,.. (e.g. 16x128,16x256)")
  ap.add_argument("--steps", default="4,2,1", help="the sweep's sub-steps per step")
  ap.add_argument("--mbs", default="1,3,4", help="the sweep's workgroups per SM")
  ap.add_argument("--splits", default="", help="the sweep's slices of K (default: the rule's)")
  ap.add_argument("--stages", default="", help="comma list of the steps in flight through workgroup memory to time (0: the weights in "
                  "registers; default: the rule's)")
  ap.add_argument("--iters", type=int, default=20)
  ap.add_argument("--kernels", choices=["hand", "generated"], default="hand")
  ap.add_argument("--opts", help="with --kernels generated: the products' opts instead of the heuristics'")
  args = ap.parse_args()
  print(f"device {Device.DEFAULT}")
  rng = np.random.default_rng(0)
  if args.kernels == "generated":
    print(f"{'model':6s} {'product':15s} {'type':5s} {'T':>5s} {'N':>6s} {'K':>6s} {'us':>9s} {'TFLOPS':>8s}   opts {args.opts or 'heuristics'}")
    for model in args.models.split(","):
      for name, typ, N, K, form in MODELS[model]:
        if (not args.only or name in args.only.split(",")) and form in ("", "glu", "res"):
          bench_generated(model, name, typ, args.tokens, N * (2 if form == "glu" else 1), K, args.iters, rng, args.opts)
    return
  print(f"{'model':6s} {'product':15s} {'type':5s} {'T':>5s} {'N':>6s} {'K':>6s} {'tile':>10s} {'sb':>3s} {'mb':>3s} {'sp':>3s} {'us':>9s} "
        f"{'int8 TOPS':>8s} {'GB/s':>6s} {'x rule':>6s} {'wts':>4s}")
  for model in args.models.split(","):
    for name, typ, N, K, form in MODELS[model]:
      if args.only and name not in args.only.split(","): continue
      s = gemm.split_k(shape_of(typ, args.tokens, N, K, form))
      if not mma_supports(s, Device.DEFAULT): print(f"{model:6s} {name:15s}: no tensor-core kernel on {Device.DEFAULT}"); continue
      bench(model, name, s, args.sweep, args.iters, rng, [int(v) for v in args.steps.split(',')], [int(v) for v in args.mbs.split(',')],
            [int(v) for v in args.splits.split(',') if v], [int(v) for v in args.stages.split(',') if v] or [None],
            [tuple(map(int, t.split("x"))) for t in args.tiles.split(",") if t] or None)

if __name__ == "__main__": main()
