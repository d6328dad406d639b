"""One decode product y = x @ W.T + residual of a random Q4_0 weight, built as the generated path builds it or as the
hand-written matvec, called a few times; the last call inside the CUDA profiler range (run under ncu --profile-from-start off).
  DEV=CUDA python3 runs/2026-11-30-reduce/ncu_product.py N K generated|hand"""
import sys
import numpy as np
import apps  # noqa: F401  (the patched tinygrad on the path)
from tinygrad import Tensor, Device
from apps.packed import PackedTensor
from apps.gguf import GGMLType
from apps.quantized import QuantizedLinear
from tools.bench_quantized import random_raw
from tools.profile import _cuda_profiler
N, K, kernels = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
w = QuantizedLinear(PackedTensor.from_bytes(random_raw(GGMLType.Q4_0, N * K, rng), GGMLType.Q4_0, (K, N)))
w.kernels = kernels
x, res = Tensor(rng.standard_normal((1, K)).astype(np.float32)).realize(), Tensor(rng.standard_normal((1, N)).astype(np.float32)).realize()
for _ in range(3): w(x, residual=res).realize()
Device[Device.DEFAULT].synchronize()
_cuda_profiler(True)
y = w(x, residual=res).realize()
Device[Device.DEFAULT].synchronize()
_cuda_profiler(False)
print("y[:4]", y.numpy()[0, :4])
