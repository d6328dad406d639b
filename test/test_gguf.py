"""apps.gguf: the writer against a byte-level encoding of the GGUF spec written out here, the reader against gguf-py's
GGUFReader (on llama.cpp's deepseek-llm vocab file and on our own file), and the reader on a corpus of damaged files and
on fuzzed headers: every bad file gives one GGUFError with a one-line message naming the problem, quickly, and without
allocating much more than the file's size.
"""
import ctypes, importlib.util, os, struct, time, tracemalloc
from pathlib import Path
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
import gguf
from apps.gguf import BLOCK, DEFAULT_ALIGNMENT, GGMLType, GGUFError, GGUFFile, GGUFWriter, TensorInfo, ValueType
from apps.vocab import vocab_file

V, T = ValueType, GGMLType

# ---------------------------------------------------------------- the reference file

SCALARS = [  # key, value type, value, its little-endian encoding (struct format)
  ("general.architecture", V.STRING, "deepseek2", None), ("test.u8", V.UINT8, 200, "<B"), ("test.i8", V.INT8, -100, "<b"),
  ("test.u16", V.UINT16, 60000, "<H"), ("test.i16", V.INT16, -30000, "<h"), ("test.u32", V.UINT32, 4_000_000_000, "<I"),
  ("test.i32", V.INT32, -2_000_000_000, "<i"), ("test.f32", V.FLOAT32, 1.5, "<f"), ("test.bool", V.BOOL, True, "<?"),
  ("test.str", V.STRING, "héllo ✓ \n\0 tab\t", None), ("test.u64", V.UINT64, 2**64 - 1, "<Q"), ("test.i64", V.INT64, -2**63, "<q"),
  ("test.f64", V.FLOAT64, -0.1, "<d"), ("test.empty", V.STRING, "", None),
]
ARRAYS = [  # key, element type, values, numpy dtype of the encoding
  ("test.arr.str", V.STRING, ["a", "", "日本語", "tab\t", "x" * 300], None), ("test.arr.u8", V.UINT8, [0, 1, 255], "<u1"),
  ("test.arr.i8", V.INT8, [-128, 127], "<i1"), ("test.arr.u16", V.UINT16, [65535], "<u2"), ("test.arr.i16", V.INT16, [-1, 2, -3], "<i2"),
  ("test.arr.u32", V.UINT32, [1, 2**32 - 1], "<u4"), ("test.arr.i32", V.INT32, list(range(-5, 20)), "<i4"),
  ("test.arr.f32", V.FLOAT32, [0.5, -2.25, 1e30], "<f4"), ("test.arr.bool", V.BOOL, [True, False, True], "<u1"),
  ("test.arr.u64", V.UINT64, [2**63 + 5], "<u8"), ("test.arr.i64", V.INT64, [-(2**62)], "<i8"), ("test.arr.f64", V.FLOAT64, [1e-300, 3.0], "<f8"),
  ("test.arr.empty", V.INT32, [], "<i4"),
]
TENSORS = [  # name, ne (ggml order), type
  ("blk.0.attn_q.weight", (64, 3), T.Q8_0), ("blk.0.ffn_down.weight", (256, 2), T.Q4_K), ("norm", (5,), T.F32),
  ("blk.0.cube", (8, 2, 2), T.F16), ("four.dims", (32, 1, 1, 2), T.Q4_0), ("q6", (256, 1), T.Q6_K),
]

def tensor_bytes(name: str, ne: tuple[int, ...], typ: GGMLType) -> bytes:
  n = int(np.prod(ne)) // BLOCK[typ][0] * BLOCK[typ][1]
  return np.random.default_rng(sum(name.encode())).integers(0, 256, n, dtype=np.uint8).tobytes()

