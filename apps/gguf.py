"""GGUF v2/v3 files: a strict reader and a streaming writer.

The reader parses the header with explicit bounds checks so that a truncated or malformed file gives one clear
GGUFError (never a crash, hang or allocation beyond the file's size), then maps the file and hands out tensor data
as zero-copy numpy views. The writer streams tensors one at a time, so multi-GB files never sit in memory.

Shapes follow ggml: `ne` lists dimensions innermost first (ne[0] is the contiguous row length); `TensorInfo.shape`
is the numpy order (reversed ne).
"""
from __future__ import annotations
import ctypes, enum, mmap, os, struct, sys, threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable
import numpy as np

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

class GGUFError(ValueError):
  """A malformed or unsupported GGUF file; the message is one line naming the problem."""

class GGMLType(enum.IntEnum):
  F32 = 0; F16 = 1; Q4_0 = 2; Q4_1 = 3; Q5_0 = 6; Q5_1 = 7; Q8_0 = 8; Q8_1 = 9  # noqa: E702
  Q2_K = 10; Q3_K = 11; Q4_K = 12; Q5_K = 13; Q6_K = 14; Q8_K = 15  # noqa: E702
  IQ2_XXS = 16; IQ2_XS = 17; IQ3_XXS = 18; IQ1_S = 19; IQ4_NL = 20; IQ3_S = 21; IQ2_S = 22; IQ4_XS = 23  # noqa: E702
  I8 = 24; I16 = 25; I32 = 26; I64 = 27; F64 = 28; IQ1_M = 29; BF16 = 30; TQ1_0 = 34; TQ2_0 = 35  # noqa: E702
  MXFP4 = 39; NVFP4 = 40; Q1_0 = 41; Q2_0 = 42  # noqa: E702

# (weights per block, bytes per block), as ggml defines them
QK_K = 256
BLOCK: dict[GGMLType, tuple[int, int]] = {
  GGMLType.F32: (1, 4), GGMLType.F16: (1, 2), GGMLType.BF16: (1, 2), GGMLType.F64: (1, 8),
  GGMLType.I8: (1, 1), GGMLType.I16: (1, 2), GGMLType.I32: (1, 4), GGMLType.I64: (1, 8),
  GGMLType.Q4_0: (32, 18), GGMLType.Q4_1: (32, 20), GGMLType.Q5_0: (32, 22), GGMLType.Q5_1: (32, 24),
  GGMLType.Q8_0: (32, 34), GGMLType.Q8_1: (32, 36),
  GGMLType.Q2_K: (256, 84), GGMLType.Q3_K: (256, 110), GGMLType.Q4_K: (256, 144), GGMLType.Q5_K: (256, 176),
  GGMLType.Q6_K: (256, 210), GGMLType.Q8_K: (256, 292),
  GGMLType.IQ2_XXS: (256, 66), GGMLType.IQ2_XS: (256, 74), GGMLType.IQ3_XXS: (256, 98), GGMLType.IQ1_S: (256, 50),
  GGMLType.IQ4_NL: (32, 18), GGMLType.IQ3_S: (256, 110), GGMLType.IQ2_S: (256, 82), GGMLType.IQ4_XS: (256, 136),
  GGMLType.IQ1_M: (256, 56), GGMLType.TQ1_0: (256, 54), GGMLType.TQ2_0: (256, 66), GGMLType.MXFP4: (32, 17),
  GGMLType.NVFP4: (64, 36), GGMLType.Q1_0: (128, 18), GGMLType.Q2_0: (64, 18),
}

class ValueType(enum.IntEnum):
  UINT8 = 0; INT8 = 1; UINT16 = 2; INT16 = 3; UINT32 = 4; INT32 = 5; FLOAT32 = 6; BOOL = 7  # noqa: E702
  STRING = 8; ARRAY = 9; UINT64 = 10; INT64 = 11; FLOAT64 = 12  # noqa: E702

