"""GGUF quant formats as the device keeps them: each block split into aligned arrays, and the UOp formulas that
dequantize a chunk of it in registers (the kernels' weight side). PackedTensor is one such tensor on the device.

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
Loading (PackedTensor.upload) splits a block into its parts on the device where it can (CUDA: the file's blocks are one
memmove into pinned memory, then a kernel a field), elsewhere with one strided host copy per part (numpy, host threads); a
tensor at a time, so the extra memory is staging for one tensor. Full-size GLM-4.7-Flash (release mix, 17.02 GB of tensors) took
17.025 GB of H100 memory (+0.03%). Dequantization follows gguf-py's formulas and operation order in fp32 (small integers
become floats exactly through the 2**23 bit trick), so Q4_0, Q5_0, Q8_0, Q6_K and the float types match gguf-py bitwise;
Q4_1, Q5_1, Q4_K and Q5_K compute d*q + m, which a compiler may contract into one fma (one rounding instead of two).
"""
from __future__ import annotations
import functools, math
from dataclasses import dataclass
from typing import Callable, Sequence
import numpy as np
from apps.gguf import GGUFFile, GGMLType, GGUFError
from apps.readback import POOL, copy_host, device_empty, host_arrays, in_pinned, split_blocks, staged, to_device_stacked
from tinygrad import Tensor, dtypes, UOp
from tinygrad.dtype import DType, _to_np_dtype

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
Empty = Callable[[tuple[int, ...], object], np.ndarray]   # np.empty, or an allocator of host memory the device copies from

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
  layout: tuple[tuple[str, int], ...]           # the block's fields in the file, (name, bytes); a part of the same name is its bytes
  derive: Callable[[np.ndarray, Empty], dict[str, np.ndarray]] | None = None  # the parts that are no field, from the blocks
  fma_rounding: bool = False                    # formula d*q + m: an fma may round once where gguf-py rounds twice

  @property
  def cpb(self) -> int: return math.prod(self.chunk)
  @property
  def device_bytes(self) -> int: return sum(n * dt.itemsize for _, dt, n in self.parts)
  @property
  def fields(self) -> list[tuple[str, int, int]]:
    """(part, byte of the block it starts at, bytes) of the parts that are fields of the block as the file has it."""
    at = np.cumsum([0] + [w for _, w in self.layout]).tolist()
    names = {n for n, _, _ in self.parts}
    return [(n, a, w) for (n, w), a in zip(self.layout, at) if n in names]
  def host_bytes(self, n_blocks: int, blocks: bool = True) -> int:
    """Host bytes for n_blocks, from pack()'s allocator or split_blocks' (the whole blocks, unless the device reads them from
    the file), derived parts and alignment included (the derived K-quant scales are 16 bytes a block)."""
    return n_blocks * (self.block_bytes * blocks + 16 * (self.derive is not None)) + 64 * 8
  def pack(self, b: np.ndarray, empty: Empty) -> dict[str, np.ndarray]:
    """(n_blocks, block_bytes) uint8 blocks -> each part as a host array (n_blocks, count) made by `empty`."""
    f = _fields(b, self.fields, empty)
    if self.derive is not None: f.update(self.derive(b, empty))
    return {n: f[n].view(_to_np_dtype(dt)) for n, dt, _ in self.parts}

_SPAN = 1 << 16  # blocks a task of _fields copies (1-14 MB): numpy's strided copies release the GIL, so spans copy in parallel

def _fields(blocks: np.ndarray, fields: Sequence[tuple[str, int, int]], empty: Empty) -> dict[str, np.ndarray]:
  """Contiguous byte arrays (n_blocks, bytes) of (name, byte in block, bytes) fields of (n_blocks, block_bytes) uint8 blocks,
  one strided copy each, spans of blocks in parallel: a copy of one structured field up to 64 bytes (numpy copies each as
  one item), a 2D slice copy for wider ones (the faster of the two: 6.1 against 1.8 GB/s for Q4_0's 16-byte quants, 2.8
  against 3.5 for 128 bytes, one core of the 2-core machine)."""
  out = {n: empty((len(blocks), w), np.uint8) for n, _, w in fields}
  rec_t = np.dtype({"names": [n for n, _, _ in fields], "formats": [f"V{w}" for _, _, w in fields], "offsets": [a for _, a, _ in fields],
                    "itemsize": blocks.shape[1]})
  def span(lo: int) -> None:
    part = blocks[lo:lo + _SPAN]
    rec = np.ascontiguousarray(part).reshape(-1).view(rec_t)
    for n, a, w in fields:
      if w <= 64: out[n][lo:lo + len(part)].reshape(-1).view(f"V{w}")[:] = rec[n]
      else: out[n][lo:lo + len(part)] = part[:, a:a + w]
  list(POOL.map(span, range(0, len(blocks), _SPAN)))
  return out