def write_reference(path: Path, alignment: int = DEFAULT_ALIGNMENT) -> Path:
  w = GGUFWriter(path, alignment=alignment)
  for key, vt, v, _ in SCALARS: w.add(key, v, vt)
  for key, et, vs, _ in ARRAYS: w.add_array(key, vs, et)
  for name, ne, typ in TENSORS: w.add_tensor(name, ne, typ)
  data = {name: tensor_bytes(name, ne, typ) for name, ne, typ in TENSORS}
  w.write(lambda name: data[name])
  return path

# ---------------------------------------------------------------- GGUF v3 written out by hand, from the spec, in labelled parts

def s(x: str | bytes) -> bytes:
  b = x.encode() if isinstance(x, str) else x
  return struct.pack("<Q", len(b)) + b
def kv(key: str | bytes, vt: int, payload: bytes) -> bytes: return s(key) + struct.pack("<I", vt) + payload
def array(et: int, n: int, body: bytes) -> bytes: return struct.pack("<IQ", et, n) + body
def tinfo(name: str | bytes, ne, typ: int, offset: int) -> bytes:
  return s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", typ, offset)

def reference_parts(alignment: int = DEFAULT_ALIGNMENT) -> list[tuple[str, bytes]]:
  """The reference file as (label, bytes) parts: header fields, one part per kv and per tensor info, padding, tensor data."""
  kvs = [("kv:general.alignment", kv("general.alignment", V.UINT32, struct.pack("<I", alignment)))] if alignment != DEFAULT_ALIGNMENT else []
  for key, vt, v, fmt in SCALARS: kvs.append((f"kv:{key}", kv(key, vt, s(v) if vt == V.STRING else struct.pack(fmt, v))))
  for key, et, vs, dt in ARRAYS:
    body = b"".join(s(x) for x in vs) if et == V.STRING else np.array(vs, dtype=dt).tobytes()
    kvs.append((f"kv:{key}", kv(key, V.ARRAY, array(et, len(vs), body))))
  infos, data, off = [], [], 0
  for name, ne, typ in TENSORS:
    raw = tensor_bytes(name, ne, typ)
    infos.append((f"tensor:{name}", tinfo(name, ne, typ, off)))
    data.append((f"data:{name}", raw + b"\0" * (-len(raw) % alignment)))
    off += len(data[-1][1])
  parts = [("magic", b"GGUF"), ("version", struct.pack("<I", 3)), ("n_tensors", struct.pack("<Q", len(infos))),
           ("n_kv", struct.pack("<Q", len(kvs))), *kvs, *infos]
  n = sum(len(b) for _, b in parts)
  return parts + [("pad", b"\0" * (-n % alignment))] + data

def join(parts) -> bytes: return b"".join(b for _, b in parts)
def start(parts, label: str) -> int:
  i = [lab for lab, _ in parts].index(label)
  return sum(len(b) for _, b in parts[:i])
def replace(parts, label: str, new: bytes) -> list:
  return [(lab, new if lab == label else b) for lab, b in parts]

@pytest.fixture(scope="module")
def ref_path(tmp_path_factory) -> Path: return write_reference(tmp_path_factory.mktemp("gguf") / "ref.gguf")

# ---------------------------------------------------------------- writer

def test_writer_matches_spec_encoding(ref_path, tmp_path):
  assert ref_path.read_bytes() == join(reference_parts())
  assert write_reference(tmp_path / "a64.gguf", alignment=64).read_bytes() == join(reference_parts(64))

def test_writer_is_deterministic(ref_path, tmp_path):
  assert write_reference(tmp_path / "again.gguf").read_bytes() == ref_path.read_bytes()

