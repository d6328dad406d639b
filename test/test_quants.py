"""apps.quants against independent references: gguf-py's numpy (de)quantizers, and ggml's own C functions from
llama-cpp-python's libggml-base.so when that is installed (requirements-ref.txt; skipped otherwise).

Dequantization must be bitwise equal as float32 to gguf-py for every block, scale fields included at their extremes
(65504, the smallest normal, subnormals, negative, +-0) and non-finite (inf/nan). Against ggml's C it is bitwise equal too
except for NaN payloads (see test_dequantize_matches_ggml_c), so there NaNs only have to sit in the same places.
"""
import ctypes, importlib.util, os
import numpy as np
import pytest
from hypothesis import given, strategies as st
import gguf
import gguf.quants
from apps.gguf import BLOCK, GGMLType
from apps.quants import QUANTIZABLE, SUPPORTED, dequantize, quantize

T = GGMLType
# per type: byte offsets of its fp16 scale fields in a block, and the byte range of its quants (6-bit K-scales included)
LAYOUT = {
  T.Q4_0: ((0,), (2, 18)), T.Q4_1: ((0, 2), (4, 20)), T.Q5_0: ((0,), (2, 22)), T.Q5_1: ((0, 2), (4, 24)), T.Q8_0: ((0,), (2, 34)),
  T.Q4_K: ((0, 2), (4, 144)), T.Q5_K: ((0, 2), (4, 176)), T.Q6_K: ((208,), (0, 208)),
  T.F32: ((), (0, 4)), T.F16: ((), (0, 2)), T.BF16: ((), (0, 2)),
}
QUANT_TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K]

# fp16 bit patterns: +-0, +-65504 (largest), smallest normal 6.1e-5, largest and smallest subnormal, 1, -1, and any finite
FP16_EXTREMES = [0x0000, 0x8000, 0x7BFF, 0xFBFF, 0x0400, 0x8400, 0x03FF, 0x0001, 0x8001, 0x0155, 0x3C00, 0xBC00]
finite_f16 = st.one_of(st.sampled_from(FP16_EXTREMES), st.integers(0, 0xFFFF).filter(lambda h: h & 0x7C00 != 0x7C00))
# +-inf, quiet and signaling NaNs of both signs
nonfinite_f16 = st.sampled_from([0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7FFF, 0x7D55])

@st.composite
def blocks(draw, typ: GGMLType, scale=finite_f16) -> np.ndarray:
  """1..3 blocks of random bytes, each with its fp16 fields drawn from `scale` and its quants maybe all-zero/all-max/..."""
  n, nbytes = draw(st.integers(1, 3)), BLOCK[typ][1]
  raw = bytearray(draw(st.binary(min_size=n * nbytes, max_size=n * nbytes)))
  fields, (q0, q1) = LAYOUT[typ]
  for base in range(0, n * nbytes, nbytes):
    fill = draw(st.sampled_from([None, 0x00, 0xFF, 0x7F, 0x80, 0x88, 0x0F, 0xF0]))  # None: keep the random bytes
    if fill is not None: raw[base + q0:base + q1] = bytes([fill]) * (q1 - q0)
    for off in fields: raw[base + off:base + off + 2] = draw(scale).to_bytes(2, "little")
  return np.frombuffer(bytes(raw), dtype=np.uint8)

def gguf_py(raw: np.ndarray, typ: GGMLType) -> np.ndarray:
  with np.errstate(invalid="ignore", over="ignore"): return gguf.quants.dequantize(raw, gguf.GGMLQuantizationType(int(typ))).reshape(-1)

def assert_bitwise(ours: np.ndarray, ref: np.ndarray) -> None:
  assert ours.dtype == np.float32 and ref.dtype == np.float32 and ours.shape == ref.shape, (ours.dtype, ref.dtype, ours.shape, ref.shape)
  bad = np.flatnonzero(ours.view(np.uint32) != ref.view(np.uint32))
  assert bad.size == 0, f"{bad.size} weights differ, first at {bad[0]}: {ours[bad[0]]!r} vs {ref[bad[0]]!r}"

# ---------------------------------------------------------------- ggml's C, through ctypes

def _libggml():
  spec = importlib.util.find_spec("llama_cpp")
  if spec is None or not spec.submodule_search_locations: return None
  path = os.path.join(spec.submodule_search_locations[0], "lib", "libggml-base.so")
  return ctypes.CDLL(path) if os.path.exists(path) else None
LIBGGML = _libggml()
needs_ggml = pytest.mark.skipif(LIBGGML is None, reason="llama-cpp-python (requirements-ref.txt) is not installed")

def _cfn(name: str):
  fn = getattr(LIBGGML, name)
  fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
  return fn

