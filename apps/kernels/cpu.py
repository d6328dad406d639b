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

Beside it, MLA's decode attention of one token (`mla_decode_attention`, mla_attention.py's contract and math in one kernel):
a thread takes a share of the heads and reads each cached latent row once for all of them.
"""
from __future__ import annotations
import functools, math
from tinygrad import Device, Tensor, dtypes
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

def attention_source(name: str, n_head: int, kv_lora: int, qk_nope: int, qk_rope: int, scale: float, eps: float, kv_offset: int,
                     threads: int) -> str:
  """MLA's decode attention of one new token (apps/kernels/mla_attention.py's math, one kernel): every thread makes the new
  latent row (rms norm, rope) and thread 0 stores it at cache[base + pos]; a thread takes n_head / threads heads and walks
  the rows 0..pos once, each row serving all its heads, with an online softmax in base 2 (the new row its own, never read
  back). exp2 is a polynomial here: the CPU kernels link no libm."""
  L, R, H = kv_lora, qk_rope, n_head
  D, KQ, HT = L + R, qk_nope + qk_rope, -(-n_head // threads)
  f, qs = (lambda x: f"{x:.9e}f"), f"{scale * math.log2(math.e):.9e}f"   # the queries' factor: scale and log2 e
  return f"""typedef float f16v __attribute__((ext_vector_type(16)));
