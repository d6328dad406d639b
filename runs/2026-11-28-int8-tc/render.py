import sys, numpy as np
import apps  # noqa
from tinygrad import Tensor, dtypes
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quantized import block_product
from tools.bench_quantized import random_raw
T, N, K = 512, int(sys.argv[1]), int(sys.argv[2])
typ = GGMLType[sys.argv[3]] if len(sys.argv) > 3 else GGMLType.Q4_0
rng = np.random.default_rng(0)
w = PackedTensor.from_bytes(random_raw(typ, N*K, rng), typ, (K, N))
x = Tensor.empty(T, K).realize()
block_product(w, x).realize()
