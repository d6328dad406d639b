"""The CPU's hand-written decode product: out[n] = W[n] . x (+ residual[n]) for one token and Q4_0 weights, in C that
clang compiles with its vector extensions (the CPU device's compiler; 16-lane vectors are one AVX-512 register, two AVX2
ones, four NEON ones); per slot, out[j, n] = W[j, n] . x[j] over J slots each with its own weights and input (MLA's
per-head k_b and v_b).

tinygrad's generated product splits every operation into scalars and clang regroups them only as wide as a row's 16-byte
loads, about 2 instructions a weight at 3-5 GB/s. Here a lane takes a word of 4 consecutive blocks of one row (64
contiguous bytes: one stream of memory a row) and x is permuted to match once a call, so each nibble position is one
vector shift, mask and multiply-add for 16 words: 4.4x the generated kernel on this project's 2-core AVX-512 machine
(runs/2026-11-30-cpu-simd, OPTIMIZATION_JOURNAL.md). The packed layout is the apps' own (apps/packed.py: d (N, nb) fp16,
qs (N, nb, 4) words, byte i of a block in bits 8 (i % 4) of word i / 4); the rows are split over the CPU device's threads
(its core_id), each thread permuting x into its own stack, again where its rows enter another slot.
"""
from __future__ import annotations
import functools
from tinygrad import Device, dtypes
from apps.kernels import Param, source_program

def supports(N: int, K: int) -> bool:
  """Shapes the product takes: whole groups of 4 blocks along K, x on the stack (K fp32 values)."""
  return K % 128 == 0 and 0 < K <= 32768 and N > 0

def source(name: str, N: int, K: int, residual: bool, threads: int, J: int = 1, xs: int = 0) -> str:
  """J slots of N rows each, slot j's x at x + j * xs (xs: 0 is K)."""
  nb, rows, xs = K // 32, -(-J * N // threads), xs or K
  return f"""typedef unsigned int u16v __attribute__((ext_vector_type(16)));
typedef unsigned int u16v_a4 __attribute__((ext_vector_type(16), aligned(4)));   /* the weights' loads: no alignment assumed */
typedef float f16v __attribute__((ext_vector_type(16)));
typedef float f4v __attribute__((ext_vector_type(4)));
void {name}(float* restrict out, const float* restrict x, {"const float* restrict residual, " if residual else ""}const __fp16* restrict d,
            const unsigned int* restrict qs, const int core_id) {{
  /* the slot's x in the lanes' order: xp[g][h][b][l] = x[(4g + l / 4) * 32 + 16h + 4 (l % 4) + b], for the weight of nibble
     h of byte 4 (l % 4) + b of block 4g + l / 4 */
  float xp[{K}] __attribute__((aligned(64)));
  int slot = -1;
  const int n1 = (core_id + 1) * {rows} < {J * N} ? (core_id + 1) * {rows} : {J * N};
  for (int n = core_id * {rows}; n < n1; n++) {{
    if (n / {N} != slot) {{
      slot = n / {N};
      const float* xj = x + (long)slot * {xs};
      for (int g = 0; g < {nb // 4}; g++) for (int h = 0; h < 2; h++) for (int b = 0; b < 4; b++) for (int l = 0; l < 16; l++)
        xp[((g * 2 + h) * 4 + b) * 16 + l] = xj[(4 * g + l / 4) * 32 + 16 * h + 4 * (l % 4) + b];
    }}
    const unsigned int* q = qs + (long)n * {nb * 4};
    const __fp16* dn = d + (long)n * {nb};
    f16v acc = 0;
    for (int g = 0; g < {nb // 4}; g++) {{
      u16v w = *(const u16v_a4*)(q + g * 16);
      const f16v* xv = (const f16v*)(xp + g * 128);
      f16v bacc = 0;
      for (int h = 0; h < 2; h++) for (int b = 0; b < 4; b++) {{
        /* (u | 0x4B000000) as fp32 is 2^23 + u: the nibble q as q - 8 without an int -> float convert */
        u16v v = ((w >> (unsigned)(8 * b + 4 * h)) & 15u) | 0x4B000000u;
        bacc += xv[h * 4 + b] * (__builtin_bit_cast(f16v, v) - 8388616.0f);
      }}
      f4v d4 = {{(float)dn[4 * g], (float)dn[4 * g + 1], (float)dn[4 * g + 2], (float)dn[4 * g + 3]}};
      acc += bacc * __builtin_shufflevector(d4, d4, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    }}
    float s = 0.0f;
    for (int l = 0; l < 16; l++) s += acc[l];
    out[n] = s{" + residual[n]" if residual else ""};
  }}
}}
"""

@functools.lru_cache(maxsize=None)
def kernel(N: int, K: int, residual: bool, device: str, J: int = 1, xs: int = 0):
  """A custom_kernel body (out, x, [residual], d, qs) running the product on `device` (a CPU device) on all its threads; J > 1:
  out (J, N) of J slots, slot j's x at x + j * xs (0: K) and its weights rows j N.. of d and qs (no residual)."""
  assert J == 1 or not residual
  threads = max(1, min(Device[device].renderer.global_max[0], J * N))
  name = (f"cpu_q4_0_batched_{J}_{N}_{K}" if J > 1 else f"cpu_q4_0_linear_{N}_{K}") + ("_residual" if residual else "") + (f"_xs{xs}" if xs else "")
  params = (Param("out", dtypes.float32, True), Param("x", dtypes.float32), *([Param("residual", dtypes.float32)] if residual else []),
            Param("d", dtypes.float16), Param("qs", dtypes.uint32))
  return source_program(name, params, source(name, N, K, residual, threads, J, xs), (threads, 1, 1), (1, 1, 1), device, core_id=threads)
