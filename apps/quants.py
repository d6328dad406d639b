"""Numpy reference for the GGUF block formats the project computes with: dequantize any of them, quantize a few.

Each format is decoded for all blocks at once (no Python loop over blocks) following ggml's dequantize_row_* in
ggml-quants.c, with the same float32 operation order, so results match ggml bit for bit (NaN payloads aside) and gguf-py's
numpy dequantizers exactly. It is the ground truth that tests compare the tinygrad kernels with, and tools use it to build
small known weights (quantize: F32, F16, BF16, Q8_0, Q4_0, following ggml's reference quantizers).

Block layouts below list the fields in byte order; `d`, `m`, `dmin` are fp16, nibble = 4 bits.
"""
from __future__ import annotations
from typing import Callable
import numpy as np
from apps.gguf import BLOCK, QK_K, GGMLType

def _f16(b: np.ndarray) -> np.ndarray:
  """(n, 2) uint8 little-endian fp16 fields -> (n, 1) float32."""
  return b.view("<f2").astype(np.float32)

def _nibbles(qs: np.ndarray) -> np.ndarray:
  """(..., k) bytes -> (..., 2k): the k low nibbles, then the k high nibbles (ggml's order inside a 32-weight group)."""
  return np.concatenate([qs & 0xF, qs >> 4], axis=-1)

def _bits32(qh: np.ndarray) -> np.ndarray:
  """(n, 4) bytes of a little-endian uint32 -> (n, 32) bits, bit i first: the 5th bit of weight i in Q5_0/Q5_1."""
  return np.unpackbits(qh, axis=-1, bitorder="little")

# ---------------------------------------------------------------- floats

def _f32(b: np.ndarray) -> np.ndarray: return b.view("<f4").astype(np.float32)
def _bf16(b: np.ndarray) -> np.ndarray:
  # bf16 is the top half of an fp32
  return (b.view("<u2").astype(np.uint32) << 16).view(np.float32)

# ---------------------------------------------------------------- 32-weight blocks

def _q4_0(b: np.ndarray) -> np.ndarray:
  # d | qs[16]: weight j = low nibble of qs[j], weight j+16 = high nibble; y = (q - 8) * d
  q = _nibbles(b[:, 2:18]).astype(np.int8) - 8
  return q.astype(np.float32) * _f16(b[:, 0:2])

def _q4_1(b: np.ndarray) -> np.ndarray:
  # d | m | qs[16]: y = q * d + m
  q = _nibbles(b[:, 4:20])
  return q.astype(np.float32) * _f16(b[:, 0:2]) + _f16(b[:, 2:4])

def _q5_0(b: np.ndarray) -> np.ndarray:
  # d | qh[4] | qs[16]: 5-bit q = nibble | (bit j of qh) << 4; y = (q - 16) * d
  q = (_nibbles(b[:, 6:22]) | (_bits32(b[:, 2:6]) << 4)).astype(np.int8) - 16
  return q.astype(np.float32) * _f16(b[:, 0:2])

def _q5_1(b: np.ndarray) -> np.ndarray:
  # d | m | qh[4] | qs[16]: y = q * d + m
  q = _nibbles(b[:, 8:24]) | (_bits32(b[:, 4:8]) << 4)
  return q.astype(np.float32) * _f16(b[:, 0:2]) + _f16(b[:, 2:4])

def _q8_0(b: np.ndarray) -> np.ndarray:
  # d | qs[32] int8: y = q * d
  return b[:, 2:34].view(np.int8).astype(np.float32) * _f16(b[:, 0:2])

# ---------------------------------------------------------------- 256-weight k-quants

