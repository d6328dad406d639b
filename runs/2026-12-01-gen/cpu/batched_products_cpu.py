import sys, numpy as np
sys.path.insert(0, "test")
from pathlib import Path
import tempfile
from test_kernels_cpu import expert_file, relerr, fp32_bound
from apps.gguf import GGMLType
from apps.quantized import QuantizedExpertWeights
from tinygrad import Tensor
for (H, N, K, T) in [(20, 512, 192, 2050), (20, 256, 512, 2050), (20, 512, 192, 340)]:
  d = Path(tempfile.mkdtemp())
  gf, W = expert_file(d, [("attn_k_b.weight", GGMLType.Q4_0, (K, N, H))], seed=H)
  kb = QuantizedExpertWeights.from_gguf(gf, "attn_k_b.weight", device="CPU")
  x = np.random.default_rng(0).standard_normal((T, H, K)).astype(np.float32)
  want = np.einsum("hnk,thk->thn", W["attn_k_b.weight"], x.astype(np.float64))
  got = kb.batched(Tensor(x, device="CPU")).numpy().reshape(T, H, N)
  print(H, N, K, T, f"{relerr(got, want):.2e}", "bound", f"{fp32_bound(K):.1e}", flush=True)