def test_writer_rejects_bad_input(tmp_path):
  with pytest.raises(ValueError, match="power of two"): GGUFWriter(tmp_path / "w.gguf", alignment=48)
  w = GGUFWriter(tmp_path / "w.gguf")
  w.add("a", 1, V.UINT32)
  with pytest.raises(ValueError, match="duplicate"): w.add("a", 2, V.UINT32)
  with pytest.raises(ValueError, match="duplicate"): w.add_array("a", [1], V.UINT32)
  with pytest.raises(ValueError, match="empty"): w.add("", 2, V.UINT32)
  with pytest.raises(ValueError, match="add_array"): w.add("b", [1], V.ARRAY)
  with pytest.raises(ValueError, match="multiple"): w.add_tensor("t", (33,), T.Q8_0)
  w.add_tensor("t", (32,), T.Q8_0)
  with pytest.raises(ValueError, match="duplicate"): w.add_tensor("t", (32,), T.Q8_0)
  with pytest.raises(ValueError, match="expected 34"): w.write(lambda name: b"\0" * 33)
  assert list(tmp_path.iterdir()) == []  # no partial file left behind

def test_writer_string_array_from_generator(tmp_path):
  w = GGUFWriter(tmp_path / "g.gguf")
  w.add_array("tokens", (f"t{i}" for i in range(3)), V.STRING)
  w.write(lambda name: b"")
  assert GGUFFile(tmp_path / "g.gguf").metadata["tokens"] == ["t0", "t1", "t2"]

# ---------------------------------------------------------------- reader: round trip and gguf-py

@pytest.mark.parametrize("alignment", [DEFAULT_ALIGNMENT, 64, 1])
def test_round_trip(tmp_path, alignment):
  path = write_reference(tmp_path / "r.gguf", alignment)
  with GGUFFile(path) as g:
    assert g.version == 3 and g.alignment == alignment and g.architecture == "deepseek2"
    extra = {"general.alignment"} if alignment != DEFAULT_ALIGNMENT else set()
    assert set(g.metadata) == {k for k, *_ in SCALARS} | {k for k, *_ in ARRAYS} | extra
    for key, vt, v, _ in SCALARS:
      assert g.value_types[key] == vt and type(g.metadata[key]) is type(v) and g.metadata[key] == v  # the floats are exact in f32
    for key, et, vs, _ in ARRAYS:
      got = g.metadata[key]
      assert g.value_types[key] == (V.ARRAY, et)
      if et == V.STRING: assert got == vs
      else: assert isinstance(got, np.ndarray) and got.dtype == np.dtype(_np_type(et)) and np.array_equal(got, np.array(vs, got.dtype))
    assert list(g.tensors) == [n for n, *_ in TENSORS]
    for name, ne, typ in TENSORS:
      t = g.tensor(name)
      assert (t.ne, t.shape, t.type, t.n_elements) == (ne, ne[::-1], typ, int(np.prod(ne)))
      assert t.offset % alignment == 0 and t.offset >= g.data_offset
      assert g.tensor_data(name).tobytes() == tensor_bytes(name, ne, typ)
    # every tensor's bytes in the one view of the file the device pins for its copies (Engine.load on CUDA)
    whole, lo = g.tensor_bytes(), min(t.offset for t in g.tensors.values())
    assert not whole.flags.writeable and lo == g.data_offset
    for name, ne, typ in TENSORS:
      t = g.tensor(name)
      assert whole[t.offset - lo:t.offset - lo + t.nbytes].tobytes() == tensor_bytes(name, ne, typ)
    assert t.offset - lo + t.nbytes == whole.nbytes
    with pytest.raises(GGUFError, match="missing required tensor 'nope'"): g.tensor("nope")
    with pytest.raises(GGUFError, match="missing required metadata key 'nope'"): g.require("nope")

def _np_type(et: ValueType):
  return {V.UINT8: np.uint8, V.INT8: np.int8, V.UINT16: np.uint16, V.INT16: np.int16, V.UINT32: np.uint32, V.INT32: np.int32,
          V.FLOAT32: np.float32, V.BOOL: np.bool_, V.UINT64: np.uint64, V.INT64: np.int64, V.FLOAT64: np.float64}[et]

