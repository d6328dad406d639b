"""tile_block_product at DeepSeek-V2-Lite's expert shapes on the CPU against float64 (x rounded to 24 bits, and x itself).
Run: PYTHONPATH=. DEV=CPU .venv/bin/python runs/2026-11-28-blk2/fullshape.py"""
import numpy as np, apps, sys
sys.path.insert(0, "test")
from tinygrad import Tensor
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quantized import tile_block_product
from tools.bench_quantized import random_raw
from apps.quants import dequantize
from test_quantized import x24
rng = np.random.default_rng(0)
for (E, N, K) in ((64, 2048, 1408), (64, 2816, 2048)):
  T, TL = 6, 16
  raw = random_raw(GGMLType.Q4_0, E*N*K, rng)
  W = dequantize(raw, GGMLType.Q4_0).reshape(E, N, K)
  x = rng.standard_normal((T, TL, K)).astype(np.float32)
  ex = rng.integers(0, E, T).astype(np.int32)
  out = tile_block_product(PackedTensor.from_bytes(raw, GGMLType.Q4_0, (K, N, E)), Tensor(x), Tensor(ex)).numpy()
  Wt = W[ex].astype(np.float64)
  for name, xr in (("x24", x24(x)), ("x", x.astype(np.float64))):
    ref = np.einsum("trk,tnk->trn", xr, Wt)
    print(E, N, K, name, np.linalg.norm(out - ref) / np.linalg.norm(ref))