_SCALAR = {ValueType.UINT8: "<B", ValueType.INT8: "<b", ValueType.UINT16: "<H", ValueType.INT16: "<h", ValueType.UINT32: "<I",
           ValueType.INT32: "<i", ValueType.FLOAT32: "<f", ValueType.BOOL: "<?", ValueType.UINT64: "<Q", ValueType.INT64: "<q",
           ValueType.FLOAT64: "<d"}
_NP = {ValueType.UINT8: np.uint8, ValueType.INT8: np.int8, ValueType.UINT16: np.uint16, ValueType.INT16: np.int16,
       ValueType.UINT32: np.uint32, ValueType.INT32: np.int32, ValueType.FLOAT32: np.float32, ValueType.BOOL: np.bool_,
       ValueType.UINT64: np.uint64, ValueType.INT64: np.int64, ValueType.FLOAT64: np.float64}
MAX_DIMS = 4  # GGML_MAX_DIMS

def _q(name: str) -> str:
  """A name from the file, quoted for a one-line message: escapes shown, long names cut."""
  return repr(name if len(name) <= 80 else name[:80] + "...")

def tensor_nbytes(ne: tuple[int, ...], typ: GGMLType) -> int:
  block, size = BLOCK[typ]
  if ne[0] % block: raise GGUFError(f"row length {ne[0]} is not a multiple of the {typ.name} block size {block}")
  n = 1
  for d in ne: n *= d
  return n // block * size

@dataclass(frozen=True)
class TensorInfo:
  name: str
  ne: tuple[int, ...]   # ggml order: ne[0] is the contiguous (innermost) dimension
  type: GGMLType
  offset: int           # absolute offset of the data in the file
  nbytes: int
  @property
  def shape(self) -> tuple[int, ...]: return tuple(reversed(self.ne))
  @property
  def n_elements(self) -> int:
    n = 1
    for d in self.ne: n *= d
    return n

# ---------------------------------------------------------------- reader

class _Cursor:
  """Bounds-checked little-endian reads from a byte buffer; every overrun is a GGUFError naming what was being read."""
  def __init__(self, buf, size: int):
    self.buf, self.size, self.pos = buf, size, 0
  def need(self, n: int, what: str) -> None:
    if n < 0 or self.pos + n > self.size: raise GGUFError(f"file is truncated while reading {what} (at byte {self.pos}, file size {self.size})")
  def claim(self, n: int, unit: int, what: str) -> None:
    """A length field: n items of `unit` bytes must fit in the rest of the file."""
    if n * unit > (left := self.size - self.pos):
      raise GGUFError(f"{what} claims {n} {'bytes' if unit == 1 else 'items'}, more than the {left} bytes left in the file: truncated or corrupt")
  def take(self, n: int, what: str) -> bytes:
    self.need(n, what)
    self.pos += n
    return self.buf[self.pos - n:self.pos]
  def scalar(self, fmt: str, what: str):
    n = struct.calcsize(fmt)
    self.need(n, what)
    v = struct.unpack_from(fmt, self.buf, self.pos)[0]
    self.pos += n
    return v
  def string(self, what: str) -> str:
    n = self.scalar("<Q", f"the length of {what}")
    self.claim(n, 1, what)
    raw = self.buf[self.pos:self.pos + n]
    self.pos += n
    try: return raw.decode("utf-8")
    except UnicodeDecodeError as e: raise GGUFError(f"{what} is not valid UTF-8 (byte {e.start} of {n})") from None
  def strings(self, n: int, what: str) -> list[str]:
    """n strings (a vocabulary: 100k-200k of them, in every start): the items' bytes sliced in a loop of locals, then decoded
    by one map (30% less than string() an item); an error is string()'s, at that item."""
    buf, first, pos, end, raw, length = self.buf, self.pos, self.pos, self.size - 8, [], _U64.unpack_from
    add = raw.append   # grown item by item: a corrupt count is found at its first bad item, before it costs memory
    for i in range(n):
      if pos > end or (m := length(buf, pos)[0]) > end - pos:
        self.pos = pos
        self.string(f"{what}[{i}]")  # raises: truncated or corrupt
      pos += 8 + m
      add(buf[pos - m:pos])
    try: out = list(map(bytes.decode, raw))
    except UnicodeDecodeError:
      self.pos = first
      for i in range(n): self.string(f"{what}[{i}]")  # raises at the first item that is not valid UTF-8
      raise
    self.pos = pos
    return out