typedef float f16v_a4 __attribute__((ext_vector_type(16), aligned(4)));
static inline float ex2(float x) {{   /* 2^x for x <= 0: Cephes' exp2f polynomial on [-0.5, 0.5] */
  if (x < -126.0f) return 0.0f;
  float n = __builtin_floorf(x + 0.5f), t = x - n;
  float p = 1.535336188e-4f;
  p = p * t + 1.339887440e-3f; p = p * t + 9.618437357e-3f; p = p * t + 5.550332471e-2f; p = p * t + 2.402264791e-1f;
  p = p * t + 6.931472028e-1f; p = p * t + 1.0f;
  return p * __builtin_bit_cast(float, ((int)n + 127) << 23);
}}
static inline float hsum(f16v v) {{ float s = 0.0f; for (int l = 0; l < 16; l++) s += v[l]; return s; }}
void {name}(float* restrict out, float* restrict cache, const float* restrict q_lat, const float* restrict q_raw,
            const float* restrict kv_raw, const float* restrict kv_norm_w, const float* restrict rope_cos,
            const float* restrict rope_sin, const int* restrict pos, const int core_id) {{
  const int p = pos[0], h0 = core_id * {HT}, h1 = h0 + {HT} < {H} ? h0 + {HT} : {H};
  float* rows = cache + (long)pos[1] * {D};
  const float* cs = rope_cos + (long)p * {R // 2};
  const float* sn = rope_sin + (long)p * {R // 2};
  f16v row[{D // 16}], q[{HT}][{D // 16}], acc[{HT}][{L // 16}];
  float m[{HT}], l[{HT}];
  /* the new row: [rms_norm(kv[:L]) * w, rope(kv[L:])] (the rotated even lanes first, then the odd ones) */
  const float* kv = kv_raw + {kv_offset};
  float ss = 0.0f;
  for (int i = 0; i < {L}; i++) ss += kv[i] * kv[i];
  const float inv = 1.0f / __builtin_sqrtf(ss / {L}.0f + {f(eps)});
  float* rf = (float*)row;
  for (int i = 0; i < {L}; i++) rf[i] = kv[i] * inv * kv_norm_w[i];
  for (int i = 0; i < {R // 2}; i++) {{
    float x0 = kv[{L} + 2 * i], x1 = kv[{L} + 2 * i + 1];
    rf[{L} + i] = x0 * cs[i] - x1 * sn[i];
    rf[{L} + {R // 2} + i] = x1 * cs[i] + x0 * sn[i];
  }}
  if (core_id == 0) for (int i = 0; i < {D}; i++) rows[(long)p * {D} + i] = rf[i];
  /* the queries, scale and log2 e folded in */
  for (int h = h0; h < h1; h++) {{
    float* qf = (float*)q[h - h0];
    for (int i = 0; i < {L}; i++) qf[i] = q_lat[h * {L} + i] * {qs};
    const float* qr = q_raw + h * {KQ} + {qk_nope};
    for (int i = 0; i < {R // 2}; i++) {{
      float x0 = qr[2 * i], x1 = qr[2 * i + 1];
      qf[{L} + i] = (x0 * cs[i] - x1 * sn[i]) * {qs};
      qf[{L} + {R // 2} + i] = (x1 * cs[i] + x0 * sn[i]) * {qs};
    }}
    m[h - h0] = -3.0e38f; l[h - h0] = 0.0f;
    for (int v = 0; v < {L // 16}; v++) acc[h - h0][v] = 0.0f;
  }}
  for (int t = 0; t <= p; t++) {{
    const f16v_a4* kt = t == p ? (const f16v_a4*)row : (const f16v_a4*)(rows + (long)t * {D});   /* read in place */
    for (int h = h0; h < h1; h++) {{
      const int j = h - h0;
      f16v d = 0.0f;
      for (int v = 0; v < {D // 16}; v++) d += q[j][v] * kt[v];
      const float s = hsum(d);
      if (s > m[j]) {{
        const float c = ex2(m[j] - s);
        l[j] *= c;
        for (int v = 0; v < {L // 16}; v++) acc[j][v] *= c;
        m[j] = s;
      }}
      const float w = ex2(s - m[j]);
      l[j] += w;
      for (int v = 0; v < {L // 16}; v++) acc[j][v] += w * kt[v];
    }}
  }}
  for (int h = h0; h < h1; h++) {{
    const float r = 1.0f / l[h - h0];
    const float* af = (const float*)acc[h - h0];
    for (int i = 0; i < {L}; i++) out[h * {L} + i] = af[i] * r;
  }}
}}
"""

def attention_supports(n_head: int, kv_lora: int, qk_rope: int, cache: Tensor) -> bool:
  """Shapes the decode attention takes: 16-lane vectors over the latent and rope parts, an fp32 cache, on the stack."""
  return cache.dtype == dtypes.float32 and kv_lora % 16 == 0 and qk_rope % 32 == 0 and n_head <= 128 and kv_lora <= 1024

@functools.lru_cache(maxsize=None)
def attention_kernel(n_head: int, kv_lora: int, qk_nope: int, qk_rope: int, scale: float, eps: float, kv_offset: int, device: str):
  threads = max(1, min(Device[device].renderer.global_max[0], n_head))
  name = f"cpu_mla_decode_attention_{n_head}_{kv_lora}_{qk_rope}"
  params = (Param("out", dtypes.float32, True), Param("cache", dtypes.float32, True, read=True), *(Param(n, dtypes.float32) for n in
            ("q_lat", "q_raw", "kv_raw", "kv_norm_w", "rope_cos", "rope_sin")), Param("pos", dtypes.int32))
  src = attention_source(name, n_head, kv_lora, qk_nope, qk_rope, scale, eps, kv_offset, threads)
  return source_program(name, params, src, (threads, 1, 1), (1, 1, 1), device, core_id=threads)

def mla_decode_attention(q_lat: Tensor, q_raw: Tensor, kv_raw: Tensor, kv_norm_w: Tensor, cache: Tensor, rope_cos: Tensor,
                         rope_sin: Tensor, pos: Tensor, *, n_head: int, kv_lora: int, qk_nope: int, qk_rope: int, scale: float,
                         eps: float, kv_offset: int = 0) -> Tensor:
  """kernels.mla_attention.mla_decode_attention's contract for one sequence's new token on the CPU (B = 1, an fp32 cache):
  the attention output (n_head, kv_lora) and the token's latent row written into the cache by the same kernel."""
  if not attention_supports(n_head, kv_lora, qk_rope, cache): raise ValueError(f"cpu.mla_decode_attention: shape or cache {cache.dtype} not taken")
  fxn = attention_kernel(n_head, kv_lora, qk_nope, qk_rope, float(scale), float(eps), kv_offset, q_lat.device)
  flat = lambda t: t.reshape(-1)
  return Tensor.empty(n_head, kv_lora, device=q_lat.device).custom_kernel(
    cache, flat(q_lat), flat(q_raw), flat(kv_raw), kv_norm_w, rope_cos, rope_sin, flat(pos), fxn=fxn)[0]