def assert_agrees_with_gguf_py(path: Path) -> None:
  ours, ref = GGUFFile(path), gguf.GGUFReader(path)
  fields = {k: f for k, f in ref.fields.items() if not k.startswith("GGUF.")}
  assert list(fields) == list(ours.metadata)
  for key, f in fields.items():
    vt = ours.value_types[key]
    want_types = [int(vt[0]), int(vt[1])] if isinstance(vt, tuple) else [int(vt)]
    if isinstance(vt, tuple) and len(ours.metadata[key]) == 0: want_types = want_types[:1]  # gguf-py keeps no element type for []
    assert [int(x) for x in f.types] == want_types, key
    want, got = f.contents(), ours.metadata[key]
    if isinstance(got, np.ndarray): got = got.tolist()
    assert got == want, key
  assert ref.alignment == ours.alignment and ref.data_offset == ours.data_offset
  assert [t.name for t in ref.tensors] == list(ours.tensors)
  for rt in ref.tensors:
    t = ours.tensors[rt.name]
    assert (tuple(int(d) for d in rt.shape), int(rt.tensor_type), rt.data_offset, rt.n_bytes) == (t.ne, int(t.type), t.offset, t.nbytes)
    assert rt.data.tobytes() == ours.tensor_data(rt.name).tobytes()

def test_agrees_with_gguf_py_on_written_file(ref_path, tmp_path):
  assert_agrees_with_gguf_py(ref_path)
  assert_agrees_with_gguf_py(write_reference(tmp_path / "a64.gguf", 64))

def test_agrees_with_gguf_py_on_vocab():
  path = vocab_file("deepseek-llm")
  assert_agrees_with_gguf_py(path)
  t0 = time.perf_counter()
  g = GGUFFile(path)
  assert time.perf_counter() - t0 < 2.0  # 102400 tokens + merges: ~0.15 s here
  assert len(g.metadata["tokenizer.ggml.tokens"]) == 102400 == g.metadata["llama.vocab_size"]

def test_block_sizes_agree_with_gguf_py():
  for t in GGMLType:
    if t.value in {int(q) for q in gguf.GGMLQuantizationType}:
      q = gguf.GGMLQuantizationType(t.value)
      # gguf-py 0.19 on PyPI still has Q8_1's old 40-byte block (float d, s); ggml made them fp16 (36 bytes, checked against
      # ggml's C below). Q8_1 only exists inside ggml's matmuls, never in files.
      want = (32, 40) if t == T.Q8_1 else BLOCK[t]
      assert (q.name, gguf.GGML_QUANT_SIZES[q]) == (t.name, want)
  assert set(BLOCK) == set(GGMLType)

def test_block_sizes_agree_with_ggml_c():
  spec = importlib.util.find_spec("llama_cpp")
  lib_path = spec and spec.submodule_search_locations and os.path.join(spec.submodule_search_locations[0], "lib", "libggml-base.so")
  if not lib_path or not os.path.exists(lib_path): pytest.skip("llama-cpp-python (requirements-ref.txt) is not installed")
  lib = ctypes.CDLL(lib_path)
  lib.ggml_blck_size.restype, lib.ggml_type_size.restype, lib.ggml_type_name.restype = ctypes.c_int64, ctypes.c_size_t, ctypes.c_char_p
  for t in GGMLType:
    assert (lib.ggml_type_name(t.value).decode().upper(), lib.ggml_blck_size(t.value), lib.ggml_type_size(t.value)) == (t.name, *BLOCK[t])

def test_tensor_info_shape():
  t = TensorInfo("x", (4096, 11008), T.Q4_K, 0, 0)
  assert t.shape == (11008, 4096) and t.n_elements == 4096 * 11008

# ---------------------------------------------------------------- reader: damaged files

