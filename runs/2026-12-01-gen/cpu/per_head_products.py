"""The CPU's per-head Q4_0 products of several tokens (MLA's k_b: H heads of N x K) alone, median of 21 TinyJit calls, against
float64; `A` as the first argument: without the tokens-across-lanes form (cpu.LANES_K = 0). As run (lanes_micro.txt):
  for v in A B A B; do DEV=CPU PYTHONPATH=. .venv/bin/python runs/2026-12-01-gen/cpu/per_head_products.py $v; done
"""
import sys, time, numpy as np
import apps
from tinygrad import Tensor, TinyJit, Device
from apps.quantized import QuantizedExpertWeights
from apps.packed import PackedTensor
from apps.gguf import GGMLType
from apps.quants import dequantize
from tools.bench_quantized import random_raw
rng = np.random.default_rng(0)
if len(sys.argv) > 1 and sys.argv[1] == "A":
  import apps.kernels.cpu as _c; _c.LANES_K = 0
for H, N, K, T in [(16, 512, 128, 32), (16, 512, 128, 128), (20, 512, 192, 32), (20, 512, 192, 128), (8, 512, 256, 32)]:
  raw = random_raw(GGMLType.Q4_0, K * N * H, rng)
  kb = QuantizedExpertWeights([PackedTensor.from_bytes(raw, GGMLType.Q4_0, (K, N, H), device="CPU")], [N])
  f = TinyJit(lambda x: kb.batched(x).contiguous())
  x = Tensor(rng.standard_normal((T, H, K)).astype(np.float32), device="CPU").realize()
  for _ in range(3): f(x)
  ts = []
  for _ in range(21):
    t0 = time.perf_counter(); f(x); Device["CPU"].synchronize(); ts.append(time.perf_counter() - t0)
  out = f(x).numpy()
  W = dequantize(raw, GGMLType.Q4_0).reshape(H, N, K).astype(np.float64)
  ref = np.einsum("hnk,thk->thn", W, x.numpy().astype(np.float64))
  print(f"H{H} N{N} K{K} T{T}: {sorted(ts)[10]*1e3:.3f} ms  {2*H*N*K*T/sorted(ts)[10]/1e9:.1f} GFLOP/s  err {np.linalg.norm(out-ref)/np.linalg.norm(ref):.1e}")