def ggml_dequantize(raw: np.ndarray, typ: GGMLType) -> np.ndarray:
  n = raw.size // BLOCK[typ][1] * BLOCK[typ][0]
  if typ == T.F32: return raw.view(np.float32).copy()
  name = {T.F16: "ggml_fp16_to_fp32_row", T.BF16: "ggml_bf16_to_fp32_row"}.get(typ, "dequantize_row_" + typ.name.lower().replace("_k", "_K"))
  raw, out = np.ascontiguousarray(raw), np.empty(n, np.float32)
  _cfn(name)(raw.ctypes.data, out.ctypes.data, n)
  return out

def ggml_quantize(x: np.ndarray, typ: GGMLType) -> bytes:
  name = {T.Q8_0: "quantize_row_q8_0_ref", T.Q4_0: "quantize_row_q4_0_ref", T.BF16: "ggml_fp32_to_bf16_row_ref",
          T.F16: "ggml_fp32_to_fp16_row"}[typ]
  x = np.ascontiguousarray(x, dtype=np.float32)
  out = np.zeros(x.size // BLOCK[typ][0] * BLOCK[typ][1], np.uint8)
  _cfn(name)(x.ctypes.data, out.ctypes.data, x.size)
  return out.tobytes()

# ---------------------------------------------------------------- dequantize

def test_supported():
  assert SUPPORTED == {T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K}

@pytest.mark.parametrize("typ", sorted(SUPPORTED), ids=lambda t: t.name)
@given(data=st.data())
def test_dequantize_matches_gguf_py(typ, data):
  raw = data.draw(blocks(typ))
  assert_bitwise(dequantize(raw, typ), gguf_py(raw, typ))

@pytest.mark.parametrize("typ", QUANT_TYPES, ids=lambda t: t.name)
@given(data=st.data())
def test_dequantize_nonfinite_scales_match_gguf_py(typ, data):
  raw = data.draw(blocks(typ, st.one_of(nonfinite_f16, finite_f16)))
  assert_bitwise(dequantize(raw, typ), gguf_py(raw, typ))

@needs_ggml
@pytest.mark.parametrize("typ", sorted(SUPPORTED), ids=lambda t: t.name)
@given(data=st.data())
def test_dequantize_matches_ggml_c(typ, data):
  raw = data.draw(blocks(typ, st.one_of(finite_f16, nonfinite_f16)))
  ours, ref = dequantize(raw, typ), ggml_dequantize(raw, typ)
  # NaNs only have to sit in the same places: ggml's fp16 -> fp32 sets the quiet bit of signaling NaNs (numpy keeps them),
  # and where two NaNs meet (Q4_1's q*d + m with d = inf, m = nan) IEEE leaves open whose payload survives: the C compiler
  # may swap the operands of +
  nan = np.isnan(ours)
  assert (nan == np.isnan(ref)).all()
  assert_bitwise(ours[~nan], ref[~nan])

def test_dequantize_known_values():
  # hand-built blocks, read off ggml's formulas: Q8_0 y = q*d; Q4_0 y = (nibble - 8)*d with low nibbles first
  q8 = np.concatenate([np.frombuffer(np.float16(0.5).tobytes(), np.uint8), np.arange(-16, 16, dtype=np.int8).view(np.uint8)])
  assert dequantize(q8, T.Q8_0).tolist() == [0.5 * v for v in range(-16, 16)]
  q4 = np.concatenate([np.frombuffer(np.float16(-2).tobytes(), np.uint8), np.full(16, 0xF0, np.uint8)])
  assert dequantize(q4, T.Q4_0).tolist() == [16.0] * 16 + [-14.0] * 16

def test_dequantize_any_shape_and_bytes():
  raw = np.random.default_rng(1).integers(0, 256, 4 * 210, dtype=np.uint8)
  ref = dequantize(raw, T.Q6_K)
  assert ref.shape == (1024,) and ref.dtype == np.float32
  assert_bitwise(dequantize(raw.reshape(2, 2, 210), T.Q6_K), ref)
  assert_bitwise(dequantize(raw.tobytes(), T.Q6_K), ref)
  assert dequantize(np.zeros(0, np.uint8), T.Q4_K).shape == (0,)

@pytest.mark.parametrize("typ", [T.Q2_K, T.Q3_K, T.IQ4_NL, T.Q8_1, T.MXFP4], ids=lambda t: t.name)
def test_dequantize_unsupported(typ):
  with pytest.raises(ValueError, match=typ.name): dequantize(np.zeros(BLOCK[typ][1], np.uint8), typ)

def test_dequantize_bad_size():
  with pytest.raises(ValueError, match="Q4_K blocks"): dequantize(np.zeros(145, np.uint8), T.Q4_K)
  with pytest.raises(ValueError, match="unknown ggml type"): dequantize(np.zeros(4, np.uint8), 5)

# ---------------------------------------------------------------- quantize

# blocks of weights in [-s, s] with one of them at +-s (s = 0 for an all-zero block), s chosen so the fp16 scale d stays
# normal and the error bounds below hold; float32 values inside, subnormal ones included
SCALES = [0.0, 0.01, 0.3, 1.0, 3.0, 100.0, 1e4]
@st.composite
def rows(draw, block: int = 32) -> np.ndarray:
  n = draw(st.integers(1, 3))
  x = np.array(draw(st.lists(st.floats(-1.0, 1.0, width=32), min_size=n * block, max_size=n * block)), np.float32).reshape(n, block)
  for i in range(n): x[i, draw(st.integers(0, block - 1))] = draw(st.sampled_from([1.0, -1.0]))
  return (x * np.array(draw(st.lists(st.sampled_from(SCALES), min_size=n, max_size=n)), np.float32)[:, None]).reshape(-1)

# exact ties of x/d at .5 (roundf rounds them away from zero), the extreme value negative/positive, an all-zero block
TIES = [np.array([127, 2.5, -2.5, 0.5, -0.5, 1.5, 126.5, -126.5] * 4, np.float32), np.array([-8, 0.5, -0.5, 7.5, 8, 3.5, -7.5, 1] * 4, np.float32),
        np.array([8, 0.5, -0.5, 7.5, -8, 3.5, -7.5, 1] * 4, np.float32), np.zeros(32, np.float32), -np.zeros(32, np.float32)]

def test_quantizable():
  assert QUANTIZABLE == {T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0}
  with pytest.raises(ValueError, match="Q4_K"): quantize(np.zeros(256, np.float32), T.Q4_K)
  with pytest.raises(ValueError, match="Q8_0 blocks"): quantize(np.zeros(48, np.float32), T.Q8_0)

@pytest.mark.parametrize("typ", sorted(QUANTIZABLE), ids=lambda t: t.name)
@given(data=st.data())
def test_quantize_matches_gguf_py(typ, data):
  # + 0.0 turns -0 into +0: for an all-zero Q4_0 block starting with -0, gguf-py takes d = -0/-8 = +0 where ggml's C
  # gives d = +0/-8 = -0 (its running max starts at +0); we follow the C, checked in test_quantize_matches_ggml_c
  x = data.draw(st.one_of(rows(), st.sampled_from(TIES))) + np.float32(0)
  assert quantize(x, typ) == gguf.quants.quantize(x, gguf.GGMLQuantizationType(int(typ))).tobytes()

@needs_ggml
@pytest.mark.parametrize("typ", [T.Q8_0, T.Q4_0, T.F16, T.BF16], ids=lambda t: t.name)
@given(data=st.data())
def test_quantize_matches_ggml_c(typ, data):
  x = data.draw(st.one_of(rows(), st.sampled_from(TIES)))
  assert quantize(x, typ) == ggml_quantize(x, typ)

def test_quantize_bf16_nan_and_rounding():
  x = np.array([np.nan, -np.inf, 1 + 2**-8, 1 + 3 * 2**-8, 3.4e38, 1 + 2**-8 + 2**-20], np.float32)
  got = np.frombuffer(quantize(x, T.BF16), "<u2")
  assert (got[0] & 0x7FC0) == 0x7FC0 and got[1] == 0xFF80                     # quiet NaN, -inf kept
  assert got[2:].tolist() == [0x3F80, 0x3F82, 0x7F80, 0x3F81]                  # ties to even; overflow to inf; above the tie

@given(x=rows())
def test_q8_0_round_trip_error(x):
  y, b = dequantize(quantize(x, T.Q8_0), T.Q8_0).reshape(-1, 32), x.reshape(-1, 32)
  d = np.abs(b).max(axis=1, keepdims=True) / 127
  # half a step, plus the fp16 rounding of d (relative 2**-11) times |q| <= 127, plus float32 slack
  assert (np.abs(y - b) <= d * (0.5 + 127 * 2**-11 + 1e-5)).all()
  assert (y[b == 0] == 0).all()

@given(x=rows())
def test_q4_0_round_trip_error(x):
  y, b = dequantize(quantize(x, T.Q4_0), T.Q4_0).reshape(-1, 32), x.reshape(-1, 32)
  mx = np.take_along_axis(b, np.abs(b).argmax(axis=1)[:, None], axis=1)
  d = np.abs(mx) / 8
  # the 16 levels are -8..7 steps of d with the extreme value at -8: values at the opposite end (x/d > 7.5) clip to 7,
  # one step off; others are within half a step. Plus the fp16 rounding of d times |q| <= 8, plus float32 slack.
  step = np.where(b * np.sign(-mx) / np.where(d == 0, 1, d) > 7.5, 1.0, 0.5)
  assert (np.abs(y - b) <= d * (step + 8 * 2**-11 + 1e-5)).all()
  assert (y[b == 0] == 0).all()