P = reference_parts()
def cut(label: str, into: int | None = None, counts: bool = True) -> bytes:
  """The reference file cut `into` bytes into the part `label` (default: half-way through it). With `counts`, the kv and
  tensor counts say that this part is the last one, so the reader gets as far as it (else the counts, which promise more
  than the cut file can hold, are the first problem)."""
  p = P
  if counts and label.startswith(("kv:", "tensor:")):
    labels = [lab for lab, _ in P if lab.startswith(label[:label.index(":") + 1])]
    p = replace(p, "n_kv" if label.startswith("kv:") else "n_tensors", struct.pack("<Q", labels.index(label) + 1))
    if label.startswith("kv:"): p = replace(p, "n_tensors", struct.pack("<Q", 0))
  return join(p)[:start(p, label) + (len(dict(p)[label]) // 2 if into is None else into)]
def with_header(n_tensors=None, n_kv=None, version=3, magic=b"GGUF") -> bytes:
  p = replace(P, "magic", magic)
  p = replace(p, "version", struct.pack("<I", version))
  if n_tensors is not None: p = replace(p, "n_tensors", struct.pack("<Q", n_tensors))
  if n_kv is not None: p = replace(p, "n_kv", struct.pack("<Q", n_kv))
  return join(p)
def with_kv(payload: bytes, label: str = "kv:test.u8") -> bytes: return join(replace(P, label, payload))
def with_tensor(name="norm", ne=(5,), typ=T.F32, offset=None, new_name=None) -> bytes:
  old = dict(P)[f"tensor:{name}"]
  off = struct.unpack("<Q", old[-8:])[0] if offset is None else offset
  return join(replace(P, f"tensor:{name}", tinfo(new_name or name, ne, typ, off)))
Q8 = "blk.0.attn_q.weight"
OFF_Q8 = struct.unpack("<Q", dict(P)[f"tensor:{Q8}"][-8:])[0]

DAMAGED = {  # case: (file bytes, a word or phrase the message must contain)
  "empty": (b"", "not a GGUF file"),
  "truncated in the magic": (b"GG", "truncated"),
  "truncated in the version": (cut("version"), "truncated"),
  "truncated in the counts": (cut("n_kv"), "truncated"),
  "truncated in a key": (cut("kv:test.f32", 10), "metadata key #7 claims 8 bytes"),
  "truncated in a key, counts intact": (cut("kv:test.f32", 10, counts=False), "the metadata count claims 27 items"),
  "truncated in a key length": (cut("kv:test.f32", 3), "truncated"),
  "truncated in a value type": (cut("kv:test.f32", 8 + 8 + 2), "truncated"),
  "truncated in a string value": (cut("kv:test.str", 8 + 8 + 4 + 8 + 3), "the value of 'test.str'"),
  "truncated in a scalar value": (cut("kv:test.f64", 8 + 8 + 4 + 3), "truncated while reading the value of 'test.f64'"),
  "truncated in an array header": (cut("kv:test.arr.i32", 8 + 12 + 4 + 6), "truncated"),
  "truncated in a numeric array": (cut("kv:test.arr.i32"), "'test.arr.i32'"),
  "truncated in a string array": (cut("kv:test.arr.str"), "'test.arr.str'"),
  "truncated in a tensor name": (cut(f"tensor:{Q8}", 12), "the name of tensor #0"),
  "truncated in tensor dims": (cut(f"tensor:{Q8}", 8 + len(Q8) + 4 + 5), "truncated while reading the dimensions"),
  "truncated in a tensor type": (cut(f"tensor:{Q8}", 8 + len(Q8) + 4 + 16 + 2), "truncated while reading the type"),
  "truncated in a tensor offset": (cut(f"tensor:{Q8}", 8 + len(Q8) + 4 + 16 + 4 + 1), "truncated while reading the data offset"),
  "truncated in the padding": (cut("pad", 1), "past the end"),
  "truncated in tensor data": (cut(f"data:{TENSORS[-1][0]}"), "past the end"),
  "truncated in the first tensor's data": (cut(f"data:{Q8}"), "past the end"),
  "bad magic": (with_header(magic=b"GGML"), "not a GGUF file"),
  "bad magic, short file": (b"PK\x03\x04", "not a GGUF file"),
  "version 1": (with_header(version=1), "version 1"),
  "version 4": (with_header(version=4), "version 4"),
  "big-endian version": (with_header(version=3 << 24), "big-endian"),
  "absurd tensor count": (with_header(n_tensors=2**63), "tensor count"),
  "absurd kv count": (with_header(n_kv=2**63), "metadata count"),
  "max kv count": (with_header(n_kv=2**64 - 1), "metadata count"),
  "kv count one too many": (with_header(n_kv=len(SCALARS) + len(ARRAYS) + 1), "truncated or corrupt"),
  "tensor count one too many": (with_header(n_tensors=len(TENSORS) + 1), "truncated or corrupt"),
  "huge key length": (with_kv(struct.pack("<Q", 2**63) + b"test.u8"), "metadata key #1 claims"),
  "huge string value length": (with_kv(s("test.u8") + struct.pack("<IQ", V.STRING, 2**64 - 1)), "'test.u8' claims"),
  "huge string array": (with_kv(kv("test.u8", V.ARRAY, array(V.STRING, 2**62, b""))), "string array 'test.u8' claims"),
  "huge numeric array": (with_kv(kv("test.u8", V.ARRAY, array(V.UINT64, 2**61, b""))), "UINT64 array 'test.u8' claims"),
  "array size overflowing 64 bits": (with_kv(kv("test.u8", V.ARRAY, array(V.FLOAT64, 2**61 + 1, b""))), "claims"),
  "unknown value type": (with_kv(kv("test.u8", 13, b"\0")), "unknown value type 13"),
  "unknown array element type": (with_kv(kv("test.u8", V.ARRAY, array(99, 1, b"\0"))), "unknown array element type 99"),
  "nested array": (with_kv(kv("test.u8", V.ARRAY, array(V.ARRAY, 1, b"\0"))), "nested array"),
  "duplicate key": (with_kv(kv("test.i8", V.UINT8, b"\1")), "duplicate metadata key 'test.i8'"),
  "empty key": (with_kv(kv("", V.UINT8, b"\1")), "is empty"),
  "invalid UTF-8 key": (with_kv(kv(b"test.\xff8", V.UINT8, b"\1")), "UTF-8"),
  "invalid UTF-8 value": (with_kv(kv("test.u8", V.STRING, s(b"ab\xc3("))), "UTF-8"),
  "invalid UTF-8 in a string array": (with_kv(kv("test.u8", V.ARRAY, array(V.STRING, 2, s("ok") + s(b"\xed\xa0\x80")))), "UTF-8"),
  "invalid UTF-8 tensor name": (with_tensor(new_name=b"no\xffrm"), "UTF-8"),
  "alignment not a power of two": (with_kv(kv("general.alignment", V.UINT32, struct.pack("<I", 48))), "power of two"),
  "alignment zero": (with_kv(kv("general.alignment", V.UINT32, struct.pack("<I", 0))), "power of two"),
  "alignment of the wrong type": (with_kv(kv("general.alignment", V.UINT64, struct.pack("<Q", 32))), "UINT32"),
  "dims overflowing int64": (with_tensor(ne=(2**32, 2**32)), "overflow"),
  "dims overflowing uint64": (with_tensor(ne=(2**63, 4)), "overflow"),
  "dims larger than the file": (with_tensor(ne=(2**20, 2**20)), "needs"),
  "zero dim": (with_tensor(ne=(5, 0)), "zero dimension"),
  "no dims": (with_tensor(ne=()), "0 dimensions"),
  "five dims": (with_tensor(ne=(5, 1, 1, 1, 1)), "5 dimensions"),
  "huge dim count": (join(replace(P, f"tensor:{Q8}", s(Q8) + struct.pack("<I", 2**32 - 1))), "4294967295 dimensions"),
  "row not a whole number of blocks": (with_tensor(name=Q8, ne=(48, 4), typ=T.Q8_0), "multiple"),
  "data offset past the end": (with_tensor(offset=2**40), "past the end"),
  "data offset at 2**64 - 32": (with_tensor(offset=2**64 - 32), "past the end"),
  "data offset misaligned": (with_tensor(offset=OFF_Q8 + 1), "not aligned"),
  "unknown ggml type 4": (with_tensor(typ=4), "unknown ggml type id 4"),
  "unknown ggml type 31": (with_tensor(typ=31), "unknown ggml type id 31"),
  "unknown ggml type 2**32-1": (with_tensor(typ=2**32 - 1), "unknown ggml type id 4294967295"),
  "duplicate tensor name": (with_tensor(new_name=Q8), "duplicate tensor name"),
  "overlapping tensors": (with_tensor(offset=OFF_Q8 + 64), "overlap"),
  "name with a newline": (with_tensor(ne=(5, 0), new_name="a\nb"), "'a\\nb'"),
}

@pytest.mark.parametrize("case", list(DAMAGED))
def test_damaged_file(tmp_path, case):
  data, word = DAMAGED[case]
  path = tmp_path / "bad.gguf"
  path.write_bytes(data)
  with pytest.raises(GGUFError) as e: GGUFFile(path)
  msg = str(e.value)
  assert "\n" not in msg and msg.startswith("bad.gguf: ") and len(msg) < 400, msg
  assert word in msg, msg

def test_corrupt_string_count_costs_no_memory(tmp_path):
  """A string array claiming as many items as the rest of a 1 GB (sparse) file could hold, its second item corrupt: the error
  names that item, and the reader held nothing for the items it never read (a list made for the claimed count: 800 MB)."""
  path = tmp_path / "bad.gguf"
  path.write_bytes(with_kv(kv("test.u8", V.ARRAY, array(V.STRING, 100_000_000, s("ok") + struct.pack("<Q", 2**62)))))
  os.truncate(path, 1 << 30)
  tracemalloc.start()
  try:
    with pytest.raises(GGUFError, match=r"'test\.u8'\[1\]"): GGUFFile(path)
  finally:
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
  assert peak < 1 << 20, peak

def test_unreadable_paths(tmp_path):
  with pytest.raises(GGUFError, match="cannot read"): GGUFFile(tmp_path / "missing.gguf")
  with pytest.raises(GGUFError, match="cannot read"): GGUFFile(tmp_path)

def test_closed_file(ref_path):
  g = GGUFFile(ref_path)
  g.close()
  with pytest.raises(GGUFError, match="closed"): g.tensor_data("norm")
  assert g.tensor_bytes() is None
  assert g.metadata["test.arr.i32"].tolist() == list(range(-5, 20))  # metadata does not live in the mapping

@pytest.mark.parametrize("version", [2, 3])
def test_minimal_files(tmp_path, version):
  # header only: no metadata, no tensors (v2 and v3 share the little-endian layout)
  path = tmp_path / "min.gguf"
  path.write_bytes(b"GGUF" + struct.pack("<IQQ", version, 0, 0))
  g = GGUFFile(path)
  assert (g.version, g.metadata, g.tensors, g.alignment, g.tensor_bytes()) == (version, {}, {}, DEFAULT_ALIGNMENT, None)
  with pytest.raises(GGUFError, match="general.architecture"): g.architecture
  header = b"GGUF" + struct.pack("<IQQ", version, 1, 0) + tinfo("x", (32,), T.Q8_0, 0)  # 57 bytes, data at 64
  path.write_bytes(header + b"\0" * 7 + b"\1" * 34)
  g = GGUFFile(path)
  assert g.tensors["x"].offset == 64 and g.tensor_data("x").tolist() == [1] * 34

# ---------------------------------------------------------------- reader: fuzzed headers

HEADER = join(P)[:start(P, "pad")]
BODY = join(P)[len(HEADER):]
EXTREMES = [0, 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63, 2**64 - 1]
REGIONS = [0, start(P, "kv:test.arr.str"), start(P, f"tensor:{Q8}")]

@st.composite
def mutated(draw) -> bytes:
  """The reference header after 1..4 random edits (byte set, u32/u64 field set to an extreme, insert, delete, truncate),
  followed by the tensor data."""
  h = bytearray(HEADER)
  for _ in range(draw(st.integers(1, 4))):
    lo = min(draw(st.sampled_from(REGIONS)), max(len(h) - 1, 0))  # aim some edits past the fixed header
    pos = draw(st.integers(lo, max(len(h) - 1, lo)))
    op = draw(st.sampled_from(["byte", "u64", "u32", "insert", "delete", "truncate"]))
    if op == "byte": h[pos:pos + 1] = bytes([draw(st.integers(0, 255))])
    elif op == "u64": h[pos:pos + 8] = struct.pack("<Q", draw(st.sampled_from(EXTREMES)))
    elif op == "u32": h[pos:pos + 4] = struct.pack("<I", draw(st.sampled_from(EXTREMES)) & 0xFFFFFFFF)
    elif op == "insert": h[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    elif op == "delete": del h[pos:pos + draw(st.integers(1, 16))]
    else: return bytes(h[:pos])
  return bytes(h) + BODY

@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=mutated())
def test_fuzzed_header(tmp_path, data):
  path = tmp_path / "fuzz.gguf"
  path.write_bytes(data)
  tracemalloc.start()
  t0 = time.perf_counter()
  try:
    with GGUFFile(path) as g:
      for name in g.tensors: g.tensor_data(name).sum()
  except GGUFError as e:
    assert "\n" not in str(e)
  finally:
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
  assert time.perf_counter() - t0 < 1.0
  assert peak < 2 * len(data) + 64 * 1024, (peak, len(data))

def _mapped_kib(path: Path) -> int | None:
  """Resident KiB of this process's mappings of `path` (/proc/self/smaps), None where it is not mapped."""
  kib, ours = None, False
  for line in Path("/proc/self/smaps").read_text().splitlines():
    if "-" in line.split(" ", 1)[0] and not line.endswith(":"): ours = line.endswith(str(path))
    elif ours and line.startswith("Rss:"): kib = (kib or 0) + int(line.split()[1])
  return kib

@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux's /proc")
def test_prefetch_maps_the_tensors(tmp_path, monkeypatch):
  """prefetch() maps the tensors' pages on its thread (a loader's copies then take no page faults), the data as it was;
  close() stops the thread and unmaps the file; where the tensors take more than half the free memory it maps nothing."""
  import apps.gguf as gguf_mod
  path = tmp_path / "big.gguf"
  w = GGUFWriter(path)
  w.add("general.architecture", "test", ValueType.STRING)
  names = [f"t{i}" for i in range(6)]
  for n in names: w.add_tensor(n, (4096, 1024), GGMLType.F32)   # 16 MiB each: spans of 64 MiB and a short last one
  w.write(lambda n: np.full((1024, 4096), float(n[1:]), np.float32))
  os.sync()
  gf = GGUFFile(path)
  before = _mapped_kib(path) or 0
  gf.prefetch()
  gf._prefetch[0].join(timeout=60)
  after = _mapped_kib(path)
  assert before < 4096 and after >= 6 * 16 * 1024, (before, after)   # the header's pages before, all 96 MiB after
  for n in names: assert (gf.tensor_data(n).view(np.float32) == float(n[1:])).all()
  thread = gf._prefetch[0]
  gf.close()
  assert not thread.is_alive() and _mapped_kib(path) is None
  monkeypatch.setattr(gguf_mod, "_available_bytes", lambda: 2 * 96 * 2**20 - 1)   # the tensors above half of what is free
  with GGUFFile(path) as gf:
    gf.prefetch()
    assert gf._prefetch is None and (_mapped_kib(path) or 0) < 4096
    assert not gf.fits_memory()   # nor pinned for a device (Engine.load)
  monkeypatch.setattr(gguf_mod, "_available_bytes", lambda: 2 * 96 * 2**20)
  with GGUFFile(path) as gf: assert gf.fits_memory()