def _scale_min_k4(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Q4_K/Q5_K's 12 scale bytes -> 8 six-bit scales and 8 six-bit mins (ggml's get_scale_min_k4).
  Sub-blocks 0..3 keep scale/min in the low 6 bits of bytes 0..3 / 4..7; sub-blocks 4..7 take their low 4 bits from the
  nibbles of bytes 8..11 and their top 2 bits from the spare top bits of bytes 0..3 (scale) / 4..7 (min)."""
  lo_sc, lo_m, hi = s[:, 0:4], s[:, 4:8], s[:, 8:12]
  sc = np.concatenate([lo_sc & 63, (hi & 0xF) | ((lo_sc >> 6) << 4)], axis=1)
  mn = np.concatenate([lo_m & 63, (hi >> 4) | ((lo_m >> 6) << 4)], axis=1)
  return sc, mn

def _k_affine(b: np.ndarray, q: np.ndarray) -> np.ndarray:
  """Q4_K/Q5_K: (n, 8, 32) quants of 8 sub-blocks -> y = (d * sc) * q - (dmin * m), the products rounded as ggml does."""
  sc, mn = _scale_min_k4(b[:, 4:16])
  d1 = _f16(b[:, 0:2]) * sc.astype(np.float32)
  m1 = _f16(b[:, 2:4]) * mn.astype(np.float32)
  return (d1[:, :, None] * q.astype(np.float32) - m1[:, :, None]).reshape(-1, QK_K)

def _q4_k(b: np.ndarray) -> np.ndarray:
  # d | dmin | scales[12] | qs[128]: for k in 0..3, sub-block 2k = low nibbles of qs[32k:32k+32], 2k+1 = their high nibbles
  return _k_affine(b, _nibbles(b[:, 16:144].reshape(-1, 4, 32)).reshape(-1, 8, 32))

def _q5_k(b: np.ndarray) -> np.ndarray:
  # d | dmin | scales[12] | qh[32] | qs[128]: as Q4_K, plus the 5th bit of weight l of sub-block s is bit s of qh[l]
  low = _nibbles(b[:, 48:176].reshape(-1, 4, 32)).reshape(-1, 8, 32)
  high = (b[:, None, 16:48] >> np.arange(8, dtype=np.uint8)[None, :, None]) & 1
  return _k_affine(b, low | (high << 4))

def _q6_k(b: np.ndarray) -> np.ndarray:
  # ql[128] | qh[64] | scales[16] int8 | d. Two halves of 128 weights, each from ql[64], qh[32]; group g (0..3) of 32 weights
  # in a half: low 4 bits = nibble g>>1 of ql[32*(g&1) + l], high 2 bits = bits 2g..2g+1 of qh[l]; y = (d * scale[w//16]) * (q - 32)
  ql = b[:, 0:128].reshape(-1, 2, 2, 32)
  low = np.stack([ql & 0xF, ql >> 4], axis=2).reshape(-1, 2, 4, 32)
  high = (b[:, 128:192].reshape(-1, 2, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8)[None, None, :, None]) & 3
  q = (low | (high << 4)).astype(np.int8) - 32
  d = _f16(b[:, 208:210]) * b[:, 192:208].view(np.int8).astype(np.float32)
  return (d[:, :, None] * q.reshape(-1, 16, 16).astype(np.float32)).reshape(-1, QK_K)

_DEQUANT: dict[GGMLType, Callable[[np.ndarray], np.ndarray]] = {
  GGMLType.F32: _f32, GGMLType.F16: _f16, GGMLType.BF16: _bf16,
  GGMLType.Q4_0: _q4_0, GGMLType.Q4_1: _q4_1, GGMLType.Q5_0: _q5_0, GGMLType.Q5_1: _q5_1, GGMLType.Q8_0: _q8_0,
  GGMLType.Q4_K: _q4_k, GGMLType.Q5_K: _q5_k, GGMLType.Q6_K: _q6_k,
}
SUPPORTED: frozenset[GGMLType] = frozenset(_DEQUANT)

def _type(typ) -> GGMLType:
  try: return GGMLType(typ)
  except ValueError: raise ValueError(f"unknown ggml type {typ!r}") from None

def dequantize(raw: np.ndarray | bytes, typ: GGMLType) -> np.ndarray:
  """Raw GGUF tensor bytes (any shape; size a multiple of the type's block bytes) -> flat float32 weights."""
  typ = _type(typ)
  if typ not in _DEQUANT: raise ValueError(f"dequantize: ggml type {typ.name} is not supported (supported: {_names(SUPPORTED)})")
  b = np.frombuffer(raw, dtype=np.uint8) if isinstance(raw, (bytes, bytearray, memoryview)) else np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
  nbytes = BLOCK[typ][1]
  if b.size % nbytes: raise ValueError(f"dequantize: {b.size} bytes is not a whole number of {typ.name} blocks ({nbytes} bytes each)")
  with np.errstate(invalid="ignore", over="ignore"): return _DEQUANT[typ](b.reshape(-1, nbytes)).reshape(-1)  # inf/nan scales give inf/nan

# ---------------------------------------------------------------- quantize (ggml's reference quantizers)

def _roundf(x: np.ndarray) -> np.ndarray:
  """C roundf (halves away from zero) of float32 values; exact in float64 since |x| < 2**24 here."""
  x = x.astype(np.float64)
  return np.copysign(np.floor(np.abs(x) + 0.5), x)

def _quant_q8_0(x: np.ndarray) -> np.ndarray:
  # quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) computed as x * (1/d)
  d = np.abs(x).max(axis=1, keepdims=True) / np.float32(127)
  with np.errstate(divide="ignore"): inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
  q = _roundf(x * inv).astype(np.int8)
  return np.concatenate([d.astype("<f2").view(np.uint8), q.view(np.uint8)], axis=1)

def _quant_q4_0(x: np.ndarray) -> np.ndarray:
  # quantize_row_q4_0_ref: d = (the value of largest magnitude, first one on ties; +0 for an all-zero block) / -8,
  # q = min(15, trunc(x / d + 8.5))
  mx = np.take_along_axis(x, np.abs(x).argmax(axis=1)[:, None], axis=1)
  mx = np.where(mx == 0, np.float32(0), mx)
  d = mx / np.float32(-8)
  with np.errstate(divide="ignore"): inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
  q = np.minimum(15, np.trunc(x * inv + np.float32(8.5))).astype(np.uint8)
  return np.concatenate([d.astype("<f2").view(np.uint8), q[:, :16] | (q[:, 16:] << 4)], axis=1)

def _quant_bf16(x: np.ndarray) -> np.ndarray:
  # ggml_compute_fp32_to_bf16: NaN stays NaN (made quiet), everything else rounds to nearest even
  u = x.view(np.uint32)
  rne = (u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) >> 16
  return np.where((u & 0x7FFFFFFF) > 0x7F800000, (u >> 16) | 64, rne).astype("<u2").view(np.uint8)

_QUANT: dict[GGMLType, Callable[[np.ndarray], np.ndarray]] = {
  GGMLType.F32: lambda x: x.astype("<f4").view(np.uint8), GGMLType.F16: lambda x: x.astype("<f2").view(np.uint8),
  GGMLType.BF16: _quant_bf16, GGMLType.Q8_0: _quant_q8_0, GGMLType.Q4_0: _quant_q4_0,
}
QUANTIZABLE: frozenset[GGMLType] = frozenset(_QUANT)

def quantize(x: np.ndarray, typ: GGMLType) -> bytes:
  """float32 weights (any shape; size a multiple of the block) -> the GGUF bytes ggml's reference quantizer writes."""
  typ = _type(typ)
  if typ not in _QUANT: raise ValueError(f"quantize: ggml type {typ.name} is not supported (supported: {_names(QUANTIZABLE)})")
  x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
  block = BLOCK[typ][0]
  if x.size % block: raise ValueError(f"quantize: {x.size} weights is not a whole number of {typ.name} blocks ({block} weights each)")
  with np.errstate(over="ignore"): return _QUANT[typ](x.reshape(-1, block)).tobytes()  # scales beyond fp16 become inf, as in ggml

def _names(types: frozenset[GGMLType]) -> str: return ", ".join(t.name for t in sorted(types))
