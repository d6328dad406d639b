"""GGUF weights kept packed on the device, and the kernels that compute on the packed blocks.

Decode speed is the bytes read per token, so no quantized tensor is ever dequantized to a full copy: the file's blocks go
to the device split into the arrays the kernels read (fp16 scales apart from 32-bit words of quants, so every load is
aligned and wide), and each operation is one kernel that dequantizes in registers and accumulates in fp32:

  QuantizedLinear(x)                  x (..., in) -> x @ W.T (..., out), any batch (decode T=1, prefill T>1)
  QuantizedExpertWeights(sel, x)      mul_mat_id: out[..., j, :] = W[sel[..., j]] @ x; expert ids are read on the device,
                                      so one kernel graph serves every selection (TinyJit captures once); gate and up
                                      experts merged along `out` at load share one read of sel and x
  QuantizedExpertWeights.batched(x)   x (..., n_expert, in): every expert applied to its own slice (MLA's k_b / v_b)
  QuantizedEmbedding(ids)             only the looked-up rows are dequantized

The kernels are written in tinygrad's UOp DSL (so CPU, CUDA and Metal all run them) with explicit optimization choices;
`kernel_for` is the one place that decides which kernel serves a given op, type, shape and device, and
`register_kernel` is where hand-written per-backend kernels plug in. On devices that compile CUDA or MSL source, decode
matvecs (up to 8 tokens: a decode step of up to 8 sequences) go to apps/kernels/matvec.py, which can also fold in the
layer's rms norm, SwiGLU, expert mix and residual add (the layers' keyword arguments); where no kernel does a fusion,
the layer runs it as separate ops. A layer's `call` gives the launch it would make instead of running it:
`dispatch.run(*calls)` launches calls of one input as one kernel where the matvecs can go side by side (a shared expert's
gate_up beside the routed experts'), and `run_sum(*calls)` adds calls' results of one shape in one kernel (the routed
experts' down and the shared expert's).

The formats and packed tensors are apps/packed.py; the kernel seam (KernelSpec, kernel_for, register_kernel, run,
run_sum) is apps/dispatch.py.
"""
from __future__ import annotations
import math
from dataclasses import replace
from typing import Sequence
import numpy as np
from apps.gguf import GGUFFile, GGMLType, GGUFError
from tinygrad import Tensor, Device, dtypes
from tinygrad.dtype import DType
from tinygrad.helpers import prod
from tinygrad.uop.ops import sint, UOp, Ops, AxisType, KernelInfo
from apps.readback import to_device
from apps.packed import PackedTensor, format_for
from apps import dispatch
from apps.dispatch import KernelSpec, KernelCall, base_device
from apps.kernels import Fusions, KernelModules, to_bound, cached

# ---------------------------------------------------------------- the layers

# A chunk's products of 32-weight blocks on the generated path, where the device has int8 tensor cores (NVIDIA sm_80+, patches
# 0029-0032): tensor ops that compute what the hand-written integer GEMM computes, in kernels of tinygrad's own.
BLOCK_PRODUCT_TYPES = (GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q8_0, GGMLType.Q4_K, GGMLType.Q5_K,
                       GGMLType.Q6_K)
TILE_BLOCK_PRODUCT_TYPES = (GGMLType.Q4_0, GGMLType.Q8_0)   # tile_block_product's: one scale a block, no min
BLOCK_PRODUCT_ROWS = 64   # tokens of a chunk from which its products are block products (a decode step's stay matvecs)

def int8_tensor_cores(device: str) -> bool:
  """Whether `device`'s renderer has a tensor core for int8 operands with int32 sums."""
  return any(tc.dtype_in == dtypes.int8 and tc.dtype_out == dtypes.int32 for tc in Device[device].renderer.tensor_cores)

def takes_block_products(kernels: str, rows: int, typ: GGMLType, device: str) -> bool:
  """Whether a product of `rows` rows of a `typ` weight is a block product: a chunk's, on the generated path, on int8 tensor
  cores."""
  return kernels == "generated" and rows >= BLOCK_PRODUCT_ROWS and typ in BLOCK_PRODUCT_TYPES and int8_tensor_cores(device)

