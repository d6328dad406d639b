"""DeepSeek-V2-Lite's generated products whose reduce range the matvec rule pads (PADTO) and whose walk patch 0069 unrolls,
run on DEV=PYTHON (GPU-style kernels with locals) with the opts the heuristics choose on sm_90 (ffn_opts.py), against numpy:
the routed experts' down (Q4_0, 1408 = 44 blocks, padded to 48 for a group of 16) with fewer rows than the model's (the
opts split only the reduce and the rows' 16), and the same without the last UNROLL. DEV=PYTHON stops at a load past a buffer's end; here it gives a large number instead.
  PYTHONPATH=.:upstream python3 runs/2026-12-02-dsv2/emulate_padded_walk.py"""
import sys
import numpy as np
import apps  # noqa: F401
from apps import dispatch
from apps.dispatch import KernelSpec, base_device
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from apps.quants import dequantize
from tinygrad import Tensor
import tinygrad.runtime.ops_python as ops_python
from tinygrad.codegen.opt import Opt, OptOps
sys.path.insert(0, "tools")
from bench_quantized import random_raw

R, U, G, P, L, UP = OptOps.UNROLL, OptOps.UPCAST, OptOps.GROUP, OptOps.PADTO, OptOps.LOCAL, OptOps.UPCAST
SM90 = (Opt(R, 1, 0), Opt(R, 2, 0), Opt(R, 1, 0), Opt(P, 2, 16), Opt(G, 0, 16), Opt(U, 1, 4), Opt(L, 1, 4), Opt(R, 1, 0))
# a load past a buffer's end (the padded blocks' x: the GPU reads whatever lies there) gives a large finite number, and is counted:
# a product whose padded steps are masked where it matters adds nothing of it
OOB = [0]
def _load(m, i, dtype):
  if i is not None and not 0 <= i < len(m):
    OOB[0] += 1
    return 1e6 if dtype.name in ("float", "half") else 0x77777777
  return ops_python._orig_load(m, i, dtype)
ops_python._orig_load, ops_python._load = ops_python._load, _load
rng = np.random.default_rng(0)
typ, E, N, K, J, B = GGMLType.Q4_0, 8, 32, 1408, 6, 1
raw = random_raw(typ, K * N * E, rng)
W = dequantize(raw, typ).reshape(E, N, K).astype(np.float64)
w = PackedTensor.from_bytes(raw, typ, (K, N, E), device="PYTHON")
sel = rng.integers(0, E, (B, J)).astype(np.int32)
x = rng.standard_normal((B, J, K)).astype(np.float32)
ref = np.einsum("bjnk,bjk->bjn", W[sel], x)
for name, opts in (("without the last UNROLL", SM90[:-1]), ("sm_90 opts", SM90)):
  spec = KernelSpec("experts", w.fmt, B, J, N, K, E, True, True, base_device("PYTHON"), kernels="generated", opts=opts)
  y = dispatch.launch(spec, Tensor.empty(B, J, N, device="PYTHON"), Tensor(x, device="PYTHON"), Tensor(sel, device="PYTHON"),
                      *w.part_list()).numpy()
  err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
  print(f"{name}: relative L2 {err:.1e} ({OOB[0]} loads past a buffer's end)", flush=True)
  OOB[0] = 0
