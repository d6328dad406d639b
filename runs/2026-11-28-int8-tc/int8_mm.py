"""An int8 matmul written exactly (both operands widened to int32 before the multiply), at tinygrad's heuristics: ms, TOPS and
whether it equals numpy's int64 product. Patch 0029 puts it on the int8 tensor cores, 0030 loads its operands 4 bytes a load."""
import sys, time
import numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, TinyJit, Device, dtypes
M, N, K = (int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "4096,4096,4096").split(","))
rng = np.random.default_rng(0)
an, bn = rng.integers(-128, 128, (M, K), dtype=np.int8), rng.integers(-128, 128, (N, K), dtype=np.int8)
a, b = Tensor(an).realize(), Tensor(bn).realize()
jit = TinyJit(lambda a, b: (a.cast(dtypes.int32) @ b.cast(dtypes.int32).T).realize())
for _ in range(3): out = jit(a, b)
Device[Device.DEFAULT].synchronize()
t0 = time.perf_counter()
for _ in range(10): out = jit(a, b)
Device[Device.DEFAULT].synchronize()
ms = (time.perf_counter() - t0) / 10 * 1e3
exact = np.array_equal(out.numpy().astype(np.int64), an.astype(np.int64) @ bn.astype(np.int64).T)
print(f"int8 matmul {M}x{N}x{K}: {ms:.3f} ms, {2 * M * N * K / ms / 1e9:.1f} TOPS, exact {exact}", flush=True)