_U64 = struct.Struct("<Q")

def _available_bytes() -> int:
  """MemAvailable of /proc/meminfo in bytes (0 where it cannot be read)."""
  try:
    with open("/proc/meminfo") as f:
      return next((int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")), 0)
  except (OSError, ValueError): return 0

class GGUFFile:
  """A parsed GGUF file. `metadata` maps keys to values (numeric arrays as numpy arrays, string arrays as lists);
  `tensors` maps names to TensorInfo in file order; `tensor_data(name)` is a zero-copy uint8 view of the bytes."""

  def __init__(self, path: str | os.PathLike):
    self.path, self._mm, self._prefetch = Path(path), None, None
    try:
      with open(self.path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(4)
        # a short file that does not even start like GGUF is "not a GGUF file", not "truncated"
        if head != GGUF_MAGIC[:len(head)] or not head: raise GGUFError(f"{self.path.name}: not a GGUF file (magic {head!r}, expected b'GGUF')")
        if size < 24: raise GGUFError(f"{self.path.name}: file is truncated ({size} bytes; a GGUF header needs at least 24)")
        self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e: raise GGUFError(f"cannot read {self.path}: {e.strerror or e}") from None
    self.size = size
    try: self._parse(_Cursor(self._mm, size))
    except GGUFError as e:
      self.close()
      raise GGUFError(f"{self.path.name}: {e}") from None

  def _parse(self, c: _Cursor) -> None:
    magic = bytes(c.buf[0:4])
    if magic != GGUF_MAGIC: raise GGUFError(f"not a GGUF file (magic {magic!r}, expected b'GGUF')")
    c.pos = 4
    self.version = c.scalar("<I", "the version")
    if self.version not in (2, 3):
      hint = " (a big-endian file?)" if self.version & 0xFFFF == 0 and self.version else ""
      raise GGUFError(f"unsupported GGUF version {self.version}{hint} (supported: 2, 3)")
    n_tensors, n_kv = c.scalar("<Q", "the tensor count"), c.scalar("<Q", "the metadata count")
    # every kv needs >= 12 bytes (key length + type), every tensor info >= 24: counts beyond that cannot be real
    c.claim(n_kv, 12, "the metadata count")
    c.claim(n_tensors, 24, "the tensor count")
    self.metadata: dict[str, Any] = {}
    self.value_types: dict[str, ValueType | tuple[ValueType, ValueType]] = {}
    for i in range(n_kv):
      key = c.string(f"metadata key #{i}")
      if not key: raise GGUFError(f"metadata key #{i} is empty")
      if key in self.metadata: raise GGUFError(f"duplicate metadata key {_q(key)}")
      vt = c.scalar("<I", f"the type of {_q(key)}")
      self.metadata[key], self.value_types[key] = self._value(c, vt, key)
    align = self.metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if "general.alignment" in self.metadata and self.value_types["general.alignment"] != ValueType.UINT32:
      raise GGUFError(f"general.alignment must be a UINT32, not {_vt_name(self.value_types['general.alignment'])}")
    if align <= 0 or align & (align - 1): raise GGUFError(f"general.alignment {align} is not a power of two")
    self.alignment = align
    infos = []
    for i in range(n_tensors):
      name = c.string(f"the name of tensor #{i}")
      n_dims = c.scalar("<I", f"the dimension count of {_q(name)}")
      if not 1 <= n_dims <= MAX_DIMS: raise GGUFError(f"tensor {_q(name)} has {n_dims} dimensions (1..{MAX_DIMS} allowed)")
      ne = struct.unpack(f"<{n_dims}Q", c.take(8 * n_dims, f"the dimensions of {_q(name)}"))
      raw_type = c.scalar("<I", f"the type of {_q(name)}")
      try: typ = GGMLType(raw_type)
      except ValueError: raise GGUFError(f"tensor {_q(name)} has unknown ggml type id {raw_type}") from None
      rel = c.scalar("<Q", f"the data offset of {_q(name)}")
      if 0 in ne: raise GGUFError(f"tensor {_q(name)} has a zero dimension in {list(ne)}")
      n = 1
      for d in ne: n *= d
      if n >= 1 << 63: raise GGUFError(f"tensor {_q(name)} dimensions {list(ne)} overflow: {n} elements")
      try: nbytes = tensor_nbytes(ne, typ)
      except GGUFError as e: raise GGUFError(f"tensor {_q(name)}: {e}") from None
      if nbytes > c.size: raise GGUFError(f"tensor {_q(name)} {list(ne)} {typ.name} needs {nbytes} bytes, more than the file's {c.size}")
      if rel % align: raise GGUFError(f"tensor {_q(name)} data offset {rel} is not aligned to {align}")
      infos.append((name, ne, typ, rel, nbytes))
    self.data_offset = -(-c.pos // align) * align
    self.tensors: dict[str, TensorInfo] = {}
    for name, ne, typ, rel, nbytes in infos:
      if name in self.tensors: raise GGUFError(f"duplicate tensor name {_q(name)}")
      start = self.data_offset + rel
      if start + nbytes > c.size:
        raise GGUFError(f"tensor {_q(name)} data [{start}, {start + nbytes}) runs past the end of the file ({c.size} bytes): truncated?")
      self.tensors[name] = TensorInfo(name, ne, typ, start, nbytes)
    spans = sorted((t.offset, t.offset + t.nbytes, t.name) for t in self.tensors.values())
    for (s0, e0, n0), (s1, _, n1) in zip(spans, spans[1:]):
      if s1 < e0: raise GGUFError(f"tensors {_q(n0)} and {_q(n1)} overlap in the file")

  def _value(self, c: _Cursor, vt: int, key: str):
    qk = _q(key)
    try: vt = ValueType(vt)
    except ValueError: raise GGUFError(f"metadata {qk} has unknown value type {vt}") from None
    if vt == ValueType.STRING: return c.string(f"the value of {qk}"), vt
    if vt != ValueType.ARRAY: return c.scalar(_SCALAR[vt], f"the value of {qk}"), vt
    et = c.scalar("<I", f"the element type of {qk}")
    try: et = ValueType(et)
    except ValueError: raise GGUFError(f"metadata {qk} has unknown array element type {et}") from None
    n = c.scalar("<Q", f"the length of {qk}")
    if et == ValueType.ARRAY: raise GGUFError(f"metadata {qk} is a nested array (not supported)")
    if et == ValueType.STRING:
      c.claim(n, 8, f"the string array {qk}")  # >= 8 bytes (the length) per string
      return c.strings(n, qk), (vt, et)
    itemsize = struct.calcsize(_SCALAR[et])
    c.claim(n, itemsize, f"the {et.name} array {qk}")
    raw = c.take(n * itemsize, f"the {n} elements of {qk}")
    if et == ValueType.BOOL: return np.frombuffer(raw, dtype=np.uint8) != 0, (vt, et)  # any nonzero byte is true, as for scalars
    return np.frombuffer(raw, dtype=np.dtype(_NP[et]).newbyteorder("<")).astype(_NP[et]), (vt, et)

  # ---- access
  def get(self, key: str, default: Any = None) -> Any: return self.metadata.get(key, default)
  def require(self, key: str) -> Any:
    if key not in self.metadata: raise GGUFError(f"{self.path.name}: missing required metadata key '{key}'")
    return self.metadata[key]
  def tensor(self, name: str) -> TensorInfo:
    if name not in self.tensors: raise GGUFError(f"{self.path.name}: missing required tensor '{name}'")
    return self.tensors[name]
  def tensor_data(self, name: str) -> np.ndarray:
    """The tensor's raw bytes as a read-only uint8 view of the mapped file (no copy)."""
    t = self.tensor(name)
    if self._mm is None: raise GGUFError(f"{self.path.name}: the file is closed")
    return np.frombuffer(self._mm, dtype=np.uint8, count=t.nbytes, offset=t.offset)
  def tensor_bytes(self) -> np.ndarray | None:
    """All tensors' bytes, first to last, as one read-only view of the mapped file (None without tensors)."""
    if self._mm is None or not self.tensors: return None
    lo, hi = min(t.offset for t in self.tensors.values()), max(t.offset + t.nbytes for t in self.tensors.values())
    return np.frombuffer(self._mm, dtype=np.uint8, count=hi - lo, offset=lo)
  def fits_memory(self) -> bool:
    """Whether the tensors take at most half the memory the system has free (False where /proc/meminfo cannot be read, or
    without tensors): only then are their pages mapped ahead (prefetch) or pinned for a device's copies (the load on CUDA),
    which would otherwise push out, or lock, the pages the machine needs."""
    if not self.tensors: return False
    lo, hi = min(t.offset for t in self.tensors.values()), max(t.offset + t.nbytes for t in self.tensors.values())
    return 2 * (hi - lo) <= _available_bytes()
  @property
  def architecture(self) -> str: return self.require("general.architecture")
  def prefetch(self) -> None:
    """Map the tensors' bytes into this process's page tables on a thread of its own, in file order, while the caller goes
    on (Linux 5.14+, MADV_POPULATE_READ; where a page is not in the page cache that thread reads the disk): a loader's copies
    then take no page faults. A fresh mapping's first touch faults every few pages: copying 1 GB of a page-cached file took
    0.13 s here (2-core EPYC), 0.06 s once mapped (0.09 s to map it). Only where the tensors take at most half the memory
    the system has free (else the pages mapped ahead would push out the ones the loader is copying: a 17 GB file on a 24 GB
    machine); elsewhere nothing. close() stops the thread."""
    if sys.platform != "linux" or self._mm is None or self._prefetch is not None or not self.fits_memory(): return
    page = mmap.PAGESIZE
    lo = min(t.offset for t in self.tensors.values()) // page * page
    hi = max(t.offset + t.nbytes for t in self.tensors.values())
    view, stop = np.frombuffer(self._mm, dtype=np.uint8), threading.Event()   # view: the mapping stays while the thread reads it
    def run(span: int = 64 << 20, populate_read: int = 22) -> None:
      madvise = ctypes.CDLL(None, use_errno=True).madvise   # through ctypes: the GIL is released while the kernel maps
      madvise.argtypes, madvise.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
      for at in range(lo, hi, span):
        if stop.is_set() or madvise(view.ctypes.data + at, min(span, hi - at), populate_read): return   # EINVAL: before 5.14
    self._prefetch = (threading.Thread(target=run, name="gguf-prefetch", daemon=True), stop)
    self._prefetch[0].start()
  def close(self) -> None:
    if (pf := getattr(self, "_prefetch", None)) is not None:
      pf[1].set()
      pf[0].join()
      self._prefetch = None
    mm, self._mm = getattr(self, "_mm", None), None
    if mm is not None:
      try: mm.close()
      except BufferError: pass  # numpy views still alive; the map closes when they go
  def __enter__(self): return self
  def __exit__(self, *exc): self.close()

# ---------------------------------------------------------------- writer

def _vt_name(vt: ValueType | tuple[ValueType, ValueType]) -> str:
  return f"{vt[0].name} of {vt[1].name}" if isinstance(vt, tuple) else vt.name

def _pack_value(vt: ValueType, v: Any) -> bytes:
  if vt == ValueType.STRING:
    b = v.encode("utf-8") if isinstance(v, str) else bytes(v)
    return struct.pack("<Q", len(b)) + b
  return struct.pack(_SCALAR[vt], v)

class GGUFWriter:
  """Writes a GGUF v3 file: declare metadata and tensors, then `write(data_for)` streams each tensor's bytes in order."""

  def __init__(self, path: str | os.PathLike, alignment: int = DEFAULT_ALIGNMENT):
    if alignment <= 0 or alignment & (alignment - 1): raise ValueError(f"alignment {alignment} is not a power of two")
    self.path, self.alignment = Path(path), alignment
    self.kv: list[bytes] = []
    self.keys: set[str] = set()
    self.tensors: list[tuple[str, tuple[int, ...], GGMLType, int]] = []
    if alignment != DEFAULT_ALIGNMENT: self.add("general.alignment", alignment, ValueType.UINT32)

  def _key(self, key: str) -> None:
    if not key: raise ValueError("empty metadata key")
    if key in self.keys: raise ValueError(f"duplicate metadata key {key}")
    self.keys.add(key)

  def add(self, key: str, value: Any, vtype: ValueType) -> None:
    vtype = ValueType(vtype)
    if vtype == ValueType.ARRAY: raise ValueError(f"metadata {key}: use add_array for arrays")
    self._key(key)
    self.kv.append(_pack_value(ValueType.STRING, key) + struct.pack("<I", vtype) + _pack_value(vtype, value))

  def add_array(self, key: str, values: Iterable[Any], etype: ValueType) -> None:
    etype = ValueType(etype)
    if etype == ValueType.ARRAY: raise ValueError(f"metadata {key}: nested arrays are not supported")
    self._key(key)
    if etype == ValueType.STRING:
      strs = [_pack_value(ValueType.STRING, v) for v in values]
      body, n = b"".join(strs), len(strs)
    else:
      arr = np.asarray(values, dtype=np.dtype(_NP[etype]).newbyteorder("<"))
      body, n = arr.tobytes(), arr.size
    self.kv.append(_pack_value(ValueType.STRING, key) + struct.pack("<IIQ", ValueType.ARRAY, etype, n) + body)

  def add_tensor(self, name: str, ne: tuple[int, ...], typ: GGMLType) -> None:
    """Declare a tensor (ggml order: ne[0] innermost). Its bytes come later, from write()."""
    if any(t[0] == name for t in self.tensors): raise ValueError(f"duplicate tensor {name}")
    self.tensors.append((name, tuple(int(d) for d in ne), GGMLType(typ), tensor_nbytes(tuple(ne), GGMLType(typ))))

  def write(self, data_for: Callable[[str], bytes | np.ndarray], progress: Callable[[int], None] | None = None) -> None:
    """Write the file; data_for(name) returns each tensor's bytes exactly (called once per tensor, in order)."""
    pad = lambda n: -n % self.alignment
    header = bytearray(GGUF_MAGIC + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)))
    for kv in self.kv: header += kv
    offset = 0
    for name, ne, typ, nbytes in self.tensors:
      header += _pack_value(ValueType.STRING, name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
      header += struct.pack("<IQ", typ, offset)
      offset += nbytes + pad(nbytes)
    header += b"\0" * pad(len(header))
    tmp = self.path.with_name(self.path.name + ".part")
    try:
      with open(tmp, "wb") as f:
        f.write(header)
        for name, ne, typ, nbytes in self.tensors:
          data = data_for(name)
          raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
          if len(raw) != nbytes: raise ValueError(f"tensor {name}: got {len(raw)} bytes, expected {nbytes}")
          f.write(raw)
          f.write(b"\0" * pad(nbytes))
          if progress: progress(nbytes)
      os.replace(tmp, self.path)
    except BaseException:
      tmp.unlink(missing_ok=True)  # no half-written file left behind
      raise
