"""Youtu-LLM-2B's gate_up (12288 x 2048) and down (2048 x 6144) Q4_0 products of T tokens on this machine's CPU, the seam's
kernel for each (apps/kernels/cpu.py's), random weights: ms and GFLOPS, best of 5 in a TinyJit after 3 calls (the weights
stay in L3 between calls).   python3 products.py 1,2,4,8,32"""
import sys
import numpy as np
import apps  # noqa: F401  (tinygrad from upstream/)
sys.path[:0] = ["test"]
import time
from tinygrad import Tensor, TinyJit, Device
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quantized import QuantizedLinear
from test_quantized import random_tensor
rng = np.random.default_rng(0)
for N, K in [(12288, 2048), (2048, 6144)]:
  lin = QuantizedLinear(PackedTensor.from_bytes(random_tensor(GGMLType.Q4_0, (K, N), rng), GGMLType.Q4_0, (K, N), device="CPU"))
  for T in [int(t) for t in sys.argv[1].split(",")]:
    x = Tensor(rng.standard_normal((T, K)).astype(np.float32), device="CPU").realize()
    f = TinyJit(lambda x: lin(x).realize())
    for _ in range(3): f(x)
    best = 1e9
    for _ in range(5):
      t = time.perf_counter(); f(x); Device["CPU"].synchronize(); best = min(best, time.perf_counter() - t)
    print(f"{N}x{K} T={T}: {best * 1e3:.2f} ms, {2 * N * K * T / best / 1e9:.0f} GFLOPS", flush=True)
