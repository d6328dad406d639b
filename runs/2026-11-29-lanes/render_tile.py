"""The routed experts' tile kernel of a DeepSeek-V2-Lite 512-token chunk (gate_up: 160 tiles of 32 rows, 2816 x 2048 Q4_0),
lowered for sm_90 without a GPU: DEBUG=4 DEV=NULL:NVCC:sm_90 NULL_ALLOW_COPYOUT=1 CACHELEVEL=0 python3 render_tile.py"""
import numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, dtypes
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quantized import tile_block_product
from tools.bench_quantized import random_raw
E, N, K, T, TL = 64, 2816, 2048, 160, 32
w = PackedTensor.from_bytes(random_raw(GGMLType.Q4_0, E * N * K, np.random.default_rng(0)), GGMLType.Q4_0, (K, E * N))
w = PackedTensor(w.fmt, (E, N), K, {k: v.reshape(E, N, *v.shape[1:]) for k, v in w.parts.items()})
xt = Tensor.empty(T, TL, K)
expert = Tensor.zeros(T, dtype=dtypes.int32).contiguous()
tile_block_product(w, xt, expert).realize()
