"""Generated decode products of packed weights (y = x @ W.T [+ residual]) as the generated path builds them, under variants of their opts,
timed in a graph: a TinyJit of 64 chained calls (each call's input the last one's output), so a call's time is what it costs
inside a captured decode step (programmatic edges included), not alone. The calls cycle through copies of the weight that
together pass 150 MB (up to one a call), so the weights stream from DRAM as a model's do: with 4 copies (runs/2026-11-30-fuse's
version) a product of a few MB read them from the 50 MB L2.

  DEV=CUDA python3 runs/2026-11-30-reduce/mv_probe.py N:K[:r][:type] ... -- VARIANT ...   (r: + residual; type: q4_0 default)
A variant: "heur" (tinygrad's heuristics) or an opts list "R1:0,R2:0,R1:0,G0:32,U0:2,L0:4" (R UNROLL, U UPCAST, L LOCAL,
G GROUP, T GROUPTOP, H THREAD), applied instead of the heuristics. Each (shape, variant) runs in its own process."""
import os, sys, subprocess, time
import numpy as np

def one(shape: str, variant: str, chain=64, count=40):
  import apps  # noqa: F401  (the patched tinygrad on the path)
  from tinygrad import Tensor, TinyJit, Device
  from tinygrad.uop.ops import KernelInfo
  from tinygrad.codegen.opt import Opt, OptOps
  from apps import dispatch
  from apps.packed import PackedTensor
  from apps.gguf import GGMLType
  from apps.quantized import QuantizedLinear
  N, K, *r = shape.split(":"); N, K = int(N), int(K)
  residual, typ = "r" in r, next((GGMLType[t.upper()] for t in r if t != "r"), GGMLType.Q4_0)
  if variant != "heur":
    ops = {"U": OptOps.UPCAST, "L": OptOps.LOCAL, "R": OptOps.UNROLL, "G": OptOps.GROUP, "T": OptOps.GROUPTOP, "H": OptOps.THREAD}
    opts = tuple(Opt(ops[o[0]], int(o[1:].split(":")[0]), int(o.split(":")[1])) for o in variant.split(","))
    orig = dispatch._portable_kernel
    def pk(spec):
      f = orig(spec)
      return lambda *a: (s := f(*a)).replace(arg=KernelInfo(name=s.arg.name, opts_to_apply=opts))
    dispatch._portable_kernel = pk
  from tools.bench_quantized import random_raw
  rng = np.random.default_rng(0)
  raw = random_raw(typ, N * K, rng)
  copies = max(4, min(chain, -(-150_000_000 // len(raw))))
  ws = [QuantizedLinear(PackedTensor.from_bytes(raw, typ, (K, N))) for _ in range(copies)]
  for w in ws: w.kernels = "generated"
  x0 = Tensor(rng.standard_normal((1, K)).astype(np.float32)).realize()
  res = Tensor(rng.standard_normal((1, N)).astype(np.float32)).realize()
  @TinyJit
  def chain_fn(x):
    for i in range(chain):
      y = ws[i % copies](x, residual=res if residual else None)
      x = (y[:, :K] if N >= K else y.pad(((0, 0), (0, K - N)))).contiguous() if N != K else y
    return x.realize()
  y1 = ws[0](x0, residual=res if residual else None).numpy()
  for _ in range(3): chain_fn(x0)
  Device[Device.DEFAULT].synchronize()
  ts = []
  for _ in range(count):
    t = time.perf_counter(); chain_fn(x0); Device[Device.DEFAULT].synchronize(); ts.append(time.perf_counter() - t)
  # the chain's copies between calls (N != K) are in the time; each variant of a shape carries the same ones
  print(f"RESULT {shape:14s} {variant:40s} {np.min(ts)/chain*1e6:7.2f} us (median {np.median(ts)/chain*1e6:7.2f})  "
        f"{ws[0].w.nbytes/np.min(ts)*chain/1e9:5.1f} GB/s  y[:4] {np.round(y1[0, :4], 4).tolist()}", flush=True)

if __name__ == "__main__":
  if sys.argv[1] == "--one": one(sys.argv[2], sys.argv[3]); sys.exit(0)
  cut = sys.argv.index("--")
  shapes, variants = sys.argv[1:cut], sys.argv[cut + 1:]
  for s in shapes:
    for v in variants:
      p = subprocess.run([sys.executable, __file__, "--one", s, v], capture_output=True, text=True, timeout=120)
      out = [l for l in p.stdout.splitlines() if l.startswith("RESULT")]
      print(out[0][7:] if out else f"{s:14s} {v:40s} FAILED: {(p.stderr.strip().splitlines() or ['?'])[-1][:150]}", flush=True)
