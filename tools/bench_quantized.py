"""Decode matvec time of the packed quantized kernels (apps/quantized.py) on the GLM-4.7-Flash shapes, next to the bytes
they must read: per type, the median time per call under TinyJit, GB/s and the fraction of a memory bandwidth, plus a
correctness check of every shape against a float64 numpy reference (apps.quants.dequantize) computed on the host.

  DEV=CUDA python -m tools.bench_quantized                 # the H100 baseline table
  DEV=CPU  python -m tools.bench_quantized --quick         # tiny run, checks that it works
  DEV=CUDA python -m tools.bench_quantized --load glm-4.7-flash   # load a full-size preset, device memory vs file bytes
  DEV=CUDA python -m tools.bench_quantized --kernels generated --types Q4_0 --shapes 2048:6144:r,12288:2048 \
      --opts heur R1:0,R2:0,R1:0,G0:32,U0:2,L0:2 --rounds 4       # the generated product under variants of its opts

--opts: each variant is "heur" (tinygrad's heuristics) or a list of opts applied instead (R UNROLL, U UPCAST, L LOCAL, G GROUP,
T GROUPTOP, H THREAD, P PADTO: "R1:0,G0:32,U0:2,L0:4"); every variant of a shape is captured first, then timed in --rounds
interleaved rounds (a round: each variant's median over --iters), so a drift of the machine hits all of them alike.
--shapes: dense products N:K (out x in), ":r" with a residual added in the product (the model's down and output products).

Each timed call runs R kernels back to back in one TinyJit (one graph launch on CUDA) over weight copies that together
exceed the L2 cache, so the time is DRAM-bound as in a real decode step and not the cache's; expert calls each take a
fresh random selection from all n_expert experts. Times are device time (tinygrad's event timing of each launch) divided
by R; the host cost of a TinyJit replay is printed once, apart. Self-contained: numpy, apps and the pinned tinygrad only.
"""
from __future__ import annotations
import argparse, contextlib, io, math, sys, time
import numpy as np
import apps  # noqa: F401  (the pinned tinygrad first on sys.path)
from apps.gguf import GGMLType, BLOCK
from apps.quants import dequantize
from apps.quantized import QuantizedLinear, QuantizedExpertWeights, packed_bytes
from apps import KERNEL_PATHS
from apps.packed import PackedTensor, format_for
from tinygrad import Tensor, TinyJit, Device, GlobalCounters, dtypes
from tinygrad.helpers import Context

# (name, numpy weight shape (out, in), selected experts k or 0 for a dense linear)
GLM_SHAPES = [("attn_output", (2048, 5120), 0), ("attn_q_b", (5120, 768), 0), ("attn_q_a", (768, 2048), 0),
              ("gate_up_exps", (3072, 2048), 4), ("down_exps", (2048, 1536), 4)]
