"""The split-K GEMM (experiments/split-k.diff applied) on the device against float64: Youtu-LLM-2B's products at a few
token counts, eager and in a TinyJit replayed on new x, each row's relative error (a wrong row shows apart)."""
import sys
sys.path[:0] = ["."]
import numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, TinyJit, Device
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quantized import QuantizedLinear
from apps.kernels import gemm
from apps.quants import dequantize
from tools.bench_quantized import random_raw
typ, rng = GGMLType.Q4_0, np.random.default_rng(0)
for name, N, K, form in (("down", 2048, 6144, "res"), ("gate_up", 6144, 2048, "glu"), ("o", 2048, 2048, "res"), ("qkv_a", 2112, 2048, "norm")):
  rows = 2 * N if form == "glu" else N
  raw = random_raw(typ, K * rows, rng)
  W = dequantize(raw, typ).reshape(rows, K).astype(np.float64)
  lin = QuantizedLinear(PackedTensor.from_bytes(raw, typ, (K, rows)))
  nw = Tensor(rng.standard_normal(K).astype(np.float32))
  for T in (1, 4, 9, 16, 32):
    s = gemm.split_k(gemm.GemmShape(typ, T, N, K, residual=form == "res", glu=form == "glu"))
    def call(x, r):
      if form == "res": return lin(x, residual=r)
      if form == "glu": return lin(x, glu=True)
      return lin(x, norm=(nw, 1e-6))
    def ref(x, r):
      if form == "norm": x = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * nw.numpy()
      y = x.astype(np.float64) @ W.T
      if form == "glu": y = y[:, :N] / (1 + np.exp(-y[:, :N])) * y[:, N:]
      return y + r if form == "res" else y
    jit = TinyJit(lambda x, r: call(x, r).contiguous().realize())
    for it in range(5):
      x = rng.standard_normal((T, K)).astype(np.float32)
      r = rng.standard_normal((T, N)).astype(np.float32)
      out = (call(Tensor(x), Tensor(r)) if it == 0 else jit(Tensor(x), Tensor(r))).numpy()
      want = ref(x, r)
      err = np.abs(out - want).max(1) / np.abs(want).max()
      if it in (0, 4) or err.max() > 1e-3:
        print(f"{name:8s} T={T:2d} split={s.split:2d} {'eager' if it == 0 else f'jit{it}'}: max row err {err.max():.2e}"
              f"{'  BAD rows ' + str(np.nonzero(err > 1e-3)[0].tolist()) if err.max() > 1e-3 else ''}", flush=True)
