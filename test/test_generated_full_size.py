"""The generated path's decode products at the full-size models' shapes, on the emulator. The tiny presets' rows need no
padding, so the tests that run them never saw what full-size rows make the heuristics do (DeepSeek-V2-Lite's routed down:
1408 = 44 blocks, padded to 48 for a group of 16, each thread's walk of 3 unrolled; on the series without patch 0070 the
padded step dropped the others and its logits were 1.27 from every other path on the GPU). Each product a decode step of
GLM-4.7-Flash, DeepSeek-V2-Lite or Youtu-LLM-2B runs on kernels tinygrad generates (the list: `NULL_ALLOW_COPYOUT=1
DEV=NULL:NVCC:sm_90 DEBUG=3 python3 -m tools.profile --model M --kernels generated --target decode --repeat 1 --count 1`,
its kernel names), under the opts the heuristics give it at its full size for an sm_90 GPU, runs on DEV=PYTHON (GPU-style
kernels with locals, which stops at a load past a buffer) with fewer rows and experts than the model's, against numpy."""
import numpy as np
import pytest
import apps  # noqa: F401  (the pinned tinygrad first on sys.path)
from apps import dispatch
from apps.dispatch import KernelSpec
from apps.gguf import GGMLType
from apps.packed import PackedTensor
from tinygrad import Tensor, dtypes
from tinygrad.codegen import full_rewrite_to_sink
from tinygrad.codegen.opt import KernelOptError
from tinygrad.helpers import Target
from tinygrad.renderer.cstyle import NVCCRenderer
from test_quantized import random_tensor, ref_weight

Q4_0, Q5_K, Q6_K = GGMLType.Q4_0, GGMLType.Q5_K, GGMLType.Q6_K
# (type, kind, slots J, out N, in K): a decode step's generated products. "experts": J of 64 experts on the token's x;
# "experts/slot": on a slot's own x (the routed down); "batched": slot j's own weights and x (k_b, v_b a head);
# "linear+residual": the residual added in the product
PRODUCTS = [
  (Q4_0, "experts/slot", 6, 2048, 1408), (Q4_0, "experts", 6, 2816, 2048),   # DeepSeek-V2-Lite's routed down, gate_up
  (Q4_0, "experts/slot", 4, 2048, 1536), (Q4_0, "experts", 4, 3072, 2048),   # GLM-4.7-Flash's
  (Q4_0, "batched", 16, 128, 512), (Q4_0, "batched", 16, 512, 128),          # v_b, k_b of 16 heads
  (Q4_0, "batched", 20, 256, 512), (Q4_0, "batched", 20, 512, 192),          # GLM-4.7-Flash's 20
  (Q4_0, "linear+residual", 1, 2048, 10944), (Q4_0, "linear+residual", 1, 2048, 10240), (Q4_0, "linear+residual", 1, 2048, 6144),
  (Q4_0, "linear+residual", 1, 2048, 5120), (Q4_0, "linear+residual", 1, 2048, 2048),                  # downs, attn_output
  (Q4_0, "linear", 1, 21888, 2048), (Q4_0, "linear", 1, 3648, 2048), (Q4_0, "linear", 1, 5120, 768),  # [gate; up], [q; kv_a], q_b
  (Q4_0, "linear", 1, 3072, 1536), (Q4_0, "linear", 1, 128256, 2048),                                  # q_b, an output head
  (Q5_K, "linear", 1, 5632, 2048), (Q5_K, "linear", 1, 3072, 2048),                                    # shared [gate; up]
  (Q6_K, "linear+residual", 1, 2048, 2816), (Q6_K, "linear+residual", 1, 2048, 1536),                  # shared downs
  (Q6_K, "linear", 1, 102400, 2048)]                                                                   # an output head
SM90 = NVCCRenderer(Target(device="CUDA", arch="sm_90"))

def product(typ: GGMLType, kind: str, J: int, N: int, K: int, E: int, device: str, opts=None, rng=None):
  """The product's kernel on `device` with N rows (E experts): (its result, numpy's in float64). rng None: empty inputs, no
  reference (the kernel's AST is all that is wanted)."""
  op, per_slot, residual = kind.split("/")[0].split("+")[0], kind.endswith("/slot") or kind == "batched", kind.endswith("+residual")
  ne = (K, N, E) if op == "experts" else (K, N, J) if op == "batched" else (K, N)
  xshape = (1, J, K) if per_slot else (1, K)
  if rng is None:   # parts of the full size, empty: a small packing gives their fields
    small = PackedTensor.from_bytes(random_tensor(typ, (K, 2), np.random.default_rng(0)), typ, (K, 2), device="CPU")
    rows = tuple(reversed(ne[1:]))
    w = PackedTensor(small.fmt, rows, K, {k: Tensor.empty(*rows, *p.shape[1:], dtype=p.dtype, device=device) for k, p in small.parts.items()})
    x, sel, res = Tensor.empty(*xshape, device=device), Tensor.empty(1, J, dtype=dtypes.int32, device=device), Tensor.empty(1, N, device=device)
    ref = None
  else:
    raw = random_tensor(typ, ne, rng)
    w, W = PackedTensor.from_bytes(raw, typ, ne, device=device), ref_weight(raw, typ, ne).astype(np.float64)
    xn, seln = rng.standard_normal(xshape).astype(np.float32), rng.integers(0, E, (1, J)).astype(np.int32)
    resn = rng.standard_normal((1, N)).astype(np.float32)
    x, sel, res = Tensor(xn, device=device), Tensor(seln, device=device), Tensor(resn, device=device)
    xs = xn[0] if per_slot else np.repeat(xn, J, 0)
    if op == "experts": ref = np.einsum("jnk,jk->jn", W[seln[0]], xs)[None]
    elif op == "batched": ref = np.einsum("jnk,jk->jn", W, xs)[None]
    else: ref = xn @ W.T + (resn if residual else 0)
  spec = KernelSpec(op, w.fmt, 1, J, N, K, E if op == "experts" else J if op == "batched" else 1, per_slot, op == "experts",
                    dispatch.base_device(device), residual=residual, kernels="generated", opts=opts)
  out = Tensor.empty(1, N, device=device) if op == "linear" else Tensor.empty(1, J, N, device=device)
  srcs = (x, sel) if op == "experts" else (x, res) if residual else (x,)
  return dispatch.launch(spec, out, *srcs, *w.part_list()), ref

@pytest.mark.parametrize("typ,kind,J,N,K", PRODUCTS, ids=[f"{t.name}_{k}_{j}_{n}_{kk}" for t, k, j, n, kk in PRODUCTS])
def test_decode_product_under_full_size_opts(typ, kind, J, N, K):
  t, _ = product(typ, kind, J, N, K, 64, "NULL")
  opts = full_rewrite_to_sink(t.linear_with_vars()[0].src[-1].src[0], SM90).arg.applied_opts
  assert opts, "the heuristics gave it no opts"
  # fewer rows: a few workgroups of the opts on the rows (each an upcast and a local of a few rows) still divide them
  for rows in (64, 256, 1024):
    got, ref = product(typ, kind, J, rows, K, 8, "PYTHON", opts=opts, rng=np.random.default_rng(K + rows))
    try: got = got.numpy()
    except KernelOptError: continue
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5, opts
    return
  pytest.fail(f"no row count takes the opts {opts}")