def _k_scales(b: np.ndarray, empty: Empty) -> dict[str, np.ndarray]:
  """The 12 packed bytes of Q4_K/Q5_K scales -> 8 six-bit scales then 8 six-bit mins, one byte each (ggml get_scale_min_k4)."""
  d, m, md = b[:, 4:8], b[:, 8:12], b[:, 12:16]   # the 12 bytes after the block's two fp16
  out = empty((len(b), 16), np.uint8)
  out[:, 0:4], out[:, 4:8], out[:, 8:12], out[:, 12:16] = d & 63, (md & 15) | ((d >> 6) << 4), m & 63, (md >> 4) | ((m >> 6) << 4)
  return {"scm": out}

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


U32, F16 = dtypes.uint32, dtypes.float16
QUANT_FORMATS: dict[GGMLType, Format] = {f.type: f for f in [
  Format(GGMLType.Q4_0, 32, 18, (("d", F16, 1), ("qs", U32, 4)), (), (4, 2, 4), _q4_0, (("d", 2), ("qs", 16))),
  Format(GGMLType.Q4_1, 32, 20, (("dm", F16, 2), ("qs", U32, 4)), (), (4, 2, 4), _q4_1, (("dm", 4), ("qs", 16)), fma_rounding=True),
  Format(GGMLType.Q5_0, 32, 22, (("d", F16, 1), ("qh", U32, 1), ("qs", U32, 4)), (), (4, 2, 4), _q5_0, (("d", 2), ("qh", 4), ("qs", 16))),
  Format(GGMLType.Q5_1, 32, 24, (("dm", F16, 2), ("qh", U32, 1), ("qs", U32, 4)), (), (4, 2, 4), _q5_1, (("dm", 4), ("qh", 4), ("qs", 16)),
         fma_rounding=True),
  Format(GGMLType.Q8_0, 32, 34, (("d", F16, 1), ("qs", U32, 8)), (), (8, 4), _q8_0, (("d", 2), ("qs", 32))),
  Format(GGMLType.Q4_K, 256, 144, (("dm", F16, 2), ("scm", U32, 4), ("qs", U32, 32)), (2, 2), (8, 2, 4),
         lambda P, c, ii: _qk(P, c, ii, False), (("dm", 4), ("sc", 12), ("qs", 128)), _k_scales, fma_rounding=True),
  Format(GGMLType.Q5_K, 256, 176, (("dm", F16, 2), ("scm", U32, 4), ("qh", U32, 8), ("qs", U32, 32)), (2, 2), (8, 2, 4),
         lambda P, c, ii: _qk(P, c, ii, True), (("dm", 4), ("sc", 12), ("qh", 32), ("qs", 128)), _k_scales, fma_rounding=True),
  Format(GGMLType.Q6_K, 256, 210, (("ql", U32, 32), ("qh", U32, 16), ("sc", U32, 4), ("d", F16, 1)), (2, 2), (2, 2, 4, 4), _q6_k,
         (("ql", 128), ("qh", 64), ("sc", 16), ("d", 2))),
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
    return Format(typ, ch, 2 * ch, (("w", U32, ch // 2),), (), (ch // 2, 2), val_bf16, (("w", 2 * ch),))
  dt = dtypes.float32 if typ == GGMLType.F32 else dtypes.float16
  return Format(typ, ch, dt.itemsize * ch, (("w", dt, ch),), (), (ch,), lambda P, c, ii: (ii[0], P("w", ii[0]).cast(dtypes.float32)),
                (("w", dt.itemsize * ch),))

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

def _blocks(raw: np.ndarray, fmt: Format, ne: Sequence[int], name: str) -> np.ndarray:
  """A tensor's file bytes as (n_blocks, block_bytes) blocks; a clear error where their count does not fit its dims."""
  if raw.size != (want := math.prod(ne) // fmt.block * fmt.block_bytes):
    raise GGUFError(f"tensor '{name}' has {raw.size} bytes, {list(ne)} {fmt.type.name} needs {want}")
  return np.asarray(raw, dtype=np.uint8).reshape(-1, fmt.block_bytes)

def placements(rows: Sequence[tuple[int, ...]], axis: int, nb: int) -> list[tuple[int, int, int]]:
  """Where the blocks of tensors with these rows go when they are stacked along `axis` (nb blocks a row): (group, group_dst,
  first) each, block i of the tensor being block (i // group) * group_dst + first + i % group of the stacked one."""
  total, off, out = sum(r[axis] for r in rows), 0, []
  for r in rows:
    inner = math.prod(r[axis + 1:]) * nb   # blocks a step of the stacked dim
    out.append((r[axis] * inner, total * inner, off * inner))
    off += r[axis]
  return out

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
  def pack_host(raw: np.ndarray, typ: GGMLType, ne: Sequence[int], name: str = "tensor",
                empty: Empty = np.empty) -> tuple[Format, dict[str, np.ndarray]]:
    """File bytes of a tensor with ggml dims `ne` -> (format, host arrays of the packed parts, made by `empty`)."""
    fmt = format_for(typ, ne[0], name)
    rows, nb = tuple(reversed(ne[1:])), ne[0] // fmt.block
    packed = fmt.pack(_blocks(raw, fmt, ne, name), empty)
    return fmt, {pname: packed[pname].reshape(*rows, nb, cnt) for pname, _, cnt in fmt.parts}

  @staticmethod
  def from_bytes(raw: np.ndarray, typ: GGMLType, ne: Sequence[int], device: str | None = None, name: str = "tensor") -> PackedTensor:
    return PackedTensor.upload([(raw, ne)], typ, 0, device, name)

  @staticmethod
  def upload(tensors: Sequence[tuple[np.ndarray, Sequence[int]]], typ: GGMLType, axis: int, device: str | None = None,
             name: str = "tensor") -> PackedTensor:
    """Tensors of one type and row length ((file bytes, ggml dims) each) as one packed tensor on the device, stacked along
    `axis` of their rows (0: a 2D weight's out, 1: the experts' out), each tensor's parts put in their place: no stacked
    copy anywhere. On CUDA the file's blocks go to the device whole (one memmove into pinned memory on the host, the
    fields split out there: split_blocks); elsewhere each part is split out on the host and copied."""
    fmt = format_for(typ, tensors[0][1][0], name)
    nb, rows = tensors[0][1][0] // fmt.block, [tuple(reversed(ne[1:])) for _, ne in tensors]
    blocks = [_blocks(raw, fmt, ne, name) for raw, ne in tensors]
    stacked = (*rows[0][:axis], sum(r[axis] for r in rows), *rows[0][axis + 1:])
    shaped = lambda a, r, cnt: a.reshape(*r, nb, cnt)
    from_file = staged(device) and all(in_pinned(b, device) for b in blocks)   # the device copies the blocks from the file
    with host_arrays(sum(fmt.host_bytes(math.prod(r) * nb, not from_file) for r in rows), device) as empty:
      if not staged(device):
        host = [fmt.pack(b, empty) for b in blocks]
        parts = {p: to_device_stacked([shaped(h[p], r, cnt) for h, r in zip(host, rows)], axis, device) for p, _, cnt in fmt.parts}
        return PackedTensor(fmt, stacked, tensors[0][1][0], parts, name)
      parts = {p: device_empty((*stacked, nb, cnt), dt, device) for p, dt, cnt in fmt.parts if p in {f for f, _, _ in fmt.fields}}
      derived = []
      for file_blocks, place in zip(blocks, placements(rows, axis, nb)):
        pinned = file_blocks if from_file else copy_host(empty(file_blocks.shape, np.uint8), np.ascontiguousarray(file_blocks))
        split_blocks(pinned, fmt.block_bytes, [(parts[p].uop.buffer, at, w, *place) for p, at, w in fmt.fields], device)
        if fmt.derive is not None: derived.append(fmt.derive(pinned, empty))
      for p, dt, cnt in fmt.parts:
        if p not in parts: parts[p] = to_device_stacked([shaped(d[p].view(_to_np_dtype(dt)), r, cnt) for d, r in zip(derived, rows)], axis, device)
    return PackedTensor(fmt, stacked, tensors[0][1][0], parts, name)

  @staticmethod
  def from_gguf(gf: GGUFFile, name: str, device: str | None = None, ndim: int | None = None) -> PackedTensor:
    info = gf.tensor(name)
    if ndim is not None and len(info.ne) != ndim:
      raise GGUFError(f"tensor '{name}' has {len(info.ne)} dimensions {list(info.ne)}, expected {ndim}")
    return PackedTensor.from_bytes(gf.tensor_data(name), info.type, info.ne, device, name)