def x_parts(x: Tensor) -> tuple[Tensor, Tensor]:
  """x (T, K) rounded per block of 32 to 24-bit integers X, as the hand-written integer kernels round it (x24 in the tests),
  as three int8 parts a block (T, K/32, 3, 32) with X = 65536 h + 256 m + l, and the blocks' scales (T, K/32)."""
  T, K = x.shape
  xb = x.reshape(T, K // 32, 32)
  sx = xb.abs().max(-1) / 8323072                          # 127 * 65536: h stays within int8
  v = xb * (sx == 0).where(0.0, sx.reciprocal()).unsqueeze(-1)
  X = (v.sign() * (v.abs() + 0.5).floor()).cast(dtypes.int32)   # half away from zero
  l = ((X + 128) & 255) - 128
  Y = (X - l) >> 8
  m = ((Y + 128) & 255) - 128
  return Tensor.stack((Y - m) >> 8, m, l, dim=2).cast(dtypes.int8).contiguous(), sx.contiguous()

def _bytes(w: PackedTensor, part: str) -> Tensor: return w.parts[part].bitcast(dtypes.uint8)

def _fields(b: Tensor, n: int, width: int) -> Tensor:
  """bytes (*lead, m) -> (*lead, n, m): field i of each byte, its bits width*i.. (ggml's planes of high bits)."""
  return Tensor.stack(*[(b >> (width * i)) & ((1 << width) - 1) for i in range(n)], dim=-2)

def int8_quants(w: PackedTensor) -> Tensor:
  """A Q4_0 / Q8_0 weight's quants as int8 (N, K/32, 32), the block's scale left out."""
  if w.type == GGMLType.Q8_0: return w.parts["qs"].bitcast(dtypes.int8)
  b = _bytes(w, "qs")                                       # Q4_0: element i in the low nibble of byte i, 16 + i in the high
  return (Tensor.cat(b & 15, b >> 4, dim=-1).cast(dtypes.int8) - 8).contiguous()

def block_quants(w: PackedTensor) -> tuple[Tensor, Tensor, Tensor | None]:
  """w as weight = scale * q - min a block of 32: the quants q as int8 (*rows, K/32, 32), the scales (*rows, K/32, S) in fp32
  (S = 2: Q6_K's two sub-blocks of 16 a block) and the mins (*rows, K/32), None where there are none. Each scale and min is
  exact in fp32 (an fp16 times a small integer); the K-quants' q in natural order from ggml's nibble and high-bit planes."""
  t, (*R, nB, _) = w.type, w.parts["qs" if "qs" in w.parts else "ql"].shape
  f32 = lambda part, i: w.parts[part][..., i:i + 1].float()           # (*R, nB, 1)
  if t in TILE_BLOCK_PRODUCT_TYPES: return int8_quants(w), f32("d", 0), None
  if t in (GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1):
    b = _bytes(w, "qs")
    q = Tensor.cat(b & 15, b >> 4, dim=-1)                            # weight i: byte i's low nibble, 16 + i: its high
    if t != GGMLType.Q4_1: q = q | (_fields(_bytes(w, "qh"), 8, 1).transpose(-1, -2).reshape(*R, nB, 32) << 4)   # qh's bit i
    if t == GGMLType.Q5_0: return (q.cast(dtypes.int8) - 16).contiguous(), f32("d", 0), None
    return q.cast(dtypes.int8).contiguous(), f32("dm", 0), -f32("dm", 1)[..., 0]
  if t in (GGMLType.Q4_K, GGMLType.Q5_K):
    b = _bytes(w, "qs").reshape(*R, nB, 4, 1, 32)                     # 64 weights a 32 bytes: the low nibbles, then the high
    q = Tensor.cat(b & 15, b >> 4, dim=-2).reshape(*R, nB, 8, 32)
    if t == GGMLType.Q5_K: q = q | (_fields(_bytes(w, "qh").reshape(*R, nB, 32), 8, 1) << 4)   # sub-block s: bit s of byte l
    scm = _bytes(w, "scm").float()                                    # 8 six-bit scales, then 8 mins
    scale, mins = f32("dm", 0) * scm[..., :8], f32("dm", 1) * scm[..., 8:]
    return q.cast(dtypes.int8).reshape(*R, nB * 8, 32).contiguous(), scale.reshape(*R, nB * 8, 1), mins.reshape(*R, nB * 8)
  if t == GGMLType.Q6_K:   # halves of 128: ql's 64 bytes (l, l + 32) low nibbles then high, qh's 32 bytes 2 bits a run of 32
    ql = _bytes(w, "ql").reshape(*R, nB, 2, 2, 32)
    q = Tensor.cat(ql & 15, ql >> 4, dim=-2) | (_fields(_bytes(w, "qh").reshape(*R, nB, 2, 32), 4, 2) << 4)
    scale = f32("d", 0) * w.parts["sc"].bitcast(dtypes.int8).float()   # a scale a 16
    return (q.cast(dtypes.int8) - 32).reshape(*R, nB * 8, 32).contiguous(), scale.reshape(*R, nB * 8, 2), None
  raise ValueError(f"{w.name}: no block product for {t.name}")

def block_product(w: PackedTensor, x: Tensor, norm: tuple[Tensor, float] | None = None) -> Tensor:
  """x @ W.T (..., out) for a weight of 32-weight blocks (BLOCK_PRODUCT_TYPES) as integer tensor ops: each block's int32 sums
  of x's three parts against its quants (the innermost reduction, one block: the tensor cores take it), combined and scaled by
  both blocks' scales in fp32, less the block's min times x's block sum, summed over the blocks. Exact but for x's 24-bit
  rounding and the fp32 sums. Two scales a block (Q6_K): x's parts twice, each copy zero outside one half. A weight of rows
  (J, N) (a weight a head) takes x (..., J, in): head j's rows times weight j. norm=(w, eps): rms_norm(x) * w first; a row's
  1 / rms scales all its blocks alike, so it goes into x's block scales, not into x (as the hand-written GEMM applies it)."""
  *heads, N = w.rows
  K, nb, J = w.in_features, w.in_features // 32, prod(heads)
  lead = x.shape[:x.ndim - 1 - len(heads)]
  x = x.reshape(-1, K).float()
  xw = x * norm[0] if norm is not None else x
  xq, sx = x_parts(xw)
  if norm is not None: sx = sx * (rs := (x.square().mean(-1, keepdim=True) + norm[1]).rsqrt())
  T, (q, scale, mins) = xq.shape[0] // J, block_quants(w)
  S = scale.shape[-1]
  if S > 1:
    half = ((Tensor.arange(32) // (32 // S)).unsqueeze(0) == Tensor.arange(S).unsqueeze(1)).to(x.device)
    xq = half.reshape(1, 1, S, 1, 32).where(xq.reshape(T * J, nb, 1, 3, 32), 0).cast(dtypes.int8).contiguous()
  dots = (xq.reshape(T, J, 1, nb, *(S,) * (S > 1), 3, 32).cast(dtypes.int32) *
          q.reshape(1, J, N, nb, *(1,) * (S > 1), 1, 32).cast(dtypes.int32)).sum(-1)
  # the parts' weights 65536, 256, 1 from an arange: constants in the kernel (a tensor of them would be a host upload, which
  # splits a captured chunk's graph). Q4_0's |q| <= 8 keeps a block's X within int32 (65536 * 32512 + 257 * 32768 < 2^31),
  # so it is summed in integers and converted once a block (a quarter-rate instruction on the GPUs); the others' parts in fp32
  p = Tensor.arange(3).to(x.device)
  coef = (p == 0).where(65536, (p == 1).where(256, 1))
  X = (dots * coef.cast(dtypes.int32)).sum(-1).cast(dtypes.float) if w.type == GGMLType.Q4_0 else (dots.cast(dtypes.float) * coef.float()).sum(-1)
  X = X * sx.reshape(T, J, 1, nb, *(1,) * (S > 1))
  y = (X * scale.reshape(1, J, N, nb, S)).sum(-1) if S > 1 else X * scale.reshape(1, J, N, nb)
  if mins is not None:
    xsum = xw.reshape(T, J, 1, nb, 32).sum(-1) * (rs.reshape(T, J, 1, 1) if norm is not None else 1)
    y = y - xsum * mins.reshape(1, J, N, nb)
  return y.sum(-1).reshape(*lead, *heads, N)

def block_product_bytes(gf: GGUFFile) -> int:
  """Device bytes a generated chunk's block products make for themselves at most: a block's weights as int8 quants
  (block_quants, one byte a weight, made each chunk; the routed experts' only where their tiles take them), the largest
  block's."""
  per: dict[str, int] = {}
  for t in gf.tensors.values():
    if not t.name.startswith("blk.") or t.type not in (TILE_BLOCK_PRODUCT_TYPES if "_exps." in t.name else BLOCK_PRODUCT_TYPES): continue
    block = t.name.split(".")[1]
    per[block] = per.get(block, 0) + t.n_elements
  return max(per.values(), default=0)

@cached
def _tile_block_kernel(T: int, TL: int, N: int, nb: int, E: int, int_parts: bool):
  """block_product for tiles of rows routed to one expert each: out[t, r] = x[t, r] @ W[expert[t]].T, W's int8 quants and
  scales indexed by the tile's expert (tensor ops would gather by a one-hot sum)."""
  def kernel(out: UOp, xq: UOp, sx: UOp, expert: UOp, wq: UOp, d: UOp) -> UOp:
    t, r, n = UOp.range(T, 0), UOp.range(TL, 1), UOp.range(N, 2)
    b, p, k = UOp.range(nb, 3, AxisType.REDUCE), UOp.range(3, 4, AxisType.REDUCE), UOp.range(32, 5, AxisType.REDUCE)
    e, row = expert[t].cast(dtypes.weakint).maximum(0).minimum(E - 1), t * TL + r
    dot = (xq[row, b, p, k].cast(dtypes.int32) * wq[e, n, b, k].cast(dtypes.int32)).reduce(k, arg=Ops.ADD)
    coef = p.eq(0).where(UOp.const(65536, dtypes.int32), p.eq(1).where(UOp.const(256, dtypes.int32), UOp.const(1, dtypes.int32)))
    X = (dot * coef).reduce(p, arg=Ops.ADD).cast(dtypes.float32) if int_parts else \
        (dot.cast(dtypes.float32) * coef.cast(dtypes.float32)).reduce(p, arg=Ops.ADD)
    acc = (X * sx[row, b] * d[e, n, b].cast(dtypes.float32)).reduce(b, arg=Ops.ADD)
    return out[t, r, n].store(acc).end(t, r, n).sink(arg=KernelInfo(name=f"tile_block_product_{T}_{TL}_{N}_{nb * 32}"))
  return kernel

def tile_block_product(w: PackedTensor, xt: Tensor, expert: Tensor) -> Tensor:
  """xt (T, TL, K) tiles of rows, expert int (T,) -> (T, TL, N): tile t times its expert's Q4_0 / Q8_0 weight, as
  block_product computes a product."""
  (T, TL, K), (E, N) = xt.shape, w.rows
  xq, sx = x_parts(xt.reshape(T * TL, K))
  fxn = _tile_block_kernel(T, TL, N, K // 32, E, w.type == GGMLType.Q4_0)
  return Tensor.empty(T, TL, N, device=xt.device).custom_kernel(xq, sx, expert, int8_quants(w), w.parts["d"].reshape(E, N, K // 32), fxn=fxn)[0]

def _check_device(w: PackedTensor, t: Tensor, what: str) -> None:
  if t.device != w.device: raise ValueError(f"{w.name}: {what} is on {t.device}, the weights on {w.device}")

def _flat(t: Tensor, keep: int, what: str, slices: bool = True) -> tuple[Tensor, sint, int]:
  """t (*lead, *tail) with `keep` trailing dims -> (t as (Bmax, *tail), B = prod(lead), Bmax). A symbolic lead (a prefill
  chunk of variable length) is padded to its bound, since kernels take concrete shapes; callers slice the result back.
  slices: Fusions.slices (to_bound)."""
  if t.ndim < keep: raise ValueError(f"{what}: shape {t.shape} has fewer than {keep} dims")
  lead, tail = t.shape[:t.ndim - keep], t.shape[t.ndim - keep:]
  if not all(isinstance(d, int) for d in tail): raise ValueError(f"{what}: symbolic trailing dims {tail} are not supported")
  (t,), B, Bmax = to_bound(t.reshape(prod(lead), *tail), slices=slices)
  return t, B, Bmax

def _input_stride(x: Tensor, K: int, prefix: bool) -> int | None:
  """The x_stride of a spec for input x whose last axis holds the K inputs: 0 when it is exactly K, its length when
  `prefix` allows it to be longer (the first K are the input), None when x does not fit."""
  n = x.shape[-1] if x.ndim else None
  if n == K: return 0
  return n if prefix and isinstance(n, int) and n > K else None

def _unflat(y: Tensor, B: sint, Bmax: int, shape: tuple) -> Tensor:
  return (y if isinstance(B, int) else y[:B]).reshape(*shape)


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
  """RMSNorm (fp32): x / sqrt(mean(x^2) + eps) * weight."""
  xf = x.float()
  return xf * (xf.square().mean(-1, keepdim=True) + eps).rsqrt() * weight

class QuantizedLinear:
  """y = x @ W.T for a GGUF 2D weight with ne = (in_features, out_features), W kept packed on the device."""
  # which kernels compute it (KERNEL_PATHS), with which fusions, from which kernel modules: the model sets them on its layers
  kernels = "hand"
  opts: tuple | None = None   # the generated product's opts instead of the heuristics' (tools.bench_quantized's variants)
  fusions = Fusions()
  kernel_modules = KernelModules()
  def __init__(self, w: PackedTensor):
    if len(w.rows) != 1: raise ValueError(f"{w.name}: a linear weight is 2D, got rows {w.rows}")
    self.w, self.in_features, self.out_features, self.type = w, w.in_features, w.rows[0], w.type

  @staticmethod
  def from_gguf(gf: GGUFFile, name: str | list[str], device: str | None = None) -> QuantizedLinear:
    """One 2D weight, or several of one type stacked along `out` (e.g. [gate; up], read by one kernel)."""
    if isinstance(name, str): return QuantizedLinear(PackedTensor.from_gguf(gf, name, device, ndim=2))
    infos = [gf.tensor(n) for n in name]
    for i in infos:
      if len(i.ne) != 2 or i.ne[0] != infos[0].ne[0] or i.type != infos[0].type:
        raise GGUFError(f"tensors {', '.join(name)} cannot be stacked: they need 2 dims, one row length and one type")
    return QuantizedLinear(PackedTensor.upload([(gf.tensor_data(i.name), i.ne) for i in infos], infos[0].type, 0, device, "+".join(name)))

  def __call__(self, x: Tensor, norm: tuple[Tensor, float] | None = None, residual: Tensor | None = None, glu: bool = False,
               prefix: bool = False) -> Tensor:
    """x @ W.T, with optional fusions: norm=(w, eps) applies rms_norm(x) * w first; glu treats W as [gate; up] and returns
    silu(x @ gate.T) * (x @ up.T); residual is added to the result. prefix: the input is x[..., :in_features] (x is a
    stacked layer's output; a kernel that can reads it in place, else it is sliced)."""
    return dispatch.run(self.call(x, norm, residual, glu, prefix))[0]

  def call(self, x: Tensor, norm: tuple[Tensor, float] | None = None, residual: Tensor | None = None, glu: bool = False,
           prefix: bool = False) -> KernelCall | Tensor:
    """__call__'s kernel launch, for `run` (or its result, where no one kernel does it)."""
    if (stride := _input_stride(x, self.in_features, prefix)) is None:
      raise ValueError(f"{self.w.name}: input shape {x.shape} does not end in in_features={self.in_features}")
    _check_device(self.w, x, "the input")
    N = self.out_features // 2 if glu else self.out_features
    xs, B, Bmax = _flat(x, 1, self.w.name, self.fusions.slices)
    if takes_block_products(self.kernels, Bmax, self.type, x.device):
      # x padded to its bound and the product made there in full, as the kernels take them: sliced back to a symbolic token
      # count, the product's kernel would compute only those rows, its every load masked
      xs = xs[:, :self.in_features] if stride else xs
      y = block_product(self.w, xs, norm).contiguous()
      if glu: y = y[..., :N].silu() * y[..., N:]
      y = _unflat(y, B, Bmax, (*x.shape[:-1], N))
      return y if residual is None else residual + y
    spec = KernelSpec("linear", self.w.fmt, Bmax, 1, N, self.in_features, 1, False, False, base_device(x.device),
                      norm=norm is not None, residual=residual is not None, glu=glu, eps=norm[1] if norm else 0.0, x_dtype=x.dtype,
                      x_stride=stride, kernels=self.kernels, fusions=self.fusions, modules=self.kernel_modules, opts=self.opts)
    if stride and dispatch.kernel_cached(spec) is None: return self(x[..., :self.in_features], norm, residual, glu)
    if dispatch.kernel_cached(spec) is None:  # the same math as separate ops
      y = self(rms_norm(x, *norm).cast(x.dtype) if norm is not None else x)
      if glu: y = y[..., :N].silu() * y[..., N:]
      return y if residual is None else residual + y
    extra = ([norm[0]] if norm is not None else []) + ([_flat(residual, 1, self.w.name, self.fusions.slices)[0]] if residual is not None else [])
    return KernelCall(spec, (Tensor.empty(Bmax, N, dtype=x.dtype, device=x.device), xs, *extra, *self.w.part_list()),
                      lambda y: _unflat(y, B, Bmax, (*x.shape[:-1], N)))

class QuantizedExpertWeights:
  """MoE expert weights, GGUF 3D ne = (in, out, n_expert). A list of names (e.g. gate and up) is merged along `out`
  at load, so one kernel computes all of them from one read of the routing and of x."""
  kernels, fusions, kernel_modules = "hand", Fusions(), KernelModules()  # as QuantizedLinear's
  def __init__(self, groups: list[PackedTensor], outs: list[int]):
    self.groups, self.outs = groups, outs
    w0 = groups[0]
    self.in_features, self.n_expert, self.out_features = w0.in_features, w0.rows[0], sum(outs)
    self.type = w0.type
    self.name = "+".join(g.name for g in groups)

  @staticmethod
  def from_gguf(gf: GGUFFile, names: str | list[str], device: str | None = None) -> QuantizedExpertWeights:
    names = [names] if isinstance(names, str) else list(names)
    infos = [gf.tensor(n) for n in names]
    for i in infos:
      if len(i.ne) != 3: raise GGUFError(f"tensor '{i.name}' has {len(i.ne)} dimensions {list(i.ne)}, expected 3 (in, out, n_expert)")
      if (i.ne[0], i.ne[2]) != (infos[0].ne[0], infos[0].ne[2]):
        raise GGUFError(f"tensors '{infos[0].name}' {list(infos[0].ne)} and '{i.name}' {list(i.ne)} cannot merge: in or n_expert differ")
    # consecutive tensors of one type merge into one packed tensor (one kernel); a different type starts a new group
    runs: list[list] = []
    for info in infos:
      if runs and runs[-1][0].type == info.type: runs[-1].append(info)
      else: runs.append([info])
    groups, outs = [], []
    for same in runs:
      groups.append(w := PackedTensor.upload([(gf.tensor_data(x.name), x.ne) for x in same], same[0].type, 1, device, "+".join(x.name for x in same)))
      outs.append(w.rows[1])
    return QuantizedExpertWeights(groups, outs)

  def _cat(self, ys: list[Tensor]) -> Tensor: return ys[0] if len(ys) == 1 else ys[0].cat(*ys[1:], dim=-1)

  def __call__(self, sel: Tensor, x: Tensor, norm: tuple[Tensor, float] | None = None, glu: bool = False,
               mix: Tensor | None = None, residual: Tensor | None = None) -> Tensor:
    """sel int (..., k) expert ids, x (..., in) or (..., k, in) -> (..., k, out_total). Fusions: norm=(w, eps) normalizes
    x first (x shared by the k slots); glu treats the rows as [gate; up] (one group) and gives silu(gate) * up; mix
    (..., k) weights the k slots and sums them (-> (..., out)); residual is added to the result."""
    return dispatch.run(self.call(sel, x, norm, glu, mix, residual))[0]

  def call(self, sel: Tensor, x: Tensor, norm: tuple[Tensor, float] | None = None, glu: bool = False,
           mix: Tensor | None = None, residual: Tensor | None = None) -> KernelCall | Tensor:
    """__call__'s kernel launch, for `run` (or its result, where no one kernel does it)."""
    if norm is None and not glu and mix is None and residual is None: return self._plain(sel, x)
    J, w, per_slot = sel.shape[-1], self.groups[0], self._check(sel, x)
    N = self.out_features // 2 if glu else self.out_features
    lead = sel.shape[:-1]
    sels, B, Bmax = _flat(sel.cast(dtypes.int32), 1, self.name, self.fusions.slices)   # a symbolic chunk of tokens runs its bound
    ok = len(self.groups) == 1 and isinstance(J, int) and not (norm is not None and per_slot)
    spec = KernelSpec("experts", w.fmt, Bmax, J, N, self.in_features, self.n_expert, per_slot, True,
                      base_device(x.device), norm=norm is not None, residual=residual is not None, glu=glu, mix=mix is not None,
                      eps=norm[1] if norm else 0.0, x_dtype=x.dtype, kernels=self.kernels, fusions=self.fusions, modules=self.kernel_modules)
    if not ok or dispatch.kernel_cached(spec) is None:  # the same math as separate ops
      y = self._plain(sel, rms_norm(x, *norm).cast(x.dtype) if norm is not None else x)
      if glu: y = y[..., :N].silu() * y[..., N:]
      if mix is not None: y = (y.float() * mix.unsqueeze(-1)).sum(-2).cast(x.dtype)
      return y if residual is None else residual + y
    for t in (sel, x): _check_device(w, t, "the input")
    xs = _flat(x, 2 if per_slot else 1, self.name, self.fusions.slices)[0]
    extra = [sels] + ([_flat(mix.float(), 1, self.name, self.fusions.slices)[0]] if mix is not None else []) + \
            ([norm[0]] if norm is not None else []) + \
            ([_flat(residual, 1 if mix is not None else 2, self.name, self.fusions.slices)[0]] if residual is not None else [])
    oshape = (Bmax, N) if mix is not None else (Bmax, J, N)
    return KernelCall(spec, (Tensor.empty(*oshape, dtype=x.dtype, device=x.device), xs, *extra, *w.part_list()),
                      lambda y: _unflat(y, B, Bmax, (*lead, N) if mix is not None else (*lead, J, N)))

  def _check(self, sel: Tensor, x: Tensor) -> bool:
    """Validate the arguments; True when x has one row per slot (..., k, in), False when shared (..., in)."""
    if sel.ndim == 0 or not dtypes.is_int(sel.dtype):
      raise ValueError(f"{self.name}: sel must be an int tensor (..., k), got {sel.shape} {sel.dtype}")
    if not isinstance(sel.shape[-1], int): raise ValueError(f"{self.name}: the number of selected experts must be concrete, got {sel.shape[-1]}")
    if x.ndim == 0 or x.shape[-1] != self.in_features: raise ValueError(f"{self.name}: input shape {x.shape} does not end in in={self.in_features}")
    if x.shape[:-1] == sel.shape: return True
    if x.shape[:-1] == sel.shape[:-1]: return False
    raise ValueError(f"{self.name}: input shape {x.shape} fits neither sel's {sel.shape} nor {sel.shape[:-1]} (+ in)")

  def _plain(self, sel: Tensor, x: Tensor) -> Tensor:
    J, per_slot = sel.shape[-1], self._check(sel, x)
    for w in self.groups: _check_device(w, x, "the input"); _check_device(w, sel, "sel")
    sels, B, Bmax = _flat(sel.cast(dtypes.int32), 1, self.name, self.fusions.slices)
    xs, _, _ = _flat(x, 2 if per_slot else 1, self.name, self.fusions.slices)
    # a chunk's entries in tiles an expert, where there are 8 an expert or more on average: on the generated path, and where
    # a hand-written kernel takes such tiles (the CPU's); the GPUs' hand-written GEMMs group the entries themselves
    if Bmax * J >= 8 * self.n_expert and (self.kernels == "generated" or all(dispatch.hand_written(KernelSpec(
        "experts", w.fmt, 1, TILE, n, self.in_features, self.n_expert, True, True, base_device(x.device), per_tile=True,
        fusions=self.fusions, modules=self.kernel_modules)) for w, n in zip(self.groups, self.outs))):
      return _unflat(self._tiled(sels, xs, per_slot), B, Bmax, (*sel.shape, self.out_features))
    ys = []
    for w, n in zip(self.groups, self.outs):
      spec = KernelSpec("experts", w.fmt, Bmax, J, n, self.in_features, self.n_expert, per_slot, True, base_device(x.device),
                        kernels=self.kernels, fusions=self.fusions, modules=self.kernel_modules)
      ys.append(dispatch.launch(spec, Tensor.empty(Bmax, J, n, dtype=x.dtype, device=x.device), xs, sels, *w.part_list()))
    return _unflat(self._cat(ys), B, Bmax, (*sel.shape, self.out_features))

  def _tiled(self, sels: Tensor, xs: Tensor, per_slot: bool) -> Tensor:
    """A chunk's entries (B, J) as products of tiles: the entries routed to each expert in tiles of TILE, each tile one
    product with its expert's weights (a weight dequantized once serves the tile, where a kernel an entry dequantizes it
    for each), the rows back in entry order after. The generated kernels, or the CPU's hand-written ones."""
    Bmax, J = sels.shape
    # wide tiles where the experts average one and a half of them (48 entries: DeepSeek-V2-Lite's 512-token chunk, +2.0%); at
    # one (GLM-4.7-Flash's 32) the padding of half-empty wide tiles costs more than they win (-2.7%)
    tile = 2 * TILE if Bmax * J >= 3 * TILE * self.n_expert else TILE
    entry, expert, slot, count = expert_tiles(sels, self.n_expert, tile)
    xt = dispatch.gather_rows(xs.reshape(Bmax * J, -1) if per_slot else xs, entry if per_slot else entry // J)
    T, ys = entry.shape[0] // tile, []
    for w, n in zip(self.groups, self.outs):
      if w.type in TILE_BLOCK_PRODUCT_TYPES and int8_tensor_cores(xs.device):
        y = tile_block_product(w, xt.reshape(T, tile, -1), expert).cast(xs.dtype)
      else:
        spec = KernelSpec("experts", w.fmt, T, tile, n, self.in_features, self.n_expert, True, True, base_device(xs.device),
                          per_tile=True, kernels=self.kernels, fusions=self.fusions, modules=self.kernel_modules)
        # a kernel that skips the tiles' padding (the CPU's) takes each tile's expert + n_expert x its padding entries
        sel = expert + self.n_expert * (tile - count) if getattr(dispatch.kernel_cached(spec), "tile_padding", False) else expert
        y = dispatch.launch(spec, Tensor.empty(T, tile, n, dtype=xs.dtype, device=xs.device), xt.reshape(T, tile, -1), sel, *w.part_list())
      ys.append(dispatch.gather_rows(y.reshape(T * tile, n), slot).reshape(Bmax, J, n))
    return self._cat(ys)

  def batched(self, x: Tensor, prefix: bool = False, slot_stride: int = 0) -> Tensor:
    """x (..., n_expert, in) -> (..., n_expert, out): expert e applied to x[..., e, :], no gather. prefix: x's last axis
    may be longer, the input is its first `in` entries (a kernel that can reads them in place, e.g. q_nope inside q).
    slot_stride: x is (..., L) instead, expert e's input starts at e * slot_stride (L may be longer still: the heads of a
    stacked [q; kv_a] output; a kernel reads it in place: one token's, and the decode matvecs' several tokens')."""
    J = self.n_expert
    if slot_stride:
      L = x.shape[-1] if x.ndim else 0
      if not isinstance(L, int) or slot_stride < self.in_features or L < J * slot_stride:
        raise ValueError(f"{self.name}: batched input shape {x.shape} holds no {J} slots of {slot_stride} (in={self.in_features})")
      sliced = lambda: self.batched(x[..., :J * slot_stride].reshape(*x.shape[:-1], J, slot_stride), prefix=True)
      if not (isinstance(rows := prod(x.shape[:-1]), int) and L > J * slot_stride): return sliced()
      # read in place: one token's slots, or several tokens' (rows L apart, a decode matvec's x_row)
      xs, B, Bmax, stride, lead, row = x.reshape(rows, L), rows, rows, slot_stride, (*x.shape[:-1], J), L if rows > 1 else 0
    else:
      if x.ndim < 2 or x.shape[-2] != J or (stride := _input_stride(x, self.in_features, prefix)) is None:
        raise ValueError(f"{self.name}: batched input shape {x.shape} does not end in (n_expert, in)={(J, self.in_features)}")
      xs, B, Bmax = _flat(x, 2, self.name, self.fusions.slices)
      sliced, lead, row = (lambda: self.batched(x[..., :self.in_features])), x.shape[:-1], 0
    for w in self.groups: _check_device(w, x, "the input")
    if len(self.groups) == 1 and takes_block_products(self.kernels, Bmax, self.type, x.device):   # as QuantizedLinear's: in full
      if row: return sliced()
      return _unflat(block_product(self.groups[0], xs[..., :self.in_features] if stride else xs).contiguous(), B, Bmax, (*lead, self.out_features))
    specs = [KernelSpec("batched", w.fmt, Bmax, J, n, self.in_features, J, True, False, base_device(x.device),
                        x_stride=stride, x_row=row, kernels=self.kernels, fusions=self.fusions, modules=self.kernel_modules)
             for w, n in zip(self.groups, self.outs)]
    if stride and any(dispatch.kernel_cached(sp) is None for sp in specs): return sliced()
    # rows read in place only where the decode matvecs serve the heads taken out too (more tokens: the GEMM's, with the copy)
    if row and not dispatch.matvecs_serve(tuple(replace(sp, x_row=0) for sp in specs)): return sliced()
    ys = []
    for w, n, spec in zip(self.groups, self.outs, specs):
      ys.append(dispatch.launch(spec, Tensor.empty(Bmax, J, n, dtype=x.dtype, device=x.device), xs, *w.part_list()))
    return _unflat(self._cat(ys), B, Bmax, (*lead, self.out_features))

TILE = 16   # entries a tile of expert_tiles

def expert_tiles(sel: Tensor, n_expert: int, tile: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """A routing sel (B, J) as tiles of `tile` entries (b * J + j) routed to one expert each, the experts in order, each
  expert's entries in entry order, its last tile padded with entry 0: the tiles' entries (n_tiles * tile,), their experts
  (n_tiles,), each entry's place among the tiles' (B * J,) and the entries each tile holds (n_tiles,: the rest padding),
  all int32. n_tiles = ceil(B * J / tile) + n_expert, the most any routing needs (the tiles past the last used one hold
  none: their experts n_expert - 1, their entries 0)."""
  P, E = sel.shape[0] * sel.shape[1], n_expert
  n_tiles = -(-P // tile) + E
  e = sel.reshape(P).cast(dtypes.int32).maximum(0).minimum(E - 1)
  p = Tensor.arange(P).to(sel.device)
  rank = ((e.unsqueeze(0) == e.unsqueeze(1)) & (p.unsqueeze(0) < p.unsqueeze(1))).sum(1)   # earlier entries of its expert
  onehot = e.unsqueeze(1) == Tensor.arange(E).to(sel.device)                                # (P, E)
  tiles = (onehot.sum(0) + tile - 1) // tile                                               # tiles an expert takes
  first = tiles.cumsum(0) - tiles                                                          # its first tile
  slot = (onehot.where(first.unsqueeze(0), 0).sum(1) + rank // tile) * tile + rank % tile  # (P,)
  s = Tensor.arange(n_tiles * tile).to(sel.device)
  entry = (slot.unsqueeze(0) == s.unsqueeze(1)).where(p.unsqueeze(0), 0).sum(1)            # (n_tiles * tile,)
  t = Tensor.arange(n_tiles).to(sel.device)
  expert = ((first + tiles).unsqueeze(0) <= t.unsqueeze(1)).sum(1).minimum(E - 1)
  count = ((slot // tile).unsqueeze(0) == t.unsqueeze(1)).sum(1)                           # (n_tiles,): entries a tile holds
  return entry.cast(dtypes.int32), expert.cast(dtypes.int32), slot.cast(dtypes.int32), count.cast(dtypes.int32)

def mul_mat_id(w: QuantizedExpertWeights, sel: Tensor, x: Tensor) -> Tensor:
  """ggml's mul_mat_id: out[..., j, :] = W[sel[..., j]] @ x (x (..., in) shared by the k slots, or (..., k, in))."""
  return w(sel, x)

def dequantize_rows(w: PackedTensor, ids: Tensor | None = None, dtype: DType = dtypes.float32, slices: bool = True) -> Tensor:
  """Rows of a packed tensor as floats: W[ids] (..., in) for int ids (...), or all of W (*rows, in) without ids. One kernel.
  slices: Fusions.slices (to_bound)."""
  if len(w.rows) != 1:
    flat = PackedTensor(w.fmt, (prod(w.rows),), w.in_features, {n: p.reshape(-1, w.nb, p.shape[-1]) for n, p in w.parts.items()}, w.name)
    return dequantize_rows(flat, ids, dtype).reshape(*w.rows, w.in_features) if ids is None else dequantize_rows(flat, ids, dtype, slices)
  R, K = w.rows[0], w.in_features
  if ids is None:
    spec = KernelSpec("rows", w.fmt, R, 1, 1, K, R, False, False, base_device(w.device))
    return dispatch.launch(spec, Tensor.empty(R, K, dtype=dtype, device=w.device), *w.part_list())
  if not dtypes.is_int(ids.dtype): raise ValueError(f"{w.name}: ids must be an int tensor, got {ids.dtype}")
  _check_device(w, ids, "ids")
  idf, B, Bmax = _flat(ids.cast(dtypes.int32).unsqueeze(-1), 1, w.name, slices)
  spec = KernelSpec("rows", w.fmt, Bmax, 1, 1, K, R, False, True, base_device(w.device))
  out = dispatch.launch(spec, Tensor.empty(Bmax, K, dtype=dtype, device=w.device), idf.reshape(Bmax), *w.part_list())
  return _unflat(out, B, Bmax, (*ids.shape, K))

class QuantizedEmbedding:
  """Token embedding table (GGUF ne = (dim, n_vocab)) kept packed; a lookup dequantizes only the rows it reads."""
  fusions = Fusions()  # the model's (slices)
  def __init__(self, w: PackedTensor, dtype: DType = dtypes.float32):
    if len(w.rows) != 1: raise ValueError(f"{w.name}: an embedding table is 2D, got rows {w.rows}")
    self.w, self.dim, self.n_vocab, self.type, self.dtype = w, w.in_features, w.rows[0], w.type, dtype

  @staticmethod
  def from_gguf(gf: GGUFFile, name: str, device: str | None = None, dtype: DType = dtypes.float32) -> QuantizedEmbedding:
    return QuantizedEmbedding(PackedTensor.from_gguf(gf, name, device, ndim=2), dtype)

  def __call__(self, ids: Tensor) -> Tensor: return dequantize_rows(self.w, ids, self.dtype, self.fusions.slices)

def load_tensor(gf: GGUFFile, name: str, device: str | None = None, dtype: DType | None = None) -> Tensor:
  """A small tensor (norms, router, biases) as a plain float tensor in numpy shape: F32 -> float32, F16 -> float16,
  BF16 and quantized types -> float32 (dequantized once, on the device), or cast to `dtype`."""
  info = gf.tensor(name)
  raw = gf.tensor_data(name)
  if info.type in (GGMLType.F32, GGMLType.F16): t = to_device(raw.view("<f4" if info.type == GGMLType.F32 else "<f2").reshape(info.shape), device)
  elif info.type == GGMLType.BF16: t = to_device((raw.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(info.shape), device)
  else:
    w = PackedTensor.from_bytes(raw, info.type, info.ne, device, name)
    t = dequantize_rows(w).reshape(info.shape)
  if dtype is not None and dtype != t.dtype: t = t.cast(dtype)
  return t if t.uop.is_realized else t.realize()  # a realize of a realized tensor still walks the process's tensors: ms each

def packed_bytes(typ: GGMLType, ne: Sequence[int]) -> int:
  """Device bytes of a packed tensor with ggml dims `ne`."""
  fmt = format_for(typ, ne[0])
  return fmt.device_bytes * (ne[0] // fmt.block) * math.prod(ne[1:])
