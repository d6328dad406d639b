"""The opts tinygrad's heuristics choose on a CUDA sm_90 renderer (DEV=NULL:NVCC:sm_90, nothing runs) for the generated path's
FFN products of DeepSeek-V2-Lite and GLM-4.7-Flash at full size, a 16-token chunk and one token: the routed experts' gate_up
and down (Q4_0), the shared experts' gate_up (Q5_K) and down (Q6_K). Run it on two trees (PYTHONPATH=.:TREE) to see which
products a patch changes.
  DEV=NULL:NVCC:sm_90 CACHELEVEL=0 DEBUG=3 PYTHONPATH=.:upstream python3 runs/2026-12-02-dsv2/ffn_opts.py 2>&1 | grep opts:"""
import sys
import numpy as np
import apps  # noqa: F401
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quantized import QuantizedLinear, QuantizedExpertWeights
from tinygrad import Tensor, dtypes
sys.path.insert(0, "tools")
from bench_quantized import random_raw

rng = np.random.default_rng(0)
# (model, name, type, experts E (0: dense), out N, in K, slots J, per-slot x)
PRODUCTS = [("dsv2", "gate_up_exps", GGMLType.Q4_0, 64, 2816, 2048, 6, False), ("dsv2", "down_exps", GGMLType.Q4_0, 64, 2048, 1408, 6, True),
            ("dsv2", "gate_up_shexp", GGMLType.Q5_K, 0, 5632, 2048, 0, False), ("dsv2", "down_shexp", GGMLType.Q6_K, 0, 2048, 2816, 0, False),
            ("glm", "gate_up_exps", GGMLType.Q4_0, 64, 3072, 2048, 4, False), ("glm", "down_exps", GGMLType.Q4_0, 64, 2048, 1536, 4, True),
            ("glm", "gate_up_shexp", GGMLType.Q5_K, 0, 3072, 2048, 0, False), ("glm", "down_shexp", GGMLType.Q6_K, 0, 2048, 1536, 0, False)]
only = sys.argv[1:]
for model, name, typ, E, N, K, J, per_slot in PRODUCTS:
  if only and f"{model}.{name}" not in only: continue
  ne = (K, N, E) if E else (K, N)
  w = PackedTensor.from_bytes(random_raw(typ, K * N * max(E, 1), rng), typ, ne)
  for B in (16, 1):
    print(f"== {model} {name} {typ.name} B={B} N={N} K={K} J={J}", flush=True)
    if E:
      ex = QuantizedExpertWeights([w], [N]); ex.kernels = "generated"
      sel = Tensor(rng.integers(0, E, (B, J)).astype(np.int32))
      x = Tensor.empty(B, J, K) if per_slot else Tensor.empty(B, K)
      ex(sel, x).realize()
    else:
      lin = QuantizedLinear(w); lin.kernels = "generated"
      lin(Tensor.empty(B, K)).realize()