TYPES = ["Q4_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "Q4_1", "Q5_0", "Q5_1", "F16", "BF16", "F32"]
# byte offsets of the fp16 scale fields, which get sane values (random bytes elsewhere)
F16_FIELDS = {GGMLType.Q4_0: [0], GGMLType.Q4_1: [0, 2], GGMLType.Q5_0: [0], GGMLType.Q5_1: [0, 2], GGMLType.Q8_0: [0],
              GGMLType.Q4_K: [0, 2], GGMLType.Q5_K: [0, 2], GGMLType.Q6_K: [208]}

def random_raw(typ: GGMLType, n_weights: int, rng: np.random.Generator) -> np.ndarray:
  if typ == GGMLType.F32: return rng.standard_normal(n_weights, dtype=np.float32).view(np.uint8)
  if typ == GGMLType.F16: return rng.standard_normal(n_weights, dtype=np.float32).astype(np.float16).view(np.uint8)
  if typ == GGMLType.BF16: return (rng.standard_normal(n_weights, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
  bs, nbytes = BLOCK[typ]
  blocks = np.frombuffer(bytearray(rng.bytes(n_weights // bs * nbytes)), dtype=np.uint8).reshape(-1, nbytes)
  for off in F16_FIELDS[typ]:
    blocks[:, off:off + 2] = (rng.standard_normal(len(blocks), dtype=np.float32) * 0.01).astype(np.float16).view(np.uint8).reshape(-1, 2)
  return blocks.reshape(-1)

def weight_copies(w: PackedTensor, n: int) -> list[PackedTensor]:
  """n copies of a linear weight in distinct memory, so that timed calls over all of them read DRAM, not L2."""
  return [PackedTensor(w.fmt, w.rows, w.in_features, {k: (p + 0).contiguous().realize() for k, p in w.parts.items()}) for _ in range(n)]

def sync(): Device[Device.DEFAULT].synchronize()

def time_jit(fn, args_list, iters: int) -> tuple[float, float]:
  """(median wall time, median device time) of fn(*args), rotating over args_list; the first calls capture the JIT.
  Device time comes from tinygrad's own timing of each launch (CUDA events around a graph launch at DEBUG>=2), so host
  overhead of a JIT replay is left out of it; wall time includes it."""
  for a in args_list[:3]: fn(*a)
  sync()
  wall, dev = [], []
  for i in range(iters):
    a = args_list[i % len(args_list)]
    st = time.perf_counter()
    fn(*a)
    sync()
    wall.append(time.perf_counter() - st)
    GlobalCounters.time_sum_s = 0.0
    with Context(DEBUG=2), contextlib.redirect_stdout(io.StringIO()): fn(*a)
    dev.append(GlobalCounters.time_sum_s)
  return float(np.median(wall)), float(np.median(dev))

def jit_overhead(iters: int) -> float:
  """Wall time of replaying a TinyJit that runs one tiny kernel: the host cost every jitted call pays."""
  a = Tensor.ones(16).contiguous().realize()
  return time_jit(TinyJit(lambda a: (a + 1).contiguous()), [(a,)], iters)[0]

def copy_bandwidth(iters: int, mb: int) -> float:
  """Speed of a tinygrad elementwise copy in bytes/s, counting bytes read plus written (for reference only)."""
  n = mb * 2**20 // 4
  a = Tensor.ones(n).contiguous().realize()
  f = TinyJit(lambda a: (a * 1.0001).contiguous())
  t = time_jit(f, [(a,)], iters)[1]
  return 2 * n * 4 / t

def parse_opts(variant: str) -> tuple | None:
  """A variant's opts ("heur": None, the heuristics' own)."""
  from tinygrad.codegen.opt import Opt, OptOps
  ops = {"U": OptOps.UPCAST, "L": OptOps.LOCAL, "R": OptOps.UNROLL, "G": OptOps.GROUP, "T": OptOps.GROUPTOP, "H": OptOps.THREAD,
         "P": OptOps.PADTO}
  return None if variant == "heur" else tuple(Opt(ops[o[0]], int(o[1:].split(":")[0]), int(o.split(":")[1])) for o in variant.split(","))

def bench_shape(typ: GGMLType, name: str, shape: tuple[int, int], k: int, args, rng, residual: bool = False) -> list[dict]:
  """The shape's rows: one, or one per --opts variant (timed in interleaved rounds)."""
  N, K = shape
  act = dtypes.float16 if args.dtype == "half" else dtypes.float32
  variants = args.opts or [None]
  if k == 0:
    ne = (K, N)
    w_bytes = packed_bytes(typ, ne)
    copies = max(1, math.ceil(args.rotate_mb * 2**20 / w_bytes))
    raw = random_raw(typ, K * N, rng)
    layers = [QuantizedLinear(PackedTensor.from_bytes(raw, typ, ne))]
    w0 = layers[0].w  # identical copies in distinct memory: the timing reads DRAM, not L2
    layers += [QuantizedLinear(w) for w in weight_copies(w0, copies - 1)]
    for l in layers: l.kernels = args.kernels
    xs = [Tensor(rng.standard_normal((1, K), dtype=np.float32)).cast(act).contiguous().realize() for _ in range(3)]
    r0 = Tensor(rng.standard_normal((1, N), dtype=np.float32)).cast(act).contiguous().realize() if residual else None
    fns, ok = [], []
    for v in variants:   # each variant captured before any is timed; one whose opts do not apply is left out, said so
      for l in layers: l.opts = parse_opts(v) if v else None   # the layer's switch: its spec, its own kernel
      try:
        fn = TinyJit(lambda x: tuple(l(x, residual=r0).contiguous() for l in layers))
        for x in xs: fn(x)
      except Exception as e:
        print(f"  {typ.name:5s} {name:13s} {v}: left out ({type(e).__name__}: {str(e).splitlines()[0][:120]})", flush=True)
        continue
      fns.append(fn)
      ok.append(v)
    variants = ok
    ts = [[time_jit(fn, [(x,) for x in xs], args.iters)[1] / copies for fn in fns] for _ in range(args.rounds)]
    med = [float(np.median([r[i] for r in ts])) for i in range(len(fns))]
    outs = [[o.float().numpy() for o in fn(xs[0])] for fn in fns]
    ref = xs[0].float().numpy().astype(np.float64) @ dequantize(raw, typ).reshape(N, K).astype(np.float64).T
    if residual: ref = ref + r0.float().numpy()
    read = w_bytes + K * act.itemsize + N * act.itemsize * (2 if residual else 1)
    file_read = K * N // BLOCK[typ][0] * BLOCK[typ][1]
    return [dict(type=typ.name, name=name, shape=f"{N}x{K}", variant=v or "", us=med[i] * 1e6, rounds_us=[r[i] * 1e6 for r in ts],
                 read=read, file_read=file_read, gbs=read / med[i] / 1e9,
                 err=max(float(np.linalg.norm(o - ref) / np.linalg.norm(ref)) for o in outs[i]))
            for i, v in enumerate(variants)]
  else:
    E = args.experts
    ne = (K, N, E)
    raw = random_raw(typ, K * N * E, rng)
    ex = QuantizedExpertWeights([PackedTensor.from_bytes(raw, typ, ne)], [N])
    ex.kernels = args.kernels
    R = 32  # calls per timed step, each with its own random selection
    sels = [[Tensor(rng.choice(E, (1, k), replace=False).astype(np.int32)).realize() for _ in range(R)] for _ in range(3)]
    x_shape = (1, K) if name.startswith("gate") else (1, k, K)
    xs = [Tensor(rng.standard_normal(x_shape, dtype=np.float32)).cast(act).contiguous().realize() for _ in range(3)]
    fn = TinyJit(lambda x, *sel: tuple(ex(s, x).contiguous() for s in sel))
    t = time_jit(fn, [(x, *s) for x, s in zip(xs, sels)], args.iters)[1] / R
    outs = fn(xs[0], *sels[0])
    row_bytes = K // format_for(typ, K).block * format_for(typ, K).device_bytes
    per_expert = raw.size // E
    W = lambda e: dequantize(raw[e * per_expert:(e + 1) * per_expert], typ).reshape(N, K).astype(np.float64)
    x64 = xs[0].float().numpy().astype(np.float64)
    checked = sels[0][:2]  # the host reference for two of the selections is plenty (and fast)
    ref = [np.stack([W(e) @ (x64[0] if x64.ndim == 2 else x64[0, j]) for j, e in enumerate(s.numpy()[0])])[None] for s in checked]
    res = [o.float().numpy() for o in outs[:len(checked)]]
    read = k * N * row_bytes + int(np.prod(x_shape)) * act.itemsize + k * N * act.itemsize + k * 4
    file_read = k * N * K // BLOCK[typ][0] * BLOCK[typ][1]
  err = max(float(np.linalg.norm(r - f) / np.linalg.norm(f)) for r, f in zip(res, ref))
  return [dict(type=typ.name, name=name, shape=f"{k}x{N}x{K}", variant="", us=t * 1e6, rounds_us=[t * 1e6], read=read,
               file_read=file_read, gbs=read / t / 1e9, err=err)]

class RandomGGUF:
  """Stands in for a GGUFFile of a preset (apps.synth.plan: real names, shapes and quant mix) with random bytes made on
  demand, so loading a full-size model can be measured without writing it to disk first."""
  def __init__(self, preset: str, mix: str, rng):
    from apps.synth import plan
    from apps.gguf import TensorInfo, tensor_nbytes
    self.tensors = {n: TensorInfo(n, ne, t, 0, tensor_nbytes(ne, t)) for n, ne, t in plan(preset, mix)}
    self.rng = rng
  def tensor(self, name): return self.tensors[name]
  def tensor_data(self, name):
    info = self.tensors[name]
    return random_raw(info.type, info.n_elements, self.rng)

def load_model(preset: str, mix: str, rng) -> None:
  """Load every tensor of a preset the way apps/model.py does (experts' gate+up merged) and compare device memory
  with the file's tensor bytes (the budget: at most 10% more)."""
  import gc
  from apps.quantized import QuantizedEmbedding, load_tensor
  gf, dev = RandomGGUF(preset, mix, rng), Device.DEFAULT
  file_bytes = sum(i.nbytes for i in gf.tensors.values())
  gc.collect()
  base, peak, keep = GlobalCounters.mem_used_per_device[dev], 0, []
  st = time.perf_counter()
  for name, info in gf.tensors.items():
    if name.endswith("ffn_up_exps.weight"): continue
    if name == "token_embd.weight": keep.append(QuantizedEmbedding.from_gguf(gf, name))
    elif len(info.ne) == 1: keep.append(load_tensor(gf, name))
    elif name.endswith("ffn_gate_exps.weight"): keep.append(QuantizedExpertWeights.from_gguf(gf, [name, name.replace("gate", "up")]))
    elif len(info.ne) == 3: keep.append(QuantizedExpertWeights.from_gguf(gf, name))
    else: keep.append(QuantizedLinear.from_gguf(gf, name))
    peak = max(peak, GlobalCounters.mem_used_per_device[dev] - base)
  sync()
  dt = time.perf_counter() - st
  gc.collect()
  used = GlobalCounters.mem_used_per_device[dev] - base
  print(f"load {preset} ({mix}): {len(gf.tensors)} tensors, file tensor bytes {file_bytes / 1e9:.3f} GB, device {used / 1e9:.3f} GB "
        f"({100 * used / file_bytes - 100:+.2f}%), peak {peak / 1e9:.3f} GB, {dt:.1f} s incl. random data ({file_bytes / dt / 1e9:.2f} GB/s)")
  if used > 1.1 * file_bytes or peak > 1.1 * file_bytes: sys.exit("FAILED: device memory over file size + 10%")

def main():
  ap = argparse.ArgumentParser(prog="python3 -m tools.bench_quantized", description=__doc__.split("\n\n")[0])
  ap.add_argument("--types", default=",".join(TYPES), help="comma-separated ggml types")
  ap.add_argument("--iters", type=int, default=50, help="timed calls per shape (median)")
  ap.add_argument("--experts", type=int, default=64, help="experts in each expert tensor (GLM-4.7-Flash: 64)")
  ap.add_argument("--rotate-mb", type=int, default=200, help="weight copies per dense shape add up to this, beyond the L2 cache")
  ap.add_argument("--bw", type=float, default=3350, help="memory bandwidth in GB/s for the %% column (default: H100 SXM HBM3, 3350)")
  ap.add_argument("--dtype", choices=["float", "half"], default="half", help="activation dtype (accumulation is fp32 either way)")
  ap.add_argument("--quick", action="store_true", help="tiny sizes for a smoke run (CPU)")
  ap.add_argument("--load", metavar="PRESET", help="instead: load every tensor of an apps.synth preset (random bytes) and check memory")
  ap.add_argument("--mix", default="release", help="quant mix of --load")
  ap.add_argument("--kernels", default="hand", choices=KERNEL_PATHS, help="the hand-written kernels where the device has them, or generated")
  ap.add_argument("--shapes", help="dense products N:K[:r] (out x in, r: a residual) instead of GLM-4.7-Flash's five, comma-separated")
  ap.add_argument("--opts", nargs="+", metavar="VARIANT", help="generated products: variants of their opts (heur or an opts list)")
  ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds of the variants; a row's time is the median of its rounds")
  args = ap.parse_args()
  if args.load: return load_model(args.load, args.mix, np.random.default_rng(0))
  if args.opts and args.kernels != "generated": ap.error("--opts applies to generated products: add --kernels generated")
  if args.quick: args.iters, args.experts, args.rotate_mb = 3, 6, 1
  rng = np.random.default_rng(0)
  dev = Device.DEFAULT
  bw = args.bw * 1e9
  copy = copy_bandwidth(max(3, args.iters // 5), 8 if args.quick else 1024)
  print(f"device {dev}, activations {args.dtype}, bandwidth {bw / 1e9:.0f} GB/s for the % column (a tinygrad copy kernel moved "
        f"{copy / 1e9:.0f} GB/s read+write), host cost of one TinyJit replay {jit_overhead(args.iters) * 1e6:.0f} us (not in the "
        f"times below: device time per kernel)")
  rows = []
  shapes = [(f"{n}x{kk}" + ("+r" if r else ""), (int(n), int(kk)), 0, bool(r)) for n, kk, *r in (sh.split(":") for sh in args.shapes.split(","))] \
    if args.shapes else [(name, shape, k, False) for name, shape, k in GLM_SHAPES]
  for tname in args.types.split(","):
    typ = GGMLType[tname]
    for name, shape, k, residual in shapes:
      if shape[1] % format_for(typ, shape[1]).block: continue
      for r in bench_shape(typ, name, shape, k, args, rng, residual):
        rows.append(r)
        print(f"  {r['type']:5s} {r['name']:13s} {r['shape']:>12s} {r['us']:9.1f} us {r['read'] / 1e6:7.2f} MB {r['gbs']:7.1f} GB/s "
              f"{100 * r['read'] / r['us'] / 1e-6 / bw:5.1f}% err {r['err']:.1e}" +
              (f"  {r['variant']}  rounds {' '.join(f'{u:.1f}' for u in r['rounds_us'])}" if r["variant"] else ""), flush=True)
  print(f"\n{'type':5s} {'tensor':13s} {'shape':>12s} {'us':>8s} {'floor us':>8s} {'MB read':>8s} {'GGUF MB':>8s} {'GB/s':>7s} "
        f"{'% bw':>5s} {'relerr':>7s}")
  for r in rows:
    print(f"{r['type']:5s} {r['name']:13s} {r['shape']:>12s} {r['us']:8.1f} {r['read'] / bw * 1e6:8.1f} {r['read'] / 1e6:8.2f} "
          f"{r['file_read'] / 1e6:8.2f} {r['gbs']:7.1f} {100 * r['read'] / (r['us'] * 1e-6) / bw:5.1f} {r['err']:7.1e}  {r['variant']}")
  bound = 2e-3 if args.dtype == "half" else 1e-5
  bad = [r for r in rows if not r["err"] < bound]
  if bad:
    print(f"FAILED: {len(bad)} shapes above relerr {bound:g}: " + ", ".join(f"{r['type']} {r['name']}" for r in bad))
    sys.exit(1)
  print(f"all {len(rows)} shapes match the float64 reference (relerr < {bound:g})")

if __name__ == "__main__": main()
