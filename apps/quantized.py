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
matvecs (up to 4 tokens) go to apps/kernels/matvec.py, which can also fold in the layer's rms norm, SwiGLU, expert mix and
residual add (the layers' keyword arguments); where no kernel does a fusion, the layer runs it as separate ops. A
layer's `call` gives the launch it would make instead of running it: `run(*calls)` launches calls of one input as one
kernel where the matvecs can go side by side (a shared expert's gate_up beside the routed experts'), and
`run_sum(*calls)` adds calls' results of one shape in one kernel (the routed experts' down and the shared expert's).

Packed layouts, per GGML block (words are little-endian uint32: byte i of a block's quants is bits 8*(i%4).. of word
i//4). Each part is an array (*rows, n_blocks, count) on the device:
  type  weights/bytes  parts (count x dtype)                                     device bytes vs file
  Q4_0  32 / 18        d 1xf16, qs 4xu32                                         18 (same)
  Q4_1  32 / 20        dm 2xf16 (d, m), qs 4xu32                                 20 (same)
  Q5_0  32 / 22        d 1xf16, qh 1xu32, qs 4xu32                               22 (same)
  Q5_1  32 / 24        dm 2xf16, qh 1xu32, qs 4xu32                              24 (same)
  Q8_0  32 / 34        d 1xf16, qs 8xu32 (int8 bytes)                            34 (same)
  Q4_K  256 / 144      dm 2xf16, scm 4xu32 (8 six-bit scales then 8 mins, one    148 (+2.8%)
                       byte each, decoded from the 12 packed bytes), qs 32xu32
  Q5_K  256 / 176      dm 2xf16, scm 4xu32, qh 8xu32, qs 32xu32                  180 (+2.3%)
  Q6_K  256 / 210      d 1xf16, sc 4xu32 (int8 scales), qh 16xu32, ql 32xu32     210 (same)
  F32 / F16            w CHxf32 / CHxf16, CH = 8 (or 4, 2, 1 dividing in)        same
  BF16                 w CH/2 x u32 (bf16 pairs; in must be even)                same
Loading costs one strided host copy per part (numpy; ~1-3 GB/s on a 2-core VM), one tensor at a time, then the upload;
the only extra memory is host staging for that one tensor. Full-size GLM-4.7-Flash (release mix, 17.02 GB of tensors) took
17.025 GB of H100 memory (+0.03%). Dequantization follows gguf-py's formulas and operation order in fp32 (small integers
become floats exactly through the 2**23 bit trick), so Q4_0, Q5_0, Q8_0, Q6_K and the float types match gguf-py bitwise;
Q4_1, Q5_1, Q4_K and Q5_K compute d*q + m, which a compiler may contract into one fma (one rounding instead of two).

Kernels: out[b, (j,) n] = sum over chunks R and the chunk's inner weights of float(x) * w, accumulated in fp32 and stored
in x's dtype. On GPUs (plan_opts) the inner ranges are unrolled (a uint4 load of quant words, nibbles from registers), a
row's chunks are spread over up to 32 threads (coalesced, reduced in shared memory), each thread does 4 rows (x read once
for them) and a workgroup 4 row groups; expert ids are read in the kernel and clamped to [0, n_expert). On the CPU
tinygrad's heuristics choose. Shapes must be concrete: a symbolic batch (prefill chunk) is padded to its bound and sliced.
"""
from __future__ import annotations
import functools, math
from dataclasses import dataclass, replace
from typing import Callable, Sequence
import numpy as np
from apps import KERNEL_PATHS
from apps.gguf import GGUFFile, GGMLType, GGUFError
from tinygrad import Tensor, dtypes, Device, UOp
from tinygrad.dtype import DType
from tinygrad.helpers import prod
from tinygrad.uop.ops import KernelInfo, AxisType, Ops, sint
from tinygrad.codegen.opt import Opt, OptOps

# ---------------------------------------------------------------- dequantization formulas (UOps)

_M23 = 8388608.0  # 2**23: (u | 0x4B000000) as float32 is exactly 2**23 + u for u < 2**23

def _bits(word: UOp, shift, mask: int) -> UOp:
  """(word >> shift) & mask on a uint32 word; shift is an int or an index expression."""
  s = shift if isinstance(shift, int) else shift.cast(dtypes.uint32)
  return (word >> s) & mask if not (isinstance(s, int) and s == 0) else word & mask

def _uf(u: UOp, offset: float = 0.0) -> UOp:
  """float32(u) - offset for a uint32 u < 2**23, with integer-exact bit arithmetic instead of a slow int->float convert."""
  return (u | 0x4B000000).bitcast(dtypes.float32) - (_M23 + offset)

def _i8f(u: UOp) -> UOp:
  """float32 of the int8 whose byte is u (0..255)."""
  return (u ^ 0x4B000080).bitcast(dtypes.float32) - (_M23 + 128.0)

Part = Callable[[str, object], UOp]   # P(name, i): the loaded item i of this block's part `name`

@dataclass(frozen=True)
class Format:
  """How one ggml type is packed and dequantized. A block is split into `cpb` chunks (dims `chunk`); one chunk is what a thread
  dequantizes per step, as the unrolled `inner` ranges. `value(P, c, inner)` gives (index in block, fp32 weight)."""
  type: GGMLType
  block: int                                    # weights per (packing) block
  block_bytes: int                              # file bytes per block
  parts: tuple[tuple[str, DType, int], ...]     # (name, device dtype, items per block)
  chunk: tuple[int, ...]                        # chunk index dims within a block (product = chunks per block)
  inner: tuple[int, ...]
  value: Callable[[Part, UOp, list[UOp]], tuple[UOp, UOp]]
  pack: Callable[[np.ndarray], dict[str, np.ndarray]]
  fma_rounding: bool = False                    # formula d*q + m: an fma may round once where gguf-py rounds twice

  @property
  def cpb(self) -> int: return math.prod(self.chunk)
  @property
  def device_bytes(self) -> int: return sum(n * dt.itemsize for _, dt, n in self.parts)

def _fields(blocks: np.ndarray, layout: Sequence[tuple[str, int]]) -> dict[str, np.ndarray]:
  """Split (n_blocks, bytes) uint8 blocks into contiguous per-field byte arrays (n_blocks, field_bytes), one strided copy
  each (a structured-view copy for narrow fields, a 2D slice copy for wide ones: the faster of the two for each)."""
  assert sum(b for _, b in layout) == blocks.shape[1], (layout, blocks.shape)
  blocks = np.ascontiguousarray(blocks)
  rec = blocks.reshape(-1).view(np.dtype([(n, f"V{b}") for n, b in layout]))
  out, off = {}, 0
  for n, b in layout:
    if b <= 4: out[n] = rec[n].copy().view(np.uint8).reshape(len(blocks), b)
    else:
      out[n] = np.empty((len(blocks), b), np.uint8)
      out[n][:] = blocks[:, off:off + b]
    off += b
  return out

def _w32(a: np.ndarray) -> np.ndarray: return np.ascontiguousarray(a).view("<u4")
def _f16(a: np.ndarray) -> np.ndarray: return np.ascontiguousarray(a).view("<f2")

def _k_scales(s: np.ndarray) -> np.ndarray:
  """The 12 packed bytes of Q4_K/Q5_K scales -> 8 six-bit scales then 8 six-bit mins, one byte each (ggml get_scale_min_k4)."""
  d, m, md = s[:, 0:4], s[:, 4:8], s[:, 8:12]
  sc = np.concatenate([d & 63, (md & 15) | ((d >> 6) << 4)], axis=1)
  mn = np.concatenate([m & 63, (md >> 4) | ((m >> 6) << 4)], axis=1)
  return np.concatenate([sc, mn], axis=1).astype(np.uint8)

def _q4_0(P, c, ii):
  w, h, b = ii
  q = _bits(P("qs", w), b * 8 + h * 4, 15)
  return h * 16 + w * 4 + b, P("d", 0).cast(dtypes.float32) * _uf(q, 8.0)

def _q4_1(P, c, ii):
  w, h, b = ii
  q = _bits(P("qs", w), b * 8 + h * 4, 15)
  return h * 16 + w * 4 + b, P("dm", 0).cast(dtypes.float32) * _uf(q) + P("dm", 1).cast(dtypes.float32)

def _q5(P, ii):
  w, h, b = ii
  k = h * 16 + w * 4 + b
  return k, _bits(P("qs", w), b * 8 + h * 4, 15) | (_bits(P("qh", 0), k, 1) << 4)

def _q5_0(P, c, ii):
  k, q = _q5(P, ii)
  return k, P("d", 0).cast(dtypes.float32) * _uf(q, 16.0)

def _q5_1(P, c, ii):
  k, q = _q5(P, ii)
  return k, P("dm", 0).cast(dtypes.float32) * _uf(q) + P("dm", 1).cast(dtypes.float32)

def _q8_0(P, c, ii):
  w, b = ii
  return w * 4 + b, _i8f(_bits(P("qs", w), b * 8, 255)) * P("d", 0).cast(dtypes.float32)

def _qk(P, c, ii, high: bool):
  # chunk c = (c1, c0): sub-blocks s = 2c + h, 64 weights in qs bytes 32c..32c+31 (low nibbles, then high nibbles)
  (c1, c0), (wi, h, b) = c, ii
  s = c1 * 4 + c0 * 2 + h
  q = _bits(P("qs", c1 * 16 + c0 * 8 + wi), b * 8 + h * 4, 15)
  if high: q = q | (_bits(P("qh", wi), b * 8 + s, 1) << 4)
  sc, mn = _bits(P("scm", c1), c0 * 16 + h * 8, 255), _bits(P("scm", c1 + 2), c0 * 16 + h * 8, 255)
  d, dmin = P("dm", 0).cast(dtypes.float32), P("dm", 1).cast(dtypes.float32)
  return c1 * 128 + c0 * 64 + h * 32 + wi * 4 + b, (d * _uf(sc)) * _uf(q) - dmin * _uf(mn)

def _q6_k(P, c, ii):
  # chunk c = (half i of the block, 16-weight group lh of each 32-run), 64 weights; s4 = 2*s4h + s4l picks the 32-run
  (i, lh), (s4h, s4l, lw, b) = c, ii
  ql = _bits(P("ql", i * 16 + s4l * 8 + lh * 4 + lw), b * 8 + s4h * 4, 15)
  qh = _bits(P("qh", i * 8 + lh * 4 + lw), b * 8 + s4h * 4 + s4l * 2, 3)
  scale = _i8f(_bits(P("sc", i * 2 + s4h), s4l * 16 + lh * 8, 255))  # scale 16-run 8i + 2*s4 + lh
  return i * 128 + s4h * 64 + s4l * 32 + lh * 16 + lw * 4 + b, (P("d", 0).cast(dtypes.float32) * scale) * _uf(ql | (qh << 4), 32.0)

def _pack_q4_0(b):
  f = _fields(b, [("d", 2), ("qs", 16)])
  return {"d": _f16(f["d"]), "qs": _w32(f["qs"])}
def _pack_q4_1(b):
  f = _fields(b, [("dm", 4), ("qs", 16)])
  return {"dm": _f16(f["dm"]), "qs": _w32(f["qs"])}
def _pack_q5_0(b):
  f = _fields(b, [("d", 2), ("qh", 4), ("qs", 16)])
  return {"d": _f16(f["d"]), "qh": _w32(f["qh"]), "qs": _w32(f["qs"])}
def _pack_q5_1(b):
  f = _fields(b, [("dm", 4), ("qh", 4), ("qs", 16)])
  return {"dm": _f16(f["dm"]), "qh": _w32(f["qh"]), "qs": _w32(f["qs"])}
def _pack_q8_0(b):
  f = _fields(b, [("d", 2), ("qs", 32)])
  return {"d": _f16(f["d"]), "qs": _w32(f["qs"])}
def _pack_q4_k(b):
  f = _fields(b, [("dm", 4), ("sc", 12), ("qs", 128)])
  return {"dm": _f16(f["dm"]), "scm": _w32(_k_scales(f["sc"])), "qs": _w32(f["qs"])}
def _pack_q5_k(b):
  f = _fields(b, [("dm", 4), ("sc", 12), ("qh", 32), ("qs", 128)])
  return {"dm": _f16(f["dm"]), "scm": _w32(_k_scales(f["sc"])), "qh": _w32(f["qh"]), "qs": _w32(f["qs"])}
def _pack_q6_k(b):
  f = _fields(b, [("ql", 128), ("qh", 64), ("sc", 16), ("d", 2)])
  return {"ql": _w32(f["ql"]), "qh": _w32(f["qh"]), "sc": _w32(f["sc"]), "d": _f16(f["d"])}

U32, F16 = dtypes.uint32, dtypes.float16
QUANT_FORMATS: dict[GGMLType, Format] = {f.type: f for f in [
  Format(GGMLType.Q4_0, 32, 18, (("d", F16, 1), ("qs", U32, 4)), (), (4, 2, 4), _q4_0, _pack_q4_0),
  Format(GGMLType.Q4_1, 32, 20, (("dm", F16, 2), ("qs", U32, 4)), (), (4, 2, 4), _q4_1, _pack_q4_1, True),
  Format(GGMLType.Q5_0, 32, 22, (("d", F16, 1), ("qh", U32, 1), ("qs", U32, 4)), (), (4, 2, 4), _q5_0, _pack_q5_0),
  Format(GGMLType.Q5_1, 32, 24, (("dm", F16, 2), ("qh", U32, 1), ("qs", U32, 4)), (), (4, 2, 4), _q5_1, _pack_q5_1, True),
  Format(GGMLType.Q8_0, 32, 34, (("d", F16, 1), ("qs", U32, 8)), (), (8, 4), _q8_0, _pack_q8_0),
  Format(GGMLType.Q4_K, 256, 144, (("dm", F16, 2), ("scm", U32, 4), ("qs", U32, 32)), (2, 2), (8, 2, 4),
         lambda P, c, ii: _qk(P, c, ii, False), _pack_q4_k, True),
  Format(GGMLType.Q5_K, 256, 176, (("dm", F16, 2), ("scm", U32, 4), ("qh", U32, 8), ("qs", U32, 32)), (2, 2), (8, 2, 4),
         lambda P, c, ii: _qk(P, c, ii, True), _pack_q5_k, True),
  Format(GGMLType.Q6_K, 256, 210, (("ql", U32, 32), ("qh", U32, 16), ("sc", U32, 4), ("d", F16, 1)), (2, 2), (2, 2, 4, 4), _q6_k, _pack_q6_k),
]}
FLOAT_TYPES = (GGMLType.F32, GGMLType.F16, GGMLType.BF16)
SUPPORTED = tuple(QUANT_FORMATS) + FLOAT_TYPES

@functools.cache
def float_format(typ: GGMLType, ch: int) -> Format:
  """F32/F16/BF16 rows in chunks of `ch` weights (the block is one chunk)."""
  if typ == GGMLType.BF16:
    assert ch % 2 == 0
    def val_bf16(P, c, ii):
      w, half = ii
      return w * 2 + half, ((P("w", w) >> (half * 16).cast(dtypes.uint32)) << 16).bitcast(dtypes.float32)
    return Format(typ, ch, 2 * ch, (("w", U32, ch // 2),), (), (ch // 2, 2), val_bf16, lambda b: {"w": b.copy().view("<u4")})
  dt, npdt = (dtypes.float32, "<f4") if typ == GGMLType.F32 else (dtypes.float16, "<f2")
  return Format(typ, ch, dt.itemsize * ch, (("w", dt, ch),), (), (ch,), lambda P, c, ii: (ii[0], P("w", ii[0]).cast(dtypes.float32)),
                lambda b: {"w": b.copy().view(npdt)})  # a copy: the file's mapping is read-only, which some device copies refuse

def format_for(typ: GGMLType, in_features: int, name: str = "tensor") -> Format:
  """The packing of a `typ` tensor with rows of `in_features` weights; a clear error for what is not supported."""
  typ = GGMLType(typ)
  if typ in QUANT_FORMATS:
    fmt = QUANT_FORMATS[typ]
    if in_features % fmt.block:
      raise GGUFError(f"tensor '{name}': row length {in_features} is not a multiple of the {typ.name} block size {fmt.block}")
    return fmt
  if typ in FLOAT_TYPES:
    if typ == GGMLType.BF16 and in_features % 2: raise GGUFError(f"tensor '{name}': BF16 rows of odd length {in_features} are not supported")
    return float_format(typ, next(c for c in (8, 4, 2, 1) if in_features % c == 0 and (typ != GGMLType.BF16 or c % 2 == 0)))
  raise GGUFError(f"tensor '{name}' has type {typ.name}, which is not supported (supported: {', '.join(t.name for t in SUPPORTED)})")

# ---------------------------------------------------------------- packed tensors on the device

class PackedTensor:
  """One GGUF tensor on the device as packed parts, each (*rows, n_blocks, count); rows = reversed ne[1:]."""
  def __init__(self, fmt: Format, rows: tuple[int, ...], in_features: int, parts: dict[str, Tensor], name: str = "tensor"):
    self.fmt, self.rows, self.in_features, self.parts, self.name = fmt, tuple(rows), in_features, parts, name
    self.nb = in_features // fmt.block
    for pname, dt, cnt in fmt.parts:
      p = parts[pname]
      if p.shape != (*self.rows, self.nb, cnt) or p.dtype != dt: raise ValueError(f"{name}: part {pname} is {p.shape} {p.dtype}, "
                                                                                 f"expected {(*self.rows, self.nb, cnt)} {dt}")
  @property
  def type(self) -> GGMLType: return self.fmt.type
  @property
  def device(self) -> str: return self.parts[self.fmt.parts[0][0]].device
  @property
  def nbytes(self) -> int: return sum(p.nbytes() for p in self.parts.values())
  def part_list(self) -> list[Tensor]: return [self.parts[n] for n, _, _ in self.fmt.parts]

  @staticmethod
  def pack_host(raw: np.ndarray, typ: GGMLType, ne: Sequence[int], name: str = "tensor") -> tuple[Format, dict[str, np.ndarray]]:
    """File bytes of a tensor with ggml dims `ne` -> (format, host arrays of the packed parts)."""
    fmt = format_for(typ, ne[0], name)
    rows = tuple(reversed(ne[1:]))
    nb = ne[0] // fmt.block
    n_blocks = nb * math.prod(rows)
    if raw.size != n_blocks * fmt.block_bytes:
      raise GGUFError(f"tensor '{name}' has {raw.size} bytes, {list(ne)} {GGMLType(typ).name} needs {n_blocks * fmt.block_bytes}")
    packed = fmt.pack(np.asarray(raw, dtype=np.uint8).reshape(n_blocks, fmt.block_bytes))
    return fmt, {pname: packed[pname].reshape(*rows, nb, cnt) for pname, _, cnt in fmt.parts}

  @staticmethod
  def from_bytes(raw: np.ndarray, typ: GGMLType, ne: Sequence[int], device: str | None = None, name: str = "tensor") -> PackedTensor:
    fmt, host = PackedTensor.pack_host(raw, typ, ne, name)
    return PackedTensor.from_host(fmt, host, ne, device, name)

  @staticmethod
  def from_host(fmt: Format, host: dict[str, np.ndarray], ne: Sequence[int], device: str | None, name: str) -> PackedTensor:
    parts = {n: Tensor(a, device=device).realize() for n, a in host.items()}
    return PackedTensor(fmt, tuple(reversed(ne[1:])), ne[0], parts, name)

  @staticmethod
  def from_gguf(gf: GGUFFile, name: str, device: str | None = None, ndim: int | None = None) -> PackedTensor:
    info = gf.tensor(name)
    if ndim is not None and len(info.ne) != ndim:
      raise GGUFError(f"tensor '{name}' has {len(info.ne)} dimensions {list(info.ne)}, expected {ndim}")
    return PackedTensor.from_bytes(gf.tensor_data(name), info.type, info.ne, device, name)

# ---------------------------------------------------------------- kernels: the dispatch seam

@dataclass(frozen=True)
class KernelSpec:
  """What a kernel must compute. op: 'linear' out (B, N) = x (B, K) @ W (N, K).T;
  'experts' out (B, J, N) = W[sel[b, j]] @ x[b] (x (B, K)) or x[b, j] (x (B, J, K)); 'batched' out (B, E, N) = W[e] @ x[b, e];
  'rows' out (B, K) = W[ids[b]] (or W[b] without ids)."""
  op: str
  fmt: Format
  B: int
  J: int          # experts per token (experts), n_expert (batched), 1 otherwise
  N: int
  K: int
  E: int          # experts in the weight (experts, batched), rows in the table (rows), 1 for linear
  x_per_slot: bool
  has_index: bool
  device: str
  # fused into the kernel (only kernels that say they can do them get such a spec; the layers do the rest in separate ops):
  norm: bool = False        # x -> rms_norm(x) * norm_w (eps below) before the product
  residual: bool = False    # out += residual
  glu: bool = False         # W rows are [gate; up] (2N): out = silu(gate . x) * (up . x)
  mix: bool = False         # experts: out (B, N) = sum_j mix[b, j] * (W[sel[b, j]] . x[b, j])
  eps: float = 0.0
  x_dtype: DType = dtypes.float32
  x_stride: int = 0         # elements between x rows (slots); 0: K. Wider rows: the first K are the input
  kernels: str = "hand"     # KERNEL_PATHS: "generated" asks tinygrad's code generator alone (no source, no planned opts)

  @property
  def fused(self) -> bool: return self.norm or self.residual or self.glu or self.mix or bool(self.x_stride)

# custom_kernel body: (out, x / ids, [sel], [mix], [norm_w], [residual], *parts) -> SINK or PROGRAM. One with an attribute
# x_form = (elements, dtype, body) reads x as what that body makes of it: (out (elements,), x, [norm_w]) -> PROGRAM, run just
# before (with the spec's norm, which it then does: the kernel itself takes no norm_w)
KernelFn = Callable[..., UOp]
_PROVIDERS: list[Callable[[KernelSpec], KernelFn | None]] = []

def register_kernel(provider: Callable[[KernelSpec], KernelFn | None]) -> None:
  """Add a kernel provider (e.g. hand-written CUDA for Q4_0 decode); it returns a kernel body or None to pass.
  Newer providers are asked first; the portable UOp-DSL kernels serve whatever none of them takes."""
  _PROVIDERS.insert(0, provider)

def kernel_for(spec: KernelSpec) -> KernelFn | None:
  """The one place that decides which kernel serves a given op, type, shape and device. None for a fused spec that no
  kernel does (the layer then runs the same math as separate ops around the plain kernel)."""
  if spec.kernels not in KERNEL_PATHS: raise ValueError(f"kernels {spec.kernels!r}: choose one of {', '.join(KERNEL_PATHS)}")
  for p in (_PROVIDERS if spec.kernels == "hand" else []):
    if (k := p(spec)) is not None: return k
  return None if spec.fused else _portable_kernel(spec)

def _matvec_shape(spec: KernelSpec):
  """The hand-written decode matvec (apps/kernels/matvec.py) shape for `spec`, or None where none serves it."""
  from apps.kernels import matvec, language_of
  if spec.op not in ("linear", "experts", "batched") or spec.x_dtype != dtypes.float32 or not matvec.available(spec.device): return None
  if spec.fmt.type not in matvec.TYPES or spec.fmt.block != matvec.TYPES[spec.fmt.type].block: return None
  shape = matvec.MatvecShape(spec.op, spec.fmt.type, spec.B, spec.J, spec.N, spec.K, spec.E, spec.x_per_slot,
                             spec.norm, spec.residual, spec.glu, spec.mix, spec.x_stride)
  return shape if matvec.supports(shape, language_of(spec.device)) else None

def _source_matvec(spec: KernelSpec) -> KernelFn | None:
  """Hand-written decode matvecs (apps/kernels/matvec.py) on devices that compile CUDA or Metal source."""
  from apps.kernels import matvec
  return None if (shape := _matvec_shape(spec)) is None else matvec.kernel(shape, spec.eps, spec.device)
_PROVIDERS.append(_source_matvec)

def _source_gemm(spec: KernelSpec) -> KernelFn | None:
  """Hand-written prefill GEMMs (apps/kernels/gemm.py): the products of more tokens than the decode matvecs take."""
  from apps.kernels import gemm
  return gemm.provider(spec)
_PROVIDERS.insert(0, _source_gemm)

def _base_device(device: str) -> str: return device.split(":")[0]

def _scheduler_view(sink: UOp, ren):
  """The kernel as codegen's Scheduler sees it before optimizing: codegen splits ranges used with `%` and merges ranges
  whose indices allow it, so the axes opts refer to are read from here (same rewrites as full_rewrite_to_sink)."""
  from tinygrad.uop.ops import graph_rewrite
  from tinygrad.uop.symbolic import sym
  from tinygrad.codegen.simplify import pm_simplify_ranges, pm_flatten_range, pm_split_ranges, pm_load_collapse
  from tinygrad.schedule.multi import multi_pm
  from tinygrad.schedule.rangeify import pm_mops
  from tinygrad.codegen.opt.postrange import Scheduler
  s = graph_rewrite(sink, multi_pm)
  s = graph_rewrite(s, pm_mops, bottom_up=True)
  s = graph_rewrite(s, pm_load_collapse)
  s = graph_rewrite(s, pm_split_ranges + pm_flatten_range, ctx={})
  s = graph_rewrite(s, sym + pm_flatten_range)
  s = graph_rewrite(s, pm_flatten_range + pm_simplify_ranges, ctx={})
  k = Scheduler(s, ren)
  k.convert_loop_to_global()
  return k

# measured on the H100 for the GLM decode shapes (tools/bench_quantized.py): 4 rows per thread halved most times; Q6_K's
# 64-weight chunks of 96 bytes do better with 16 threads per row
_PLAN_BY_TYPE: dict[GGMLType, dict[str, int]] = {GGMLType.Q6_K: {"group": 16}}

def plan_opts(spec: KernelSpec, sink: UOp, group: int = 32, rows: int = 4, rows_per_thread: int = 4) -> tuple[Opt, ...] | None:
  """Optimizations for the matvec kernels on devices with local memory: the inner ranges of a chunk unrolled (one wide
  load of quant words, each word's nibbles used from registers), consecutive chunks of a row spread over a group of up to
  `group` threads (coalesced loads, reduction through shared memory), `rows_per_thread` output rows per thread (x
  loaded once for all of them), `rows` row groups per workgroup, and for T>1 a few tokens per thread so a dequantized
  weight is reused from registers. None (tinygrad's heuristics) elsewhere."""
  from tinygrad.codegen.opt import KernelOptError
  ren = Device[spec.device].renderer
  if spec.op == "rows" or not (ren.has_local and ren.has_shared): return None
  k = _scheduler_view(sink, ren)
  def attempt(opt: Opt) -> bool:
    try: k.apply_opt(opt)
    except KernelOptError: return False
    return True
  red = k.axes_of(AxisType.REDUCE)
  if not red: return ()
  sizes = [int(k.full_shape[a]) for a in red]
  outer_id = k.rngs[red[sizes.index(max(sizes))]].arg[0]  # the chunk axis (maybe merged with an inner one); the rest are inner
  axis_of = lambda rid: next(i for i, r in enumerate(k.rngs) if r.arg[0] == rid)
  for rid in [k.rngs[a].arg[0] for a in red]:
    if rid != outer_id: attempt(Opt(OptOps.UNROLL, k.unrollable_dims.index(axis_of(rid)), 0))
  outer = axis_of(outer_id)
  for g in (32, 16, 8, 4, 2):
    if g <= group and int(k.full_shape[outer]) % g == 0 and attempt(Opt(OptOps.GROUP, k.axes_of(AxisType.REDUCE).index(outer), g)): break
  glob = k.axes_of(AxisType.GLOBAL)
  if glob:
    for u in (4, 2):
      if u <= rows_per_thread and attempt(Opt(OptOps.UPCAST, glob[-1], u)): break
    for l in (8, 4, 2):
      if l <= rows and attempt(Opt(OptOps.LOCAL, glob[-1], l)): break
  if spec.B > 1 and spec.op in ("linear", "batched") and len(glob) > 1:
    for u in (4, 2):
      if attempt(Opt(OptOps.UPCAST, glob[0], u)): break
  return tuple(k.applied_opts)

def _portable_kernel(spec: KernelSpec) -> KernelFn:
  fmt, planned = spec.fmt, []
  n_chunks, cpb = spec.K // fmt.block * fmt.cpb, fmt.cpb
  name = f"{fmt.type.name.lower()}_{spec.op}_{spec.B}_{spec.J}_{spec.N}_{spec.K}"

  def chunk(parts: dict[str, UOp], rows: tuple[UOp, ...], R: UOp, inner: list[UOp]) -> tuple[UOp, UOp]:
    # chunk coordinates from R by floor division only: a `%` on a range makes the codegen split it into two axes
    blk, c = R // cpb if cpb > 1 else R, []
    rest = R - blk * cpb
    for i in range(len(fmt.chunk)):
      step = math.prod(fmt.chunk[i + 1:])
      c.append(rest // step if step > 1 else rest)
      rest = rest - c[-1] * step
    kin, v = fmt.value(lambda pname, i: parts[pname][(*rows, blk, i)], tuple(c), inner)
    return blk * fmt.block + kin, v

  def ranges(first_id: int, axis_type: AxisType) -> tuple[UOp, list[UOp]]:
    R = UOp.range(n_chunks, first_id, axis_type)
    return R, [UOp.range(s, first_id + 1 + i, axis_type) for i, s in enumerate(fmt.inner)]

  if spec.op == "rows":
    def rows_kernel(out: UOp, *srcs: UOp) -> UOp:
      ids, plist = (srcs[0], srcs[1:]) if spec.has_index else (None, srcs)
      parts = {pname: p for (pname, _, _), p in zip(fmt.parts, plist)}
      b = UOp.range(spec.B, 0)
      row = ids[b].cast(dtypes.weakint).maximum(0).minimum(spec.E - 1) if ids is not None else b
      R, inner = ranges(1, AxisType.WEAK)
      k, v = chunk(parts, (row,), R, inner)
      return out[b, k].store(v.cast(out.dtype)).end(b, R, *inner).sink(arg=KernelInfo(name=name))
    return rows_kernel

  def mv_kernel(out: UOp, x: UOp, *srcs: UOp) -> UOp:
    sel, plist = (srcs[0], srcs[1:]) if spec.op == "experts" else (None, srcs)
    parts = {pname: p for (pname, _, _), p in zip(fmt.parts, plist)}
    b, n = UOp.range(spec.B, 0), UOp.range(spec.N, 2)
    if spec.op == "linear": j, rows, outs = None, (n,), (b, n)
    else:
      j = UOp.range(spec.J, 1)
      e = sel[b, j].cast(dtypes.weakint).maximum(0).minimum(spec.E - 1) if sel is not None else j
      rows, outs = (e, n), (b, j, n)
    R, inner = ranges(3, AxisType.REDUCE)
    k, v = chunk(parts, rows, R, inner)
    xv = x[b, j, k] if spec.x_per_slot else x[b, k]
    acc = (xv.cast(dtypes.float32) * v).reduce(R, *inner, arg=Ops.ADD)
    sink = out[outs].store(acc.cast(out.dtype)).end(*outs).sink(arg=KernelInfo(name=name))
    if not planned: planned.append(plan_opts(spec, sink, **_PLAN_BY_TYPE.get(fmt.type, {})) if spec.kernels == "hand" else None)
    return sink.replace(arg=KernelInfo(name=name, opts_to_apply=planned[0]))
  return mv_kernel

@functools.lru_cache(maxsize=None)
def _kernel_cached(spec: KernelSpec) -> KernelFn: return kernel_for(spec)

def _norm_w_index(spec: KernelSpec) -> int:
  """Where norm_w is (or would be) among a kernel's buffers: out, x, [sel], [mix], [norm_w], [residual], parts."""
  return 2 + (spec.op == "experts") + spec.mix

def _run(spec: KernelSpec, out: Tensor, *srcs: Tensor) -> Tensor:
  fxn = _kernel_cached(spec)
  if (form := getattr(fxn, "x_form", None)) is not None:  # the kernel reads x in a form of its own, which a kernel makes first
    size, dtype, make = form
    nw = _norm_w_index(spec) - 1                 # norm_w among srcs (out is apart): the norm goes into x's form
    xsrc = (srcs[0], srcs[nw]) if spec.norm else (srcs[0],)
    srcs = (Tensor.empty(size, dtype=dtype, device=out.device).custom_kernel(*xsrc, fxn=make)[0],
            *(srcs[1:nw] + srcs[nw + 1:] if spec.norm else srcs[1:]))
  return out.custom_kernel(*srcs, fxn=fxn)[0]

@dataclass(frozen=True)
class KernelCall:
  """The kernel launch a layer makes for one call: its spec, its buffers (the output first) and what turns the kernel's
  output into the layer's result. Layers' `call` methods return one (or the result, when no kernel does the whole op), so
  that `run` can launch several calls on one input as one kernel."""
  spec: KernelSpec
  srcs: tuple[Tensor, ...]
  finish: Callable[[Tensor], Tensor]

def _matvec_shapes(specs: tuple[KernelSpec, ...]) -> tuple | None:
  """The decode matvec shapes of specs that the hand-written matvecs serve (the provider the seam picks for each), or None."""
  if any(sp.kernels != "hand" or next((p for p in _PROVIDERS if p(sp) is not None), None) is not _source_matvec for sp in specs): return None
  return tuple(_matvec_shape(sp) for sp in specs)

def _side_by_side(specs: tuple[KernelSpec, ...]) -> KernelFn | None:
  """One kernel for several specs, side by side (hand-written decode matvecs), or None."""
  from apps.kernels import matvec
  if (shapes := _matvec_shapes(specs)) is None: return None
  return matvec.kernel_side_by_side(shapes, tuple(sp.eps for sp in specs), specs[0].device)

def run(*calls: KernelCall | Tensor) -> list[Tensor]:
  """The results of layer calls (their `call` methods' returns): kernel calls on one device in one launch where the
  device's kernels can run them side by side (two matvecs of one input: one dependency edge less in a decode step's
  chain, and both in flight together), else one launch each; a Tensor (a call no kernel served) is its own result."""
  kc = [c for c in calls if isinstance(c, KernelCall)]
  fxn = _side_by_side(tuple(c.spec for c in kc)) if len(kc) > 1 and len({c.spec.device for c in kc}) == 1 else None
  if fxn is None: return [c if isinstance(c, Tensor) else c.finish(_run(c.spec, *c.srcs)) for c in calls]
  srcs = [t for c in kc for t in c.srcs]
  outs, first, done = srcs[0].custom_kernel(*srcs[1:], fxn=fxn), 0, {}
  for c in kc: done[id(c)], first = c.finish(outs[first]), first + len(c.srcs)  # each call's output is its first buffer
  return [c if isinstance(c, Tensor) else done[id(c)] for c in calls]

def _summed(specs: tuple[KernelSpec, ...]) -> KernelFn | None:
  """One kernel computing the sum of several specs' products (hand-written decode matvecs), or None."""
  from apps.kernels import matvec, language_of
  if (terms := _matvec_shapes(specs)) is None or not matvec.supports(terms, language_of(specs[0].device)): return None
  return matvec.kernel(terms, specs[0].eps, specs[0].device)

def run_sum(*calls: KernelCall | Tensor) -> Tensor:
  """The sum of layer calls' results of one shape (a routed experts' down + mix + residual and a shared expert's down):
  one kernel where the device's matvecs can sum them (one output row in one warp's registers, both weights' loads in
  flight together, one launch less), else each call run in order with the sum so far as its residual (added in its
  kernel where one does that, as the layers' residual= would)."""
  kc = [c for c in calls if isinstance(c, KernelCall)]
  fxn = _summed(tuple(c.spec for c in kc)) if len(kc) == len(calls) > 1 and len({c.spec.device for c in kc}) == 1 else None
  if fxn is not None:
    srcs = [*kc[0].srcs, *(t for c in kc[1:] for t in c.srcs[1:])]  # one output: the first call's
    return kc[0].finish(srcs[0].custom_kernel(*srcs[1:], fxn=fxn)[0])
  total = run(calls[0])[0]
  for c in calls[1:]: total = run(_with_residual(c, total))[0] if isinstance(c, KernelCall) else total + c
  return total

def _with_residual(c: KernelCall, r: Tensor) -> KernelCall | Tensor:
  """Call c adding r to its result: its kernel's residual where one does it (r in the residual's place among the buffers:
  out, x, [sel], [mix], [norm_w], [residual], parts), else c's result + r."""
  spec, out = replace(c.spec, residual=True), c.srcs[0]
  if c.spec.residual or _kernel_cached(spec) is None or not isinstance(rows := prod(r.shape[:-1]), int) or rows != out.shape[0]:
    return c.finish(_run(c.spec, *c.srcs)) + r
  i = _norm_w_index(spec) + spec.norm
  return KernelCall(spec, (*c.srcs[:i], r.reshape(out.shape), *c.srcs[i:]), c.finish)

def _check_device(w: PackedTensor, t: Tensor, what: str) -> None:
  if t.device != w.device: raise ValueError(f"{w.name}: {what} is on {t.device}, the weights on {w.device}")

def _flat(t: Tensor, keep: int, what: str) -> tuple[Tensor, sint, int]:
  """t (*lead, *tail) with `keep` trailing dims -> (t as (Bmax, *tail), B = prod(lead), Bmax). A symbolic lead (a prefill
  chunk of variable length) is padded to its bound, since kernels take concrete shapes; callers slice the result back."""
  if t.ndim < keep: raise ValueError(f"{what}: shape {t.shape} has fewer than {keep} dims")
  lead, tail = t.shape[:t.ndim - keep], t.shape[t.ndim - keep:]
  if not all(isinstance(d, int) for d in tail): raise ValueError(f"{what}: symbolic trailing dims {tail} are not supported")
  from apps.kernels import to_bound
  (t,), B, Bmax = to_bound(t.reshape(prod(lead), *tail))
  return t, B, Bmax

def _input_stride(x: Tensor, K: int, prefix: bool) -> int | None:
  """The x_stride of a spec for input x whose last axis holds the K inputs: 0 when it is exactly K, its length when
  `prefix` allows it to be longer (the first K are the input), None when x does not fit."""
  n = x.shape[-1] if x.ndim else None
  if n == K: return 0
  return n if prefix and isinstance(n, int) and n > K else None

def _unflat(y: Tensor, B: sint, Bmax: int, shape: tuple) -> Tensor:
  return (y if isinstance(B, int) else y[:B]).reshape(*shape)

# ---------------------------------------------------------------- the layers

def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
  """RMSNorm (fp32): x / sqrt(mean(x^2) + eps) * weight."""
  xf = x.float()
  return xf * (xf.square().mean(-1, keepdim=True) + eps).rsqrt() * weight

class QuantizedLinear:
  """y = x @ W.T for a GGUF 2D weight with ne = (in_features, out_features), W kept packed on the device."""
  kernels = "hand"  # KERNEL_PATHS: which kernels compute it (the model sets it on its layers)
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
    packed = [PackedTensor.pack_host(gf.tensor_data(i.name), i.type, i.ne, i.name) for i in infos]
    fmt = packed[0][0]
    host = {p: np.concatenate([h[p] for _, h in packed], axis=0) for p, _, _ in fmt.parts}
    return QuantizedLinear(PackedTensor.from_host(fmt, host, (infos[0].ne[0], sum(i.ne[1] for i in infos)), device, "+".join(name)))

  def __call__(self, x: Tensor, norm: tuple[Tensor, float] | None = None, residual: Tensor | None = None, glu: bool = False,
               prefix: bool = False) -> Tensor:
    """x @ W.T, with optional fusions: norm=(w, eps) applies rms_norm(x) * w first; glu treats W as [gate; up] and returns
    silu(x @ gate.T) * (x @ up.T); residual is added to the result. prefix: the input is x[..., :in_features] (x is a
    stacked layer's output; a kernel that can reads it in place, else it is sliced)."""
    return run(self.call(x, norm, residual, glu, prefix))[0]

  def call(self, x: Tensor, norm: tuple[Tensor, float] | None = None, residual: Tensor | None = None, glu: bool = False,
           prefix: bool = False) -> KernelCall | Tensor:
    """__call__'s kernel launch, for `run` (or its result, where no one kernel does it)."""
    if (stride := _input_stride(x, self.in_features, prefix)) is None:
      raise ValueError(f"{self.w.name}: input shape {x.shape} does not end in in_features={self.in_features}")
    _check_device(self.w, x, "the input")
    N = self.out_features // 2 if glu else self.out_features
    xs, B, Bmax = _flat(x, 1, self.w.name)
    spec = KernelSpec("linear", self.w.fmt, Bmax, 1, N, self.in_features, 1, False, False, _base_device(x.device),
                      norm=norm is not None, residual=residual is not None, glu=glu, eps=norm[1] if norm else 0.0, x_dtype=x.dtype,
                      x_stride=stride, kernels=self.kernels)
    if stride and (_kernel_cached(spec) is None or not isinstance(B, int)): return self(x[..., :self.in_features], norm, residual, glu)
    if _kernel_cached(spec) is None:  # the same math as separate ops
      y = self(rms_norm(x, *norm).cast(x.dtype) if norm is not None else x)
      if glu: y = y[..., :N].silu() * y[..., N:]
      return y if residual is None else residual + y
    extra = ([norm[0]] if norm is not None else []) + ([_flat(residual, 1, self.w.name)[0]] if residual is not None else [])
    return KernelCall(spec, (Tensor.empty(Bmax, N, dtype=x.dtype, device=x.device), xs, *extra, *self.w.part_list()),
                      lambda y: _unflat(y, B, Bmax, (*x.shape[:-1], N)))

class QuantizedExpertWeights:
  """MoE expert weights, GGUF 3D ne = (in, out, n_expert). A list of names (e.g. gate and up) is merged along `out`
  at load, so one kernel computes all of them from one read of the routing and of x."""
  kernels = "hand"  # KERNEL_PATHS, as QuantizedLinear's
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
      packed = [PackedTensor.pack_host(gf.tensor_data(x.name), x.type, x.ne, x.name) for x in same]
      fmt = packed[0][0]
      host = {p: np.concatenate([h[p] for _, h in packed], axis=1) if len(packed) > 1 else packed[0][1][p] for p, _, _ in fmt.parts}
      del packed
      ne = (same[0].ne[0], sum(x.ne[1] for x in same), same[0].ne[2])
      groups.append(PackedTensor.from_host(fmt, host, ne, device, "+".join(x.name for x in same)))
      outs.append(ne[1])
    return QuantizedExpertWeights(groups, outs)

  def _cat(self, ys: list[Tensor]) -> Tensor: return ys[0] if len(ys) == 1 else ys[0].cat(*ys[1:], dim=-1)

  def __call__(self, sel: Tensor, x: Tensor, norm: tuple[Tensor, float] | None = None, glu: bool = False,
               mix: Tensor | None = None, residual: Tensor | None = None) -> Tensor:
    """sel int (..., k) expert ids, x (..., in) or (..., k, in) -> (..., k, out_total). Fusions: norm=(w, eps) normalizes
    x first (x shared by the k slots); glu treats the rows as [gate; up] (one group) and gives silu(gate) * up; mix
    (..., k) weights the k slots and sums them (-> (..., out)); residual is added to the result."""
    return run(self.call(sel, x, norm, glu, mix, residual))[0]

  def call(self, sel: Tensor, x: Tensor, norm: tuple[Tensor, float] | None = None, glu: bool = False,
           mix: Tensor | None = None, residual: Tensor | None = None) -> KernelCall | Tensor:
    """__call__'s kernel launch, for `run` (or its result, where no one kernel does it)."""
    if norm is None and not glu and mix is None and residual is None: return self._plain(sel, x)
    J, w, per_slot = sel.shape[-1], self.groups[0], self._check(sel, x)
    N = self.out_features // 2 if glu else self.out_features
    lead = sel.shape[:-1]
    sels, B, Bmax = _flat(sel.cast(dtypes.int32), 1, self.name)   # a symbolic chunk of tokens runs its bound
    ok = len(self.groups) == 1 and isinstance(J, int) and not (norm is not None and per_slot)
    spec = KernelSpec("experts", w.fmt, Bmax, J, N, self.in_features, self.n_expert, per_slot, True,
                      _base_device(x.device), norm=norm is not None, residual=residual is not None, glu=glu, mix=mix is not None,
                      eps=norm[1] if norm else 0.0, x_dtype=x.dtype, kernels=self.kernels)
    if not ok or _kernel_cached(spec) is None:  # the same math as separate ops
      y = self._plain(sel, rms_norm(x, *norm).cast(x.dtype) if norm is not None else x)
      if glu: y = y[..., :N].silu() * y[..., N:]
      if mix is not None: y = (y.float() * mix.unsqueeze(-1)).sum(-2).cast(x.dtype)
      return y if residual is None else residual + y
    for t in (sel, x): _check_device(w, t, "the input")
    xs = _flat(x, 2 if per_slot else 1, self.name)[0]
    extra = [sels] + ([_flat(mix.float(), 1, self.name)[0]] if mix is not None else []) + ([norm[0]] if norm is not None else []) + \
            ([_flat(residual, 1 if mix is not None else 2, self.name)[0]] if residual is not None else [])
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
    sels, B, Bmax = _flat(sel.cast(dtypes.int32), 1, self.name)
    xs, _, _ = _flat(x, 2 if per_slot else 1, self.name)
    ys = []
    for w, n in zip(self.groups, self.outs):
      spec = KernelSpec("experts", w.fmt, Bmax, J, n, self.in_features, self.n_expert, per_slot, True, _base_device(x.device),
                        kernels=self.kernels)
      ys.append(_run(spec, Tensor.empty(Bmax, J, n, dtype=x.dtype, device=x.device), xs, sels, *w.part_list()))
    return _unflat(self._cat(ys), B, Bmax, (*sel.shape, self.out_features))

  def batched(self, x: Tensor, prefix: bool = False, slot_stride: int = 0) -> Tensor:
    """x (..., n_expert, in) -> (..., n_expert, out): expert e applied to x[..., e, :], no gather. prefix: x's last axis
    may be longer, the input is its first `in` entries (a kernel that can reads them in place, e.g. q_nope inside q).
    slot_stride: x is (..., L) instead, expert e's input starts at e * slot_stride (L may be longer still: the heads of a
    stacked [q; kv_a] output; a kernel reads it in place for one token)."""
    J = self.n_expert
    if slot_stride:
      L = x.shape[-1] if x.ndim else 0
      if not isinstance(L, int) or slot_stride < self.in_features or L < J * slot_stride:
        raise ValueError(f"{self.name}: batched input shape {x.shape} holds no {J} slots of {slot_stride} (in={self.in_features})")
      sliced = lambda: self.batched(x[..., :J * slot_stride].reshape(*x.shape[:-1], J, slot_stride), prefix=True)
      if not (isinstance(rows := prod(x.shape[:-1]), int) and rows == 1 and L > J * slot_stride): return sliced()
      xs, B, Bmax, stride, lead = x.reshape(1, L), 1, 1, slot_stride, (*x.shape[:-1], J)   # one token: read in place
    else:
      if x.ndim < 2 or x.shape[-2] != J or (stride := _input_stride(x, self.in_features, prefix)) is None:
        raise ValueError(f"{self.name}: batched input shape {x.shape} does not end in (n_expert, in)={(J, self.in_features)}")
      xs, B, Bmax = _flat(x, 2, self.name)
      sliced, lead = (lambda: self.batched(x[..., :self.in_features])), x.shape[:-1]
    for w in self.groups: _check_device(w, x, "the input")
    specs = [KernelSpec("batched", w.fmt, Bmax, J, n, self.in_features, J, True, False, _base_device(x.device),
                        x_stride=stride, kernels=self.kernels) for w, n in zip(self.groups, self.outs)]
    if stride and (not isinstance(B, int) or any(_kernel_cached(sp) is None for sp in specs)): return sliced()
    ys = []
    for w, n, spec in zip(self.groups, self.outs, specs):
      ys.append(_run(spec, Tensor.empty(Bmax, J, n, dtype=x.dtype, device=x.device), xs, *w.part_list()))
    return _unflat(self._cat(ys), B, Bmax, (*lead, self.out_features))

def mul_mat_id(w: QuantizedExpertWeights, sel: Tensor, x: Tensor) -> Tensor:
  """ggml's mul_mat_id: out[..., j, :] = W[sel[..., j]] @ x (x (..., in) shared by the k slots, or (..., k, in))."""
  return w(sel, x)

def dequantize_rows(w: PackedTensor, ids: Tensor | None = None, dtype: DType = dtypes.float32) -> Tensor:
  """Rows of a packed tensor as floats: W[ids] (..., in) for int ids (...), or all of W (*rows, in) without ids. One kernel."""
  if len(w.rows) != 1:
    flat = PackedTensor(w.fmt, (prod(w.rows),), w.in_features, {n: p.reshape(-1, w.nb, p.shape[-1]) for n, p in w.parts.items()}, w.name)
    return dequantize_rows(flat, ids, dtype).reshape(*w.rows, w.in_features) if ids is None else dequantize_rows(flat, ids, dtype)
  R, K = w.rows[0], w.in_features
  if ids is None:
    spec = KernelSpec("rows", w.fmt, R, 1, 1, K, R, False, False, _base_device(w.device))
    return _run(spec, Tensor.empty(R, K, dtype=dtype, device=w.device), *w.part_list())
  if not dtypes.is_int(ids.dtype): raise ValueError(f"{w.name}: ids must be an int tensor, got {ids.dtype}")
  _check_device(w, ids, "ids")
  idf, B, Bmax = _flat(ids.cast(dtypes.int32).unsqueeze(-1), 1, w.name)
  spec = KernelSpec("rows", w.fmt, Bmax, 1, 1, K, R, False, True, _base_device(w.device))
  out = _run(spec, Tensor.empty(Bmax, K, dtype=dtype, device=w.device), idf.reshape(Bmax), *w.part_list())
  return _unflat(out, B, Bmax, (*ids.shape, K))

class QuantizedEmbedding:
  """Token embedding table (GGUF ne = (dim, n_vocab)) kept packed; a lookup dequantizes only the rows it reads."""
  def __init__(self, w: PackedTensor, dtype: DType = dtypes.float32):
    if len(w.rows) != 1: raise ValueError(f"{w.name}: an embedding table is 2D, got rows {w.rows}")
    self.w, self.dim, self.n_vocab, self.type, self.dtype = w, w.in_features, w.rows[0], w.type, dtype

  @staticmethod
  def from_gguf(gf: GGUFFile, name: str, device: str | None = None, dtype: DType = dtypes.float32) -> QuantizedEmbedding:
    return QuantizedEmbedding(PackedTensor.from_gguf(gf, name, device, ndim=2), dtype)

  def __call__(self, ids: Tensor) -> Tensor: return dequantize_rows(self.w, ids, self.dtype)

def load_tensor(gf: GGUFFile, name: str, device: str | None = None, dtype: DType | None = None) -> Tensor:
  """A small tensor (norms, router, biases) as a plain float tensor in numpy shape: F32 -> float32, F16 -> float16,
  BF16 and quantized types -> float32 (dequantized once, on the device), or cast to `dtype`."""
  info = gf.tensor(name)
  raw = gf.tensor_data(name)
  if info.type in (GGMLType.F32, GGMLType.F16):  # a copy: the file's mapping is read-only, which some device copies refuse
    t = Tensor(raw.copy().view("<f4" if info.type == GGMLType.F32 else "<f2").reshape(info.shape), device=device)
  elif info.type == GGMLType.BF16:
    t = Tensor((raw.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(info.shape), device=device)
  else:
    w = PackedTensor.from_bytes(raw, info.type, info.ne, device, name)
    t = dequantize_rows(w).reshape(info.shape)
  return (t if dtype is None else t.cast(dtype)).realize()

def packed_bytes(typ: GGMLType, ne: Sequence[int]) -> int:
  """Device bytes of a packed tensor with ggml dims `ne`."""
  fmt = format_for(typ, ne[0])
  return fmt.device_bytes * (ne[0] // fmt.block) * math.prod(ne[1:])
