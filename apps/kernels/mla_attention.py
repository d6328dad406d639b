"""MLA decode attention (one new token) as two hand-written kernels instead of ~10-15 generated ones per block.

With the up-projections absorbed (apps/mla.py), decode attention is multi-query attention of n_head queries over ONE
latent cache row per token, [c_kv (kv_lora) | k_pe (qk_rope)], with V = c_kv. For the token at position pos:
  row_pos = [rms_norm(kv_raw[:kv_lora]) * kv_norm_w, rope(kv_raw[kv_lora:])]   -> written to cache[pos]
  q[h]    = [q_lat[h], rope(q_raw[h, qk_nope:])]
  out[h]  = sum_t softmax_t(scale * q[h] . row_t) * c_kv_t       t = 0..pos
rope is apps.mla.apply_rope (pairs (x0, x1) rotated, the rotated even lanes first, then the odd ones) on the row `pos` of
the model's cos/sin tables.

Flash-decoding in two kernels:
  attend   grid (SPLITS), workgroup (32, G): the context is cut into contiguous chunks, one per workgroup (chunks are at
           least MIN_CHUNK tokens, so short contexts use few workgroups and the combine reads few partials). The
           workgroup copies its rows to shared memory a stage of up to 16 rows at a time (a stage fits Metal's 32 KB),
           pipelined: the next stage's loads go to registers, all in flight at once, before this stage's rows are used,
           so memory and math overlap. All G warps walk the same rows: warp g owns HG = n_head / G heads (two where they
           divide: more warps hide the shuffles' latency, 1.3x at 16k keys against four), whose queries and accumulators
           sit in registers (lane i owns latent lanes 4v..4v+3 for v = i, i + 32, ...), so a row read once serves every
           head. Tokens go TT at a time; a lane's HG * TT partial scores are summed over the warp in one transposed
           reduction (k - 1 + 5 + k shuffles for k scores where one WARP_SUM each takes 5 k); scores are max-subtracted
           in base 2 (log2 e folded into the scale) with a running max and sum per head. The split that holds pos
           computes the new row itself (every warp: cheap) and its warp 0 writes it to the cache; nobody reads
           cache[pos]. Each warp leaves (max, sum, acc[kv_lora]) per head per split.
  combine  grid (n_head, kv_lora / 128), workgroup (32, 8): rescales the partials of the splits that hold tokens to their
           common max and sums them (8 warps over the splits, each loading all of its splits' partials before it uses
           any: one wait on memory, not one a split; then through shared memory), out = acc / sum.
Both read pos from a 1-element int32 buffer (a source kernel gets no symbolic ints), so one capture serves every position.
One sequence's token over an fp16 cache on the tensor cores (CUDA sm_80+) attends through attend_depth_kernel: the attend
kernel above below decode_mma_from(s) keys, attend_mma_kernel from there (64-key stages in 196 KB of dynamic workgroup memory,
the heads an m16 tile), chosen by the position at run time, with the same partials for the combine. 17-24 heads
(GLM-4.7-Flash's 20) take attend_mma_t_kernel at every depth instead: the keys as the mma's M and the heads as its N (three
n8 tiles), so one workgroup a split reads each key once where two m16 tiles of heads read it twice.
apps/mla.py's `decode_attention_reference` is the same computation from tinygrad ops (any device), for tests and tools.
"""
from __future__ import annotations
import math
from dataclasses import dataclass
from tinygrad import Tensor, dtypes
from apps.kernels import SourceKernel, Param, Fusions, program, cached, language_of, has_mma, to_bound, matvec, max_smem

SPLITS = 128     # partials per head at most (~one workgroup per SM of an H100 at long contexts)
MIN_CHUNK = 8    # tokens per split at least
TT = 2           # tokens per step of a warp
COMBINE_WARPS = 8
NEG = "-3.0e38f"  # a finite minus infinity: exp2(NEG - m) is 0 and NEG - NEG is 0 (no inf - inf NaN, fast-math safe)
PREFILL_SPLITS = 8       # prefill: partials per token and head at most (the combine reads them all)
PREFILL_MIN_CHUNK = 16   # prefill: keys per split at least (a mixed step's 32-token chunk at ~300 keys: 8 splits, not 5)
PREFILL_PAIRS = 512      # prefill: (token, split) workgroups a chunk aims at
PREFILL_MMA_FROM = 64    # prefill: tokens from which a chunk attends on the tensor cores (a shorter one's m16 tiles are too few
                         # workgroups, each walking every key: the split kernel and its combine instead)

def prefill_splits(tokens: int) -> int:
  """Splits of each token's keys in a prefill chunk of `tokens`: enough for PREFILL_PAIRS workgroups, so a short chunk
  still fills the GPU. From 512 tokens on, one: the attend kernel normalizes and writes the output itself, and the
  partials (tokens x splits x heads x kv_lora floats: 75 MB per block of a 512-token chunk at 8) and the combine are
  gone."""
  return max(1, min(PREFILL_SPLITS, PREFILL_PAIRS // max(1, tokens)))

@dataclass(frozen=True)
class AttentionShape:
  n_head: int
  kv_lora: int
  qk_nope: int
  qk_rope: int

  @property
  def heads_per_warp(self) -> int: return next((hg for hg in (2, 4, 8, 1) if self.n_head % hg == 0 and self.n_head // hg <= 32), 1)
  @property
  def stage_rows(self) -> int:
    """Cached rows per shared-memory stage: up to 16 within 32 KB (Metal's limit; 14 rows of 576 floats)."""
    return max(1, min(16, 32768 // (4 * (self.kv_lora + self.qk_rope))))

def _check_shape(s: AttentionShape, half: bool = False) -> None:
  if s.n_head < 1 or s.kv_lora < 4 or s.kv_lora % 4 or s.qk_rope < 2 or s.qk_rope % 4 or s.qk_nope < 0:
    raise ValueError(f"mla_decode_attention: unsupported shape {s} (kv_lora and qk_rope must be multiples of 4)")
  if half and (s.kv_lora % 8 or s.qk_rope % 8):
    raise ValueError(f"mla_decode_attention: an fp16 cache needs kv_lora and qk_rope multiples of 8 (16-byte rows), not {s}")
  if 4 * (s.kv_lora + s.qk_rope) > 32768: raise ValueError(f"mla_decode_attention: a cache row of {s} does not fit in 32 KB")
  if s.n_head // s.heads_per_warp > 32: raise ValueError(f"mla_decode_attention: {s.n_head} heads need more than 32 warps per workgroup")

def _f32(x: float) -> str: return f"{x:.9e}f"

def _cache_dtype(half: bool): return dtypes.float16 if half else dtypes.float32

def _load4(dst: str, src: str, s: AttentionShape) -> str:
  """dst[4i..4i+3] = the float4 `src` (an expression of v) for the lane's latent slots v = lane + 32i (zeros past kv_lora)."""
  ld = f"{{ float4 x_ = {src}; {dst}[4*i] = x_.x; {dst}[4*i+1] = x_.y; {dst}[4*i+2] = x_.z; {dst}[4*i+3] = x_.w; }}"
  if (s.kv_lora // 4) % 32: ld = f"if (v < KV4) {ld} else {{ {dst}[4*i] = {dst}[4*i+1] = {dst}[4*i+2] = {dst}[4*i+3] = 0.0f; }}"
  return f"for (int i = 0; i < NV4; i++) {{ int v = lane + 32*i; {ld} }}"

def _stage_loads(parts: list[tuple[str, str, str, int, str]], c0: str, cn: str) -> str:
  """For each part (type, width, load, per_thread, store): registers tmp<n>[i] = element e % width of the row c0 + e / width
  of the cache, e = tid + i*NT, for the stage's cn rows, at clamped addresses (every load is valid: none waits behind a
  branch, so they are all in flight at once and the compute of the stage before overlaps them)."""
  return "\n    ".join(f"for (int i = 0; i < {pt}; i++) {{ int e = tid + i*NT, ec = e < {cn}*{width} ? e : 0, t = ec / {width}, c0_ = {c0}; "
                         f"tmp{n}[i] = {load.replace('c0', 'c0_')}; }}" for n, (ty, width, load, pt, store) in enumerate(parts))

def _stage_stores(parts: list[tuple[str, str, str, int, str]], cn: str) -> str:
  """Each part's registers into shared memory: `store` with e (the element) and x (the register)."""
  return "\n    ".join(f"for (int i = 0; i < {pt}; i++) {{ int e = tid + i*NT; if (e < {cn}*{width}) {{ {ty} x = tmp{n}[i]; {store} }} }}"
                         for n, (ty, width, load, pt, store) in enumerate(parts))

def _cache_parts(s: AttentionShape, rows: int, threads: int, half: bool) -> list[tuple[str, str, str, int, str]]:
  """The stage copy of `rows` cache rows by `threads` threads: the latent part (float4s into stage_c; from an fp16 cache read
  8 halves at a time and widened) and the rope part (floats into stage_r)."""
  if not half:
    return [("float4", "KV4", "((const GLOBAL float4*)(cache + (c0 + t)*ROW))[ec - t*KV4]", -(-rows * s.kv_lora // 4 // threads), "stage_c[e] = x;"),
            ("float", "R", "cache[(c0 + t)*ROW + KV + ec - t*R]", -(-rows * s.qk_rope // threads), "stage_r[e] = x;")]
  wide = lambda a, b: f"FLOAT4(H2F_BITS(x.{a}), H2F_BITS(x.{a} >> 16), H2F_BITS(x.{b}), H2F_BITS(x.{b} >> 16))"
  return [("uint4", "KV8", "((const GLOBAL uint4*)(cache + (c0 + t)*ROW))[ec - t*KV8]", -(-rows * s.kv_lora // 8 // threads),
           f"stage_c[2*e] = {wide('x', 'y')}; stage_c[2*e + 1] = {wide('z', 'w')};"),
          ("float", "R", "H2F(cache[(c0 + t)*ROW + KV + ec - t*R])", -(-rows * s.qk_rope // threads), "stage_r[e] = x;")]

def _rope_guard(s: AttentionShape, expr: str) -> str: return expr if s.qk_rope % 32 == 0 else f"j < R ? {expr} : 0.0f"

_SIZEOF = {"float": 4, "float4": 16, "uint4": 16}

def _shared(arrays: list[tuple[str, str, int]], smem: str = "") -> str:
  """Shared arrays (type, name, count): declared, or with `smem` (a shared buffer the kernel declares once) placed one after
  the other in it, so two bodies in one kernel share its bytes (_shared_bytes each)."""
  if not smem: return "\n  ".join(f"SHARED {t} {n}[{c}];" for t, n, c in arrays)
  out, at = [], f"(char*){smem}"
  for t, n, c in arrays:
    out.append(f"{t}* {n} = ({t}*)({at});")
    at = f"(char*)({n} + {c})"
  return "\n  ".join(out)

def _shared_bytes(arrays: list[tuple[str, str, int]]) -> int: return sum(_SIZEOF[t] * c for t, _, c in arrays)

def _attend_shared(s: AttentionShape) -> list[tuple[str, str, int]]:
  """attend_kernel's stage: stage_rows rows, the latent part as float4s, the rope part as floats."""
  return [("float4", "stage_c", s.stage_rows * (s.kv_lora // 4)), ("float", "stage_r", s.stage_rows * s.qk_rope)]

def _warp_sums(k: int) -> str:
  """sc_[0..k) (k a power of two, 2..32) summed over the warp, every lane getting all k: halves of the values cross at each
  of the first log2 k shuffle distances (each lane keeps one half, summed with its partner's), the last value goes on over
  the remaining distances, then lane j << (5 - log2 k) holds sum j: k - 1 + 5 + k shuffles where k WARP_SUMs take 5 k."""
  out, width, off = [], k, 16
  while width > 1:
    h = width // 2
    out.append(f"{{ bool up_ = lane & {off}; for (int i = 0; i < {h}; i++) {{ float s_ = up_ ? sc_[i] : sc_[i + {h}], "
               f"k_ = up_ ? sc_[i + {h}] : sc_[i]; sc_[i] = k_ + SHFL_XOR(s_, {off}); }} }}")
    width, off = h, off // 2
  while off >= 1: out.append(f"sc_[0] += SHFL_XOR(sc_[0], {off});"); off //= 2
  out.append(f"for (int i = {k - 1}; i >= 0; i--) sc_[i] = SHFL(sc_[0], i << {5 - k.bit_length() + 1});")
  return "\n      ".join(out)

def _update(tt: int, valid: str, hg: int) -> str:
  """Fold tt loaded rows r[j] (latent) / rk[j] (rope) into every head's running max m, sum l and acc; `valid` masks tokens.
  The hg * tt partial scores of a lane are summed over the warp in one transposed reduction where their count allows
  (3-4% faster attend at 16k-32k keys than one WARP_SUM each)."""
  k = hg * tt
  sums = f"""{{
      float sc_[{k}];
      for (int hh = 0; hh < HG; hh++) for (int j = 0; j < {tt}; j++) sc_[hh*{tt} + j] = sc[hh][j];
      {_warp_sums(k)}
      for (int hh = 0; hh < HG; hh++) for (int j = 0; j < {tt}; j++) sc[hh][j] = {valid} ? sc_[hh*{tt} + j] * SCALE2 : NEG;
    }}""" if 2 <= k <= 32 and k & (k - 1) == 0 else f"""for (int hh = 0; hh < HG; hh++) for (int j = 0; j < {tt}; j++) {{  // independent shuffles: the compiler overlaps them
      float d = WARP_SUM(sc[hh][j]) * SCALE2;
      sc[hh][j] = {valid} ? d : NEG;
    }}"""
  return f"""
    float sc[HG][{tt}];
    for (int hh = 0; hh < HG; hh++) for (int j = 0; j < {tt}; j++) {{
      float d = 0.0f;
      for (int i = 0; i < 4*NV4; i++) d += ql[hh][i] * r[j][i];
      for (int k = 0; k < NR; k++) d += qr[hh][k] * rk[j][k];
      sc[hh][j] = d;
    }}
    {sums}
    for (int hh = 0; hh < HG; hh++) {{
      float mx = m[hh];
      for (int j = 0; j < {tt}; j++) mx = sc[hh][j] > mx ? sc[hh][j] : mx;
      if (mx > m[hh]) {{                     // a new max (the same on every lane): rescale; after the first keys, rarely
        float alpha = EXP2(m[hh] - mx);
        l[hh] *= alpha;
        for (int i = 0; i < 4*NV4; i++) acc[hh][i] *= alpha;
        m[hh] = mx;
      }}
      float ps = 0.0f;
      for (int j = 0; j < {tt}; j++) {{ sc[hh][j] = EXP2(sc[hh][j] - mx); ps += sc[hh][j]; }}
      l[hh] += ps;
      for (int i = 0; i < 4*NV4; i++) {{
        float a = acc[hh][i];
        for (int j = 0; j < {tt}; j++) a += sc[hh][j] * r[j][i];
        acc[hh][i] = a;
      }}
    }}"""

def _common(s: AttentionShape, token: str | None = None, max_context: int = 0, splits: int = PREFILL_SPLITS, row: str = "0") -> str:
  """The position and the split of the keys, the same in attend and combine. pos holds [position, first cache row of the
  sequence] pairs. Decode: row `row`'s token at pos[2 row] (keys 0..pos, the last one its own new row). Prefill (`token`:
  its index in the chunk): the chunk's token `token` at pos[0] + token, whose keys 0..its position are all in the cache (a
  padded token past the context reads the last row: its output is dropped)."""
  splits, minc = (SPLITS, MIN_CHUNK) if token is None else (splits, PREFILL_MIN_CHUNK)
  where = f"int p = pos[2*{row}], n = p + 1;" if token is None else \
          f"int p = pos[0] + {token}; p = p < {max_context} ? p : {max_context - 1};\n  int n = p + 1;"
  return f"""  GRID_WAIT();                            // everything here depends on earlier kernels of the step (q, pos, the cache)
  const int H = {s.n_head}, KV = {s.kv_lora}, S = {splits}, MINC = {minc};
  const float NEG = {NEG};
  {where}
  int chunk = (n + S - 1) / S;
  chunk = chunk < MINC ? MINC : chunk;   // the same split of 0..pos in both kernels"""

_ROPE_LANE = """
// lane j of apply_rope(x) with this position's cos/sin: the rotated even lanes (x0 c - x1 s) first, then the odd ones (x1 c + x0 s)
DEVFN float rope_lane(const GLOBAL float* x, const GLOBAL float* cs, const GLOBAL float* sn, int j, int half_) {
  int i = j < half_ ? j : j - half_;
  float x0 = x[2*i], x1 = x[2*i + 1], c = cs[i], s = sn[i];
  return j < half_ ? x0 * c - x1 * s : x1 * c + x0 * s;
}"""

def _attend(s: AttentionShape, position: str, head: str, queries: str, t1: str, new_row: str, part: str, scale: float,
            final: bool = False, half: bool = False, smem: str = "") -> str:
  """The attend kernel's body around its variable parts: `position` (_common), `head` (constants and indices, sets sp),
  `queries` (this warp's q in registers: ql, qr), `t1` (the end of the cached keys of the split [t0, t1)), `new_row`
  (after the cached keys: decode's new token) and `part` (the partial's index b of head g*HG + hh). `final`: the split
  holds all the keys, so the output acc / l goes to `out` (row b) and no (max, sum). smem: _shared's."""
  hg = s.heads_per_warp
  g, ch = s.n_head // hg, s.stage_rows
  parts = _cache_parts(s, ch, 32 * g, half)
  rope_c = _rope_guard(s, "stage_r[tj*R + j]")
  guard_v = "" if (s.kv_lora // 4) % 32 == 0 else "if (v < KV4) "
  ml_store = "" if final else "\n    if (lane == 0) { ml[2*b] = m[hh]; ml[2*b + 1] = l[hh]; }"
  return f"""{position}
  const int HG = {hg}, R = {s.qk_rope}, NR = {-(-s.qk_rope // 32)}, ROW = KV + R;
  const int KV4 = {s.kv_lora // 4}, KV8 = {s.kv_lora // 8}, NV4 = {-(-s.kv_lora // 128)}, CH = {ch}, NT = {32 * g};
  const float SCALE2 = {_f32(scale * math.log2(math.e))};{head}
  int t0 = sp * chunk;
  if (t0 >= n) return;                            // no tokens here (the combine skips this split too)
  int t1 = {t1};
  // this warp's heads g*HG..: the query's latent part and its roped part (rope lanes j = lane + 32k) in registers
  float ql[HG][4*NV4], qr[HG][NR];
  for (int hh = 0; hh < HG; hh++) {{
    int h = g*HG + hh;{queries}
  }}
  float m[HG], l[HG], acc[HG][4*NV4];
  for (int hh = 0; hh < HG; hh++) {{
    m[hh] = NEG; l[hh] = 0.0f;
    for (int i = 0; i < 4*NV4; i++) acc[hh][i] = 0.0f;
  }}
  // the cached rows, CH at a time through shared memory: all of a stage's loads are in flight at once (constant trip
  // counts unroll), so a split waits for memory once per stage instead of once per token
  {_shared(_attend_shared(s), smem)}
  int tid = g*32 + lane;
  // pipelined: the next stage's loads go to registers before this stage's rows are used, so memory and math overlap
  {parts[0][0]} tmp0[{parts[0][3]}];
  {parts[1][0]} tmp1[{parts[1][3]}];
  int cn = t1 - t0 < CH ? t1 - t0 : CH;
  if (cn > 0) {{
    {_stage_loads(parts, "t0", "cn")}
  }}
  for (int c0 = t0; c0 < t1; c0 += CH) {{
    BARRIER();                                    // the previous stage is consumed
    {_stage_stores(parts, "cn")}
    BARRIER();
    int c1 = c0 + CH, cn1 = t1 - c1 < CH ? t1 - c1 : CH;
    if (cn1 > 0) {{
      {_stage_loads(parts, "c1", "cn1")}
    }}
    for (int t = 0; t < cn; t += {TT}) {{
      float r[{TT}][4*NV4], rk[{TT}][NR];
      for (int j0 = 0; j0 < {TT}; j0++) {{
        int tj = t + j0 < cn ? t + j0 : cn - 1;   // past the stage: its last row again, masked out below
        {_load4("r[j0]", "stage_c[tj*KV4 + v]", s)}
        for (int k = 0; k < NR; k++) {{ int j = lane + 32*k; rk[j0][k] = {rope_c}; }}
      }}{_update(TT, "t + j < cn", hg)}
    }}
    cn = cn1;
  }}{new_row}
  for (int hh = 0; hh < HG; hh++) {{
    int b = {part};
{"    float f = 1.0f / l[hh];" if final else ""}
    for (int i = 0; i < NV4; i++) {{
      int v = lane + 32*i;
      {guard_v}((GLOBAL float4*)({"out" if final else "part"} + b*KV))[v] = FLOAT4({", ".join(f"acc[hh][4*i+{k}]" + (" * f" if final else "") for k in range(4))});
    }}{ml_store}
  }}"""

def _attend_params(half: bool) -> tuple[Param, ...]:
  """The decode attend kernels' parameters (attend_kernel, attend_mma_kernel): partials, the cache, the new token's inputs."""
  return (Param("part", dtypes.float32, True), Param("ml", dtypes.float32, True), Param("cache", _cache_dtype(half), True),
          Param("q_lat", dtypes.float32), Param("q_raw", dtypes.float32), Param("kv_raw", dtypes.float32),
          Param("kv_norm_w", dtypes.float32, weight=True), Param("rope_cos", dtypes.float32, weight=True),
          Param("rope_sin", dtypes.float32, weight=True), Param("pos", dtypes.int32))

def attend_kernel(s: AttentionShape, scale: float, eps: float, kv_offset: int = 0, half: bool = False, rows: int = 1,
                  q_stride: int = 0, kv_stride: int = 0, smem: str = "") -> SourceKernel:
  """kv_offset: where the new token's kv row starts in kv_raw (a stacked [q_a; kv_a] output: the kernel reads it in place).
  half: the cache is fp16; the new row is rounded to it before its own score, as every later token reads it.
  rows: new tokens of that many sequences at once (grid y), row b's q_raw and kv_raw q_stride and kv_stride elements after
  row b - 1's, its q_lat (n_head, kv_lora) after row b - 1's, its position and first cache row at pos[2b], pos[2b + 1].
  smem: _shared's."""
  _check_shape(s, half)
  g = s.n_head // s.heads_per_warp
  rope_q = _rope_guard(s, f"rope_lane(q_raw + row*{q_stride} + h*(NOPE + R) + NOPE, cs, sn, j, HALF)")
  rope_k = _rope_guard(s, f"rope_lane(kv_raw + row*{kv_stride} + {kv_offset} + KV, cs, sn, j, HALF)")
  to_cache = (lambda x: f"F2H({x})") if half else (lambda x: x)
  store_k = f"cache[p*ROW + KV + j] = {to_cache('rk[0][k]')};"
  if s.qk_rope % 32: store_k = f"if (j < R) {store_k}"
  rounded = "" if not half else """
    for (int i = 0; i < 4*NV4; i++) r[0][i] = H2F(F2H(r[0][i]));   // the row as the fp16 cache holds it
    for (int k = 0; k < NR; k++) rk[0][k] = H2F(F2H(rk[0][k]));"""
  store_c = "((GLOBAL float4*)(cache + p*ROW))[v] = FLOAT4(r[0][4*i], r[0][4*i+1], r[0][4*i+2], r[0][4*i+3]);" if not half else \
            " ".join(f"cache[p*ROW + 4*v + {k}] = F2H(r[0][4*i+{k}]);" for k in range(4))
  guard_v = "" if (s.kv_lora // 4) % 32 == 0 else "if (v < KV4) "
  head = f"""
  const int NOPE = {s.qk_nope}, HALF = {s.qk_rope // 2};
  const float EPS = {_f32(eps)};
  int lane = LID_X, g = LID_Y, sp = GID_X, row = GID_Y;
  cache += (long)pos[2*row + 1] * ROW;           // this sequence's rows of the cache
  const GLOBAL float* cs = rope_cos + p*HALF;
  const GLOBAL float* sn = rope_sin + p*HALF;"""
  queries = f"""
    {_load4("ql[hh]", "((const GLOBAL float4*)(q_lat + (row*H + h)*KV))[v]", s)}
    for (int k = 0; k < NR; k++) {{ int j = lane + 32*k; qr[hh][k] = {rope_q}; }}"""
  new_row = f"""
  if (p < t0 + chunk) {{  // the new token: its row from kv_raw, into the cache (warp 0) and into the sums
    float r[1][4*NV4], rk[1][NR];
    {_load4("r[0]", f"((const GLOBAL float4*)(kv_raw + row*{kv_stride} + {kv_offset}))[v]", s)}
    float ss = 0.0f;
    for (int i = 0; i < 4*NV4; i++) ss += r[0][i] * r[0][i];
    float rs = 1.0f / sqrt(WARP_SUM(ss) / (float)KV + EPS);
    for (int i = 0; i < NV4; i++) {{
      int v = lane + 32*i;
      {guard_v}{{
        float4 w = ((const GLOBAL float4*)kv_norm_w)[v];
        r[0][4*i] = r[0][4*i] * rs * w.x; r[0][4*i+1] = r[0][4*i+1] * rs * w.y;
        r[0][4*i+2] = r[0][4*i+2] * rs * w.z; r[0][4*i+3] = r[0][4*i+3] * rs * w.w;
      }}
    }}
    for (int k = 0; k < NR; k++) {{ int j = lane + 32*k; rk[0][k] = {rope_k}; }}{rounded}
    if (g == 0) {{
      for (int i = 0; i < NV4; i++) {{
        int v = lane + 32*i;
        {guard_v}{{ {store_c} }}
      }}
      for (int k = 0; k < NR; k++) {{ int j = lane + 32*k; {store_k} }}
    }}{_update(1, "true", s.heads_per_warp)}
  }}"""
  body = _attend(s, _common(s, row="GID_Y"), head, queries,
                 "t0 + chunk < p ? t0 + chunk : p;       // cached tokens of this split: [t0, t1); token p is the new one",
                 new_row, "(row*S + sp)*H + g*HG + hh", scale, half=half, smem=smem)
  params = _attend_params(half)
  name = f"mla_attend_h{s.n_head}_kv{s.kv_lora}_r{s.qk_rope}" + (f"_o{kv_offset}" if kv_offset else "") + ("_f16" if half else "") + \
         (f"_b{rows}_q{q_stride}_k{kv_stride}" if rows > 1 else "")
  return SourceKernel(name, params, body, (SPLITS, rows, 1), (32, g, 1), _ROPE_LANE)

def prefill_attend_kernel(s: AttentionShape, scale: float, tokens: int, max_context: int, half: bool = False, first: int = 0) -> SourceKernel:
  """Prefill: the attend kernel for a chunk of `tokens` queries, q (tokens, n_head, kv_lora) absorbed and qpe (tokens,
  n_head, qk_rope) roped (as apps/mla.py computes them), over the cache, into which the chunk's rows were already written;
  token t (at position pos[0] + t) sees keys 0..pos[0] + t. Grid (splits, tokens): a workgroup per split of a token's
  keys, the last token's first (the most keys: the longest workgroups start first and the short ones fill the tail).
  With one split (prefill_splits) it writes the output (tokens, n_head, kv_lora) itself, else the combine's partials.
  half: the cache is fp16. first: the chunk's queries start at row `first` of q (a mixed step's k_b product: the step's rows
  before them)."""
  _check_shape(s, half)
  g = s.n_head // s.heads_per_warp
  S = prefill_splits(tokens)
  head = f"""
  int lane = LID_X, g = LID_Y, sp = GID_X, tok = {tokens - 1} - GID_Y;
  cache += (long)pos[1] * ROW;                   // this sequence's rows of the cache{_first_rows(s, first)}"""
  queries = f"""
    {_load4("ql[hh]", "((const GLOBAL float4*)(q + (tok*H + h)*KV))[v]", s)}
    for (int k = 0; k < NR; k++) {{ int j = lane + 32*k; qr[hh][k] = {_rope_guard(s, f"qpe[(tok*H + h)*{s.qk_rope} + j]")}; }}"""
  body = _attend(s, _common(s, f"({tokens - 1} - GID_Y)", max_context, S), head, queries,
                 "t0 + chunk < n ? t0 + chunk : n;       // the keys of this split: [t0, t1)", "",
                 "tok*H + g*HG + hh" if S == 1 else "(tok*S + sp)*H + g*HG + hh", scale, final=S == 1, half=half)
  outs = (Param("out", dtypes.float32, True),) if S == 1 else (Param("part", dtypes.float32, True), Param("ml", dtypes.float32, True))
  params = outs + (Param("q", dtypes.float32), Param("qpe", dtypes.float32), Param("cache", _cache_dtype(half)), Param("pos", dtypes.int32))
  return SourceKernel(f"mla_prefill_attend_{tokens}_h{s.n_head}_kv{s.kv_lora}_r{s.qk_rope}" + ("_f16" if half else "") + (f"_f{first}" if first else ""), params, body,
                      (S, tokens, 1), (32, g, 1), trigger=False)

# ---- prefill on the tensor cores (CUDA sm_80+): the chunk's (token, head) rows 16 at a time, a flash-attention tile

MMA_ROWS = 16   # (token, head) rows per workgroup: one m16 tile of mma.sync
MMA_KEYS = 8    # keys per shared-memory stage: one n8 tile of the scores, one k8 step of the values
MMA_GROUP = 2   # m16 tiles a workgroup of a long chunk runs on the same staged keys

def _stage_pad(half: bool) -> int: return 8 if half else 4   # cache elements between a stage's rows past D: 16 bytes

def mma_warps(s: AttentionShape, half: bool = False) -> int:
  """Warps of the tensor-core prefill kernel (0: it does not serve `s`): each owns an equal slice of the score's
  kv_lora + qk_rope dims (k-steps of 8) and of the kv_lora value columns (n-tiles of 8); 8 where both divide."""
  D = s.kv_lora + s.qk_rope
  nw = next((nw for nw in (8, 4, 2, 1) if D % 8 == 0 and (D // 8) % nw == 0 and s.kv_lora % 8 == 0 and (s.kv_lora // 8) % nw == 0), 0)
  fits = 2 * MMA_KEYS * (D + _stage_pad(half)) * _cache_dtype(half).itemsize + 32 * nw * 16 * MMA_GROUP <= 48 * 1024
  return nw if fits else 0   # two stages and the partial scores of a workgroup of MMA_GROUP tiles

def mma_group(s: AttentionShape, tokens: int) -> int:
  """m16 tiles a workgroup of the tensor-core prefill kernel owns: MMA_GROUP from two tiles per SM on, where a tile is whole
  tokens (each staged key then serves MMA_GROUP tiles: a chunk reads the cache from L2 once a group, not once a tile; the
  SMs hold as many warps as with a workgroup a tile), else 1. Measured on the H200, a 512-token chunk at 0 / 4096 / 15872:
  16 heads 5-8% faster in groups, 20 heads (tiles across tokens) 1-6% slower; a short chunk keeps its tiles on more SMs."""
  return MMA_GROUP if s.n_head % MMA_ROWS == 0 and -(-tokens * s.n_head // MMA_ROWS) >= 2 * matvec.SMS else 1

def _first_rows(s: AttentionShape, first: int) -> str:
  return f"\n  q += {first * s.n_head * s.kv_lora};                   // the chunk's queries: after the step's rows'" if first else ""

def prefill_mma_kernel(s: AttentionShape, scale: float, tokens: int, max_context: int, half: bool = False, group: int | None = None,
                       first: int = 0) -> SourceKernel:
  """The prefill attend kernel on the tensor cores, the same parameters and output as prefill_attend_kernel with one split
  (out, q, qpe, cache, pos). Rows are the chunk's (token, head) pairs, r = token * n_head + head; a workgroup owns
  `group` m16 tiles of them (mma_group; the last ones first: the most keys) and walks their keys 0..n - 1 (its last row's)
  8 at a time through shared memory (two stages, cp.async: the next stage loads while this one computes). Each tile has
  nw warps: warp w computes the scores of its slice of the dims (its queries in registers), the slices meet in shared
  memory, and every warp of the tile runs the online softmax of the 16 x 8 tile (each row masked at its own token's
  position) and accumulates its slice of the value columns from the same staged keys. Products are three tf32 mma.sync (hi hi + hi lo + lo hi: fp32 accuracy), a stage's
  values summed apart and added to the running output in fp32 (the tensor cores' sums truncate: over thousands of keys
  in one accumulator that shows). The cache rows up to the last token's position must hold finite numbers, a padded
  token's too: a row's zero weights still multiply the values of the keys past its own (the model's cache starts zeroed).
  half: the cache is fp16, whose values tf32 holds exactly: two products a pair (hi k + lo k, hi v + lo v), the keys
  staged as they are stored (half the bytes) and not split. first: prefill_attend_kernel's."""
  nw, m = mma_warps(s, half), group or mma_group(s, tokens)
  assert nw and tokens > 0 and 1 <= m <= MMA_GROUP, (s, m)
  D, KV = s.kv_lora + s.qk_rope, s.kv_lora
  rows = tokens * s.n_head
  tiles = -(-rows // MMA_ROWS)
  groups = -(-tiles // m)
  keys = f"(min(p0 + (({{r}}) < ROWS ? ({{r}}) : ROWS - 1) / H, {max_context - 1}) + 1)"
  nk = D // nw // 8
  # hi = x rounded to tf32 (nearest, ties away: +half an ulp of tf32, truncate), lo = x - hi (exact; the mma truncates it)
  split = lambda x, h, l: f"{h} = AS_FLOAT((AS_UINT({x}) + 0x1000u) & 0xffffe000u); {l} = {x} - {h};"
  size, ct = _cache_dtype(half).itemsize, "half" if half else "float"
  d4 = D * size // 16                            # 16-byte pieces of a cache row
  tail = f"if (lane < {d4 % 32}) CP_ASYNC16(dst + {d4 - d4 % 32}, src + {d4 - d4 % 32}); " if d4 % 32 else ""
  st4 = (D + _stage_pad(half)) * size // 16      # ... of a staged row
  # a staged key or value element as a float: tf32 hi and lo of an fp32 cache, the fp16 itself (exact in tf32) of an fp16 one
  elem = (lambda x, h, l: f"float {x} = H2F({x}_); ") if half else (lambda x, h, l: f"float {x} = {x}_, {h}, {l}; " + split(x, h, l))
  kmma = ("MMA_TF32(sc2[j & 1][0], qh[j], k0, k1); MMA_TF32(sc2[j & 1][1], ql[j], k0, k1);" if half else
          "MMA_TF32(sc2[j & 1][0], qh[j], k0h, k1h); MMA_TF32(sc2[j & 1][1], qh[j], k0l, k1l); MMA_TF32(sc2[j & 1][1], ql[j], k0h, k1h);")
  vmma = ("MMA_TF32(acc, ph, v0, v1); MMA_TF32(acc, pl, v0, v1);" if half else
          "MMA_TF32(acc, ph, v0h, v1h); MMA_TF32(acc, ph, v0l, v1l); MMA_TF32(acc, pl, v0h, v1h);")
  body = f"""  GRID_WAIT();
  const int H = {s.n_head}, KV = {KV}, R = {s.qk_rope}, D = {D}, ST = {D + _stage_pad(half)}, ROWS = {rows};
  const int DW = {D // nw}, CW = {KV // nw}, NK = {nk}, NN = {KV // nw // 8};
  const float NEG = {NEG}, SCALE2 = {_f32(scale * math.log2(math.e))};
  int lane = LID_X, w = LID_Y, wd = w % {nw}, g = lane >> 2, t = lane & 3;   // warp w: dims slice wd of tile w / {nw}
  int rg = ({groups - 1} - (int)GID_X) * {MMA_ROWS * m}, r0 = rg + w / {nw} * {MMA_ROWS}, ra = r0 + g, rb = ra + 8;
  int p0 = pos[0];
  cache += (long)pos[1] * D;                     // this sequence's rows of the cache{_first_rows(s, first)}
  // keys 0..n - 1 of row r: its token's position pos[0] + r / H (clamped to the context: a padded token), + 1
  int na = {keys.format(r="ra")}, nb = {keys.format(r="rb")}, nmax = {keys.format(r=f"rg + {MMA_ROWS * m - 1}")};
  // this warp's dims DW*wd.. of the 16 queries as A fragments (rows g, g + 8; dims t, t + 4 of each step of 8), scaled to
  // base-2 scores and split into tf32 hi + lo
  float qh[NK][4], ql[NK][4];
  for (int j = 0; j < NK; j++) for (int i = 0; i < 4; i++) {{
    int r = (i & 1) ? rb : ra, d = DW*wd + 8*j + t + 4*(i >> 1);
    float x = r < ROWS ? (d < KV ? q[r*KV + d] : qpe[r*R + d - KV]) * SCALE2 : 0.0f;
    {split("x", "qh[j][i]", "ql[j][i]")}
  }}
  // two stages of 8 key rows, ST = D + 16 bytes apart: the score fragments (keys g, dims t) read 32 banks, the value
  // fragments (keys t, columns g) 16 (an unpadded row of 576 floats would put all 8 keys on one bank)
  SHARED float4 stage[2*{MMA_KEYS}*{st4}];
  SHARED float4 part[{32 * nw * m}];              // the warps' partial scores, in the order the A fragments of P read them
  const {ct}* st = (const {ct}*)stage;
  float o[NN][4], ma = NEG, mb = NEG, la = 0.0f, lb = 0.0f;
  for (int n = 0; n < NN; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  // stage b <- key rows c0..c0 + 7 (past the last one: the last one again); warp w copies rows w, w + {nw * m}, ..
  #define LOAD_STAGE(c0, b) for (int i = w; i < {MMA_KEYS}; i += {nw * m}) {{ \
    int key = (c0) + i < nmax ? (c0) + i : nmax - 1; \
    const float4* src = (const float4*)(cache + key*D) + lane; float4* dst = stage + ((b)*{MMA_KEYS} + i)*{st4} + lane; \
    for (int j = 0; j < {d4 // 32}; j++) CP_ASYNC16(dst + 32*j, src + 32*j); \
    {tail}}}
  LOAD_STAGE(0, 0)
  for (int c0 = 0, b = 0; c0 < nmax; c0 += {MMA_KEYS}, b ^= 1) {{
    CP_ASYNC_WAIT();
    BARRIER();                            // stage b is in for every thread; stage b ^ 1 and part are free again
    if (c0 + {MMA_KEYS} < nmax) LOAD_STAGE(c0 + {MMA_KEYS}, b ^ 1)
    const {ct}* kb = st + b*{MMA_KEYS}*ST;
    // partial scores: this warp's dims of the 16 rows . keys c0 + 0..7 (B fragment: key g, dims t, t + 4); hi hi and the
    // two cross terms in two accumulators each for the even and the odd steps (four chains of dependent mma, not one)
    float sc2[2][2][4];
    for (int e = 0; e < 2; e++) for (int u = 0; u < 2; u++) for (int i = 0; i < 4; i++) sc2[e][u][i] = 0.0f;
    const {ct}* kr = kb + g*ST + DW*wd + t;
    for (int j = 0; j < NK; j++) {{
      {ct} k0_ = kr[8*j], k1_ = kr[8*j + 4];
      {elem("k0", "k0h", "k0l")}{elem("k1", "k1h", "k1l")}
      {kmma}
    }}
    // C (row g | g + 8, key 2t + e) goes to lane 4 g + (2t + e) % 4, slot (row >= 8) + 2 (key >= 4)
    float* pw = (float*)part + w*128;
    int sa = (4*g + ((2*t) & 3))*4 + 2*(t >> 1), sb = (4*g + ((2*t + 1) & 3))*4 + 2*(t >> 1);
    float cs[4];
    for (int i = 0; i < 4; i++) cs[i] = (sc2[0][0][i] + sc2[1][0][i]) + (sc2[0][1][i] + sc2[1][1][i]);
    pw[sa] = cs[0]; pw[sb] = cs[1]; pw[sa + 1] = cs[2]; pw[sb + 1] = cs[3];
    BARRIER();
    // the scores of rows a, b at keys c0 + t (s[0], s[1]) and c0 + t + 4 (s[2], s[3]): the A fragment of P
    float sc[4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
    for (int v = w - wd; v < w - wd + {nw}; v++) {{ float4 x = part[v*32 + lane]; sc[0] += x.x; sc[1] += x.y; sc[2] += x.z; sc[3] += x.w; }}
    int k0i = c0 + t, k1i = k0i + 4;
    sc[0] = k0i < na ? sc[0] : NEG; sc[1] = k0i < nb ? sc[1] : NEG; sc[2] = k1i < na ? sc[2] : NEG; sc[3] = k1i < nb ? sc[3] : NEG;
    // online softmax: the row's max over the stage (its 8 keys sit in the lane's quad), rescale, weights
    float xa = FMAX(sc[0], sc[2]), xb = FMAX(sc[1], sc[3]);
    xa = FMAX(xa, SHFL_XOR(xa, 1)); xb = FMAX(xb, SHFL_XOR(xb, 1));
    xa = FMAX(xa, SHFL_XOR(xa, 2)); xb = FMAX(xb, SHFL_XOR(xb, 2));
    xa = FMAX(xa, ma); xb = FMAX(xb, mb);
    float aa = EXP2(ma - xa), ab = EXP2(mb - xb);
    ma = xa; mb = xb;
    float pr[4] = {{EXP2(sc[0] - xa), EXP2(sc[1] - xb), EXP2(sc[2] - xa), EXP2(sc[3] - xb)}}, ph[4], pl[4];
    la = la*aa + (pr[0] + pr[2]); lb = lb*ab + (pr[1] + pr[3]);
    for (int i = 0; i < 4; i++) {{ {split("pr[i]", "ph[i]", "pl[i]")} }}
    // out = out * alpha + P . V over this warp's columns CW*wd.. (B fragment: keys t, t + 4, column g)
    const {ct}* vr = kb + t*ST + CW*wd + g;
    for (int n = 0; n < NN; n++) {{
      {ct} v0_ = vr[8*n], v1_ = vr[8*n + 4*ST];
      {elem("v0", "v0h", "v0l")}{elem("v1", "v1h", "v1l")}
      float acc[4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
      {vmma}
      o[n][0] = o[n][0]*aa + acc[0]; o[n][1] = o[n][1]*aa + acc[1]; o[n][2] = o[n][2]*ab + acc[2]; o[n][3] = o[n][3]*ab + acc[3];
    }}
  }}
  #undef LOAD_STAGE
  la += SHFL_XOR(la, 1); la += SHFL_XOR(la, 2); lb += SHFL_XOR(lb, 1); lb += SHFL_XOR(lb, 2);
  float ia = 1.0f / la, ib = 1.0f / lb;
  for (int n = 0; n < NN; n++) {{
    int col = CW*wd + 8*n + 2*t;
    if (ra < ROWS) {{ out[ra*KV + col] = o[n][0] * ia; out[ra*KV + col + 1] = o[n][1] * ia; }}
    if (rb < ROWS) {{ out[rb*KV + col] = o[n][2] * ib; out[rb*KV + col + 1] = o[n][3] * ib; }}
  }}"""
  params = (Param("out", dtypes.float32, True), Param("q", dtypes.float32), Param("qpe", dtypes.float32), Param("cache", _cache_dtype(half)),
            Param("pos", dtypes.int32))
  # from two tiles per SM on, compiled for 128 registers (a few spill: H100, 512 tokens -13% per block, with two workgroups
  # per SM of one tile each); one wave of tiles (128 tokens) runs 13% faster with more and no spills
  name = f"mla_prefill_mma_{tokens}_h{s.n_head}_kv{KV}_r{s.qk_rope}" + ("_f16" if half else "") + (f"_g{m}" if m > 1 else "") + \
         (f"_f{first}" if first else "")
  return SourceKernel(name, params, body, (groups, 1, 1), (32, nw * m, 1), trigger=False,
                      min_blocks=2 if m == 1 and tiles >= 2 * matvec.SMS else 1)

# ---- decode on the tensor cores (CUDA sm_80+, an fp16 cache): the heads a 16-row tile, the keys 64 a stage

DECODE_MMA_KEYS = 64     # keys a stage: 8 n8 tiles of scores, 8 k8 steps of the values (the softmax's lanes: 4 a tile)
DECODE_MMA_STAGES = 2    # stages in workgroup memory: the next one's copies in flight while one computes (150 KB of rows)
_FRAG = 144              # floats a tile's 32 lanes of float4 fragments take in workgroup memory: 128, padded so that the
                         # softmax's lanes (4 a tile, 8 tiles) read and write them without bank conflicts

def decode_mma_warps(s: AttentionShape) -> int:
  """Warps of attend_mma_kernel (0: it does not serve `s`): each an equal slice of the row's kv_lora + qk_rope dims (k-steps
  of 8) and of the kv_lora value columns (pairs of n8 tiles); 8 where both divide."""
  D = s.kv_lora + s.qk_rope
  return next((w for w in (8, 4, 2, 1) if D % (8 * w) == 0 and s.kv_lora % (16 * w) == 0), 0)

def _mma_decode_shared(s: AttentionShape) -> list[tuple[str, str, int]]:
  """attend_mma_kernel's workgroup memory: DECODE_MMA_STAGES stages of DECODE_MMA_KEYS rows (fp16, padded), the warps'
  partial scores of a stage, P's A fragments (hi, lo) and each row's rescale."""
  D, KS = s.kv_lora + s.qk_rope, DECODE_MMA_KEYS
  return [("uint4", "stage", DECODE_MMA_STAGES * KS * (D + _stage_pad(True)) // 8), ("float", "part_s", decode_mma_warps(s) * KS // 8 * _FRAG),
          ("float", "pbuf", 2 * KS // 8 * _FRAG), ("float", "alpha_s", 16)]

def decode_mma_serves(s: AttentionShape, device: str) -> bool:
  """attend_depth_kernel takes a decode token of `s` on `device`: the tensor cores, one or two tiles of 16 heads, and the
  workgroup memory a launch may have there (sm_90's 227 KB)."""
  return has_mma(device) and decode_mma_serves_shape(s) and _shared_bytes(_mma_decode_shared(s)) <= max_smem(device)

def decode_mma_serves_shape(s: AttentionShape) -> bool:
  """One or two tiles of 16 heads whose dims and columns split over the tensor-core kernel's warps, no more of them than
  the CUDA-core kernel has (the depth kernel launches the latter's; the -tiny presets' 4 heads: 2 warps, not served)."""
  return s.n_head <= 32 and 0 < decode_mma_warps(s) <= s.n_head // s.heads_per_warp

_SPLIT_KEYS = """  cache += (long)pos[1] * D;                     // this sequence's rows of the cache
  int t0 = sp * chunk;
  if (t0 >= n) return;                            // no keys here (the combine skips this split too)
  int t1 = t0 + chunk < n ? t0 + chunk : n;       // keys [t0, t1); the split that holds p ends with it
  const GLOBAL float* cs = rope_cos + p*HALF;
  const GLOBAL float* sn = rope_sin + p*HALF;"""   # a decode tensor-core kernel's split of the keys and the new token's angles

def _stage_macros(KS: int, D: int, SK: int, NRC: int, nw: int, on: str) -> str:
  """The decode tensor-core kernels' stages of KS key rows (SK halves apart): LOAD_STAGE(c0, b) copies rows c0.. of the split
  by cp.async (one commit group a stage), rows past t1 zeros (no NaN of stale memory reaches P . V); NEW_ROW(c0, b) puts the
  last split's key p, the new token's row, into the stage that holds it from warp 0's registers (nr), so no stage waits for
  the row to reach memory and come back."""
  return f"""  int kc = t1 == n ? p : t1, hole = t1 == n ? p : -1;
  uint4 nr[{NRC}];
  #define NEW_ROW(c0, b) if (hole >= 0 && w == 0 && (c0) <= p && p < (c0) + {KS}) \
    for (int i_ = 0; i_ < {NRC}; i_++) {{ int c_ = lane + 32*i_; if (c_ < {D // 8}) stage[((b)*{KS} + p - (c0))*{SK // 8} + c_] = nr[i_]; }}
  #define LOAD_STAGE(c0, b) if ((c0) < t1{" && w < NW" if on else ""}) {{ for (int e_ = tid; e_ < {KS * D // 8}; e_ += {32 * nw}) {{ \
    int i_ = e_ / {D // 8}, c_ = e_ % {D // 8}, key_ = (c0) + i_; uint4* d_ = &stage[((b)*{KS} + i_)*{SK // 8} + c_]; \
    if (key_ < kc) CP_ASYNC16(d_, (const GLOBAL uint4*)(cache + (long)key_*D) + c_); else if (key_ != hole) *d_ = UINT4(0u, 0u, 0u, 0u); }} }} \
    CP_ASYNC_COMMIT();"""

def _new_row(kv_offset: int, D: int, NRC: int, NB: int, KS: int) -> str:
  """Warp 0 of the split that holds p computes the new token's row (kv_a's latent normed and its rope part roped, fp16 in
  nr: lane's 16-byte pieces c = lane + 32i) while the queries load, stores it to the cache and into the stages loaded so far."""
  return f"""    if (hole >= 0 && w == 0) {{                   // the new token's row (lane's 16-byte pieces c = lane + 32i) while those load
      const GLOBAL float* kv = kv_raw + {kv_offset};
      float xr[{NRC}][8], ss = 0.0f;
      for (int i = 0; i < {NRC}; i++) for (int k = 0; k < 8; k++) {{
        int d = 8*(lane + 32*i) + k;
        xr[i][k] = d < KV ? kv[d] : d < D ? rope_lane(kv + KV, cs, sn, d - KV, HALF) : 0.0f;
      }}
      for (int v = lane; v < KV; v += 32) ss += kv[v] * kv[v];   // attend_kernel's order of the sum: the same row to the bit
      float rs = 1.0f / sqrt(WARP_SUM(ss) / (float)KV + EPS);
      for (int i = 0; i < {NRC}; i++) {{
        for (int k = 0; k < 8; k++) {{ int d = 8*(lane + 32*i) + k; if (d < KV) xr[i][k] = xr[i][k] * rs * kv_norm_w[d]; }}
        nr[i] = UINT4(PACK_H2(xr[i][0], xr[i][1]), PACK_H2(xr[i][2], xr[i][3]), PACK_H2(xr[i][4], xr[i][5]), PACK_H2(xr[i][6], xr[i][7]));
        if (lane + 32*i < {D // 8}) ((GLOBAL uint4*)(cache + (long)p*D))[lane + 32*i] = nr[i];
      }}
      for (int s_ = 0; s_ < {NB - 1}; s_++) {{ NEW_ROW(t0 + s_*{KS}, s_) }}
    }}"""

def attend_mma_kernel(s: AttentionShape, scale: float, eps: float, kv_offset: int = 0, warps: int = 0, smem: str = "") -> SourceKernel:
  """attend_kernel (one sequence, an fp16 cache) on the tensor cores: the same parameters, split of the keys and partials,
  so combine_kernel takes them as they are. A workgroup is a split x a tile of 16 heads (grid y: more heads, more tiles,
  the last rows zero queries, not stored). Keys go DECODE_MMA_KEYS a stage through workgroup memory (cp.async,
  DECODE_MMA_STAGES stages: the next loads while this one computes), three barriers a stage:
  - scores: warp w owns a slice of the dims, its queries in registers as tf32 A fragments (hi + lo: fp32-accurate against
    the cache's exact fp16 keys; dims 2t, 2t + 1 of a k-step are lane t's, one 32-bit load of two halves); its partial
    scores of the stage's 8 n8 tiles go to workgroup memory;
  - softmax: warp w owns rows w, w + 8 (and w + nw, ...), a lane 4 keys of them: the parts summed, the running max and sum,
    P = exp2(s - max) as tf32 hi + lo A fragments (k index t / t + 4 = key 2t / 2t + 1) and the rows' rescale;
  - values: warp w owns a slice of the kv_lora columns, its running output rescaled and P . V added (2 mma a k-step and
    column tile; a lane's 32-bit word of a key row is column 2g, 2g + 1: the pair of n8 tiles it feeds).
  A split's first stage copies start before its queries load; the split that holds the new token has warp 0 compute the
  row (fp16, as later tokens read it) while they load, store it to the cache and put it in its stage straight from
  registers, so no split waits for the row; rows past the split are zeros. warps: the launch's (more than its
  decode_mma_warps: the others only pass the barriers); smem: a workgroup buffer declared by the caller (DYN_SHARED), else
  its own."""
  _check_shape(s, True)
  nw = decode_mma_warps(s)
  assert nw and s.n_head > 0 and warps in (0, *range(nw, 33)), (s, warps)
  on = "if (w < NW) " if warps > nw else ""   # the launch's extra warps: every barrier, none of the work
  KV, R, H = s.kv_lora, s.qk_rope, s.n_head
  D, KS, NB = KV + R, DECODE_MMA_KEYS, DECODE_MMA_STAGES
  SK, NK, NP, NJ, RG = D + _stage_pad(True), D // nw // 8, KV // nw // 16, KS // 8, 8 // nw
  QS, NL, NRQ, NRC = D + 8, -(-16 * KV // 4 // (32 * nw)), -(-16 * R // (32 * nw)), -(-D // 8 // 32)
  assert NJ == 8, "the softmax's lanes are 4 a tile of 8 keys"
  assert 16 * QS <= (nw + 2) * NJ * _FRAG, "the queries fit in part_s and pbuf"
  split = lambda x, h, l: f"{h} = AS_FLOAT((AS_UINT({x}) + 0x1000u) & 0xffffe000u); {l} = {x} - {h};"
  nbytes = _shared_bytes(_mma_decode_shared(s))
  body = f"""{_common(s)}
  const int D = {D}, R = {R}, NOPE = {s.qk_nope}, HALF = {R // 2}, DQW = {D // nw}, DVW = {KV // nw}, F = {_FRAG}, QS = {QS}, NW = {nw};
  const float SCALE2 = {_f32(scale * math.log2(math.e))}, EPS = {_f32(eps)};
  int lane = LID_X, w = LID_Y, g = lane >> 2, t = lane & 3, tid = w*32 + lane, sp = GID_X, h0 = GID_Y*16;
  int ha = h0 + g, hb = ha + 8;
{_SPLIT_KEYS}
  {"" if smem else "DYN_SHARED(uint4, smem_);"}
  {_shared(_mma_decode_shared(s), smem or "smem_")}
  const uint* sw = (const uint*)stage;
  // stage b <- key rows c0..c0 + {KS - 1}, 16 bytes a copy: the cached rows by cp.async (one commit group a stage), rows past
  // t1 zeros (masked out of the softmax: no NaN of stale memory reaches P . V), and the last split's key p, the new token's
  // row, from warp 0's registers (nr) as it goes to the cache: no stage waits for the row to reach memory and come back
{_stage_macros(KS, D, SK, NRC, nw, on)}
  for (int s_ = 0; s_ < {NB - 1}; s_++) {{ LOAD_STAGE(t0 + s_*{KS}, s_) }}
  // the tile's 16 queries (roped, scaled to base 2) into workgroup memory, rows QS floats apart (over part_s and pbuf, free
  // until the stages' loop). Every load is issued before any is used (the latent part as float4s, the rope part's pairs
  // and angles, at clamped addresses): a load behind a select or a branch waits for the one before it
  float* qs = part_s;
  {on}{{
    float4 lat[{NL}];
    float x0[{NRQ}], x1[{NRQ}], ca[{NRQ}], sa[{NRQ}];
    for (int i = 0; i < {NL}; i++) {{
      int e = tid + i*{32 * nw}; e = e < {16 * KV // 4} ? e : {16 * KV // 4 - 1};
      int h = h0 + e / {KV // 4}; h = h < H ? h : H - 1;
      lat[i] = ((const GLOBAL float4*)(q_lat + h*KV))[e % {KV // 4}];
    }}
    for (int i = 0; i < {NRQ}; i++) {{
      int e = tid + i*{32 * nw}; e = e < {16 * R} ? e : {16 * R - 1};
      int h = h0 + e / R, j = e % R, k = j < HALF ? j : j - HALF; h = h < H ? h : H - 1;
      const GLOBAL float* x = q_raw + h*(NOPE + R) + NOPE;
      x0[i] = x[2*k]; x1[i] = x[2*k + 1]; ca[i] = cs[k]; sa[i] = sn[k];
    }}
{_new_row(kv_offset, D, NRC, NB, KS)}
    for (int i = 0; i < {NL}; i++) {{
      int e = tid + i*{32 * nw}, r = e / {KV // 4};
      float f = h0 + r < H ? SCALE2 : 0.0f;
      if (e < {16 * KV // 4}) ((float4*)(qs + r*QS))[e % {KV // 4}] = FLOAT4(lat[i].x * f, lat[i].y * f, lat[i].z * f, lat[i].w * f);
    }}
    for (int i = 0; i < {NRQ}; i++) {{
      int e = tid + i*{32 * nw}, r = e / R, j = e % R;
      float f = h0 + r < H ? SCALE2 : 0.0f;
      if (e < {16 * R}) qs[r*QS + KV + j] = (j < HALF ? x0[i] * ca[i] - x1[i] * sa[i] : x1[i] * ca[i] + x0[i] * sa[i]) * f;
    }}
  }}
  float o[{2 * NP}][4], mr[{RG}][2], lr[{RG}][2];   // the output of this warp's columns; its softmax rows' max and sum
  for (int m = 0; m < {2 * NP}; m++) o[m][0] = o[m][1] = o[m][2] = o[m][3] = 0.0f;
  for (int r = 0; r < {RG}; r++) mr[r][0] = mr[r][1] = NEG, lr[r][0] = lr[r][1] = 0.0f;
  BARRIER();                                      // the queries are in qs
  // this warp's dims DQW*w.. of the queries as A fragments: rows g, g + 8; k-step k's k index t / t + 4 is dim 8k + 2t /
  // 8k + 2t + 1 (one float2 a row: QS % 32 == 8, so the half-warps' pairs fill the 32 banks)
  float qh[{NK}][4], ql[{NK}][4];
  {on}for (int k = 0; k < {NK}; k++) {{
    float2 a = ((const float2*)(qs + g*QS + DQW*w + 8*k))[t], c = ((const float2*)(qs + (g + 8)*QS + DQW*w + 8*k))[t];
    float x[4] = {{a.x, c.x, a.y, c.y}};
    for (int i = 0; i < 4; i++) {{ {split("x[i]", "qh[k][i]", "ql[k][i]")} }}
  }}
  for (int c0 = t0, b = 0; c0 < t1; c0 += {KS}, b = b + 1 < {NB} ? b + 1 : 0) {{
    CP_ASYNC_WAIT_PENDING({NB - 2});              // this thread's copies of stage b are in
    BARRIER();                                    // everyone's; the last stage's buffer, part_s and pbuf are free again
    LOAD_STAGE(c0 + {(NB - 1) * KS}, (b + {NB - 1}) % {NB})
    NEW_ROW(c0 + {(NB - 1) * KS}, (b + {NB - 1}) % {NB})
    // partial scores of this warp's dims (B fragment: key g of tile j, dims 8k + 2t, + 1: one word)
    {on}{{
      float sc[{NJ}][4];
      for (int j = 0; j < {NJ}; j++) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
      const uint* kr = sw + (b*{KS} + g)*{SK // 2} + DQW*w/2 + t;
      for (int k = 0; k < {NK}; k++) for (int j = 0; j < {NJ}; j++) {{
        uint u = kr[8*j*{SK // 2} + 4*k];
        float k0 = H2F_BITS(u), k1 = H2F_BITS(u >> 16);
        MMA_TF32(sc[j], qh[k], k0, k1); MMA_TF32(sc[j], ql[k], k0, k1);
      }}
      for (int j = 0; j < {NJ}; j++) ((float4*)(part_s + (w*{NJ} + j)*F))[lane] = FLOAT4(sc[j][0], sc[j][1], sc[j][2], sc[j][3]);
    }}
    BARRIER();
    // rows gr, gr + 8 at keys c0 + 8j + 2t, + 1 (j = g: the lane's tile): the warps' parts summed, the online softmax
    {on}for (int r = 0; r < {RG}; r++) {{
      int gr = w + r*{nw}, key = c0 + 8*g + 2*t;
      float4 a = ((const float4*)(part_s + g*F))[4*gr + t];
      for (int v = 1; v < {nw}; v++) {{ float4 x = ((const float4*)(part_s + (v*{NJ} + g)*F))[4*gr + t]; a.x += x.x; a.y += x.y; a.z += x.z; a.w += x.w; }}
      float s0 = key < t1 ? a.x : NEG, s1 = key + 1 < t1 ? a.y : NEG, s2 = key < t1 ? a.z : NEG, s3 = key + 1 < t1 ? a.w : NEG;
      float xa = FMAX(WARP_MAX(FMAX(s0, s1)), mr[r][0]), xb = FMAX(WARP_MAX(FMAX(s2, s3)), mr[r][1]);
      float aa = EXP2(mr[r][0] - xa), ab = EXP2(mr[r][1] - xb);
      mr[r][0] = xa; mr[r][1] = xb;
      // P's A fragment of tile g, lane 4 gr + t: rows gr / gr + 8 x keys 2t / 2t + 1 (k index t / t + 4)
      float pr[4] = {{EXP2(s0 - xa), EXP2(s2 - xb), EXP2(s1 - xa), EXP2(s3 - xb)}}, ph[4], pl[4];
      lr[r][0] = lr[r][0]*aa + pr[0] + pr[2]; lr[r][1] = lr[r][1]*ab + pr[1] + pr[3];
      for (int i = 0; i < 4; i++) {{ {split("pr[i]", "ph[i]", "pl[i]")} }}
      ((float4*)(pbuf + g*F))[4*gr + t] = FLOAT4(ph[0], ph[1], ph[2], ph[3]);
      ((float4*)(pbuf + ({NJ} + g)*F))[4*gr + t] = FLOAT4(pl[0], pl[1], pl[2], pl[3]);
      if (lane == 0) {{ alpha_s[gr] = aa; alpha_s[gr + 8] = ab; }}
    }}
    BARRIER();
    // out = out * alpha + P . V over this warp's columns DVW*w..: word 8q + g of key rows 2t, 2t + 1 of tile j holds
    // columns 16q + 2g (tile 2q's column g) and 16q + 2g + 1 (tile 2q + 1's)
    float fa = alpha_s[g], fb = alpha_s[g + 8];
    for (int m = 0; m < {2 * NP}; m++) {{ o[m][0] *= fa; o[m][1] *= fa; o[m][2] *= fb; o[m][3] *= fb; }}
    const uint* vr = sw + (b*{KS} + 2*t)*{SK // 2} + DVW*w/2 + g;
    {on}for (int j = 0; j < {NJ}; j++) {{
      float4 h4 = ((const float4*)(pbuf + j*F))[lane], l4 = ((const float4*)(pbuf + ({NJ} + j)*F))[lane];
      float ph[4] = {{h4.x, h4.y, h4.z, h4.w}}, pl[4] = {{l4.x, l4.y, l4.z, l4.w}};
      for (int q = 0; q < {NP}; q++) {{
        uint u0 = vr[8*j*{SK // 2} + 8*q], u1 = vr[(8*j + 1)*{SK // 2} + 8*q];
        float a0 = H2F_BITS(u0), a1 = H2F_BITS(u1), b0 = H2F_BITS(u0 >> 16), b1 = H2F_BITS(u1 >> 16);
        MMA_TF32(o[2*q], ph, a0, a1); MMA_TF32(o[2*q], pl, a0, a1);
        MMA_TF32(o[2*q + 1], ph, b0, b1); MMA_TF32(o[2*q + 1], pl, b0, b1);
      }}
    }}
  }}
  #undef LOAD_STAGE
  #undef NEW_ROW
  if (w >= NW) return;
  for (int r = 0; r < {RG}; r++) {{
    int gr = w + r*{nw};
    float la = WARP_SUM(lr[r][0]), lb = WARP_SUM(lr[r][1]);
    if (lane == 0 && h0 + gr < H) {{ ml[2*(sp*H + h0 + gr)] = mr[r][0]; ml[2*(sp*H + h0 + gr) + 1] = la; }}
    if (lane == 0 && h0 + gr + 8 < H) {{ ml[2*(sp*H + h0 + gr + 8)] = mr[r][1]; ml[2*(sp*H + h0 + gr + 8) + 1] = lb; }}
  }}
  // rows g, g + 8 at columns 16q + 4t..: tiles 2q, 2q + 1 at n 2t, 2t + 1
  for (int q = 0; q < {NP}; q++) {{
    int col = DVW*w + 16*q + 4*t;
    if (ha < H) ((GLOBAL float4*)(part + (sp*H + ha)*KV + col))[0] = FLOAT4(o[2*q][0], o[2*q + 1][0], o[2*q][1], o[2*q + 1][1]);
    if (hb < H) ((GLOBAL float4*)(part + (sp*H + hb)*KV + col))[0] = FLOAT4(o[2*q][2], o[2*q + 1][2], o[2*q][3], o[2*q + 1][3]);
  }}"""
  params = _attend_params(True)
  name = f"mla_attend_mma_h{H}_kv{KV}_r{R}" + (f"_o{kv_offset}" if kv_offset else "") + "_f16"
  return SourceKernel(name, params, body, (SPLITS, -(-H // 16), 1), (32, max(nw, warps), 1), _ROPE_LANE, smem=0 if smem else nbytes)

DECODE_T_KEYS = 64   # keys a stage of the transposed kernel: 4 m16 tiles of the scores, 8 k8 steps of the values

def decode_t_tiles(s: AttentionShape) -> int: return -(-s.n_head // 8)   # n8 tiles of heads (the padded heads' queries zero)

def _mma_t_shared(s: AttentionShape) -> list[tuple[str, str, int]]:
  """attend_mma_t_kernel's workgroup memory: DECODE_MMA_STAGES stages of DECODE_T_KEYS rows (fp16, padded), the warps'
  partial scores of a stage as C fragments, P's B fragments (hi, lo) and each head's rescale."""
  D, KS, NT = s.kv_lora + s.qk_rope, DECODE_T_KEYS, decode_t_tiles(s)
  return [("uint4", "stage", DECODE_MMA_STAGES * KS * (D + _stage_pad(True)) // 8),
          ("float4", "part_s", decode_mma_warps(s) * KS // 16 * NT * 32), ("float4", "pbuf", KS // 8 * NT * 32), ("float", "alpha_s", 8 * NT)]

def decode_t_serves(s: AttentionShape, device: str) -> bool:
  """attend_mma_t_kernel takes a decode token of `s` on `device`: the tensor cores, 17-24 heads (3 n8 tiles, where the
  depth kernel needs two m16 tiles; 16 heads are one m16 tile, as fast there), its workgroup memory within the device's."""
  return has_mma(device) and decode_mma_warps(s) > 0 and 16 < s.n_head <= 24 and _shared_bytes(_mma_t_shared(s)) <= max_smem(device)

def attend_mma_t_kernel(s: AttentionShape, scale: float, eps: float, kv_offset: int = 0, warps: int = 0, smem: str = "") -> SourceKernel:
  """attend_mma_kernel transposed: the keys are the mma's M (4 m16 tiles a stage) and the heads its N (n8 tiles: 20 heads
  take 3, where two m16 tiles of heads stream every key twice), so one workgroup a split serves every head from one copy of
  its rows. Scores^T = K . Q^T: warp w a slice of the dims, A = the stage's keys (dims 2t, 2t + 1 of a k-step one 32-bit
  word), B = the queries (tf32 hi + lo, registers). The softmax: warp nt < NT owns n-tile nt (its lanes' heads 2t, 2t + 1
  over keys g, g + 8 of each m-tile), the warps' parts summed, the head's max over the lanes of one t. Out^T = V^T . P^T:
  warp w a slice of the columns (rows g, g + 8 of an m16 tile are columns 2g, 2g + 1: one word of a key row), B = P (hi + lo)
  through workgroup memory as B fragments. The same parameters, split of the keys and partials as attend_mma_kernel."""
  _check_shape(s, True)
  nw, NT = decode_mma_warps(s), decode_t_tiles(s)
  assert nw and 0 < NT <= 3 and warps in (0, *range(nw, 33)), (s, warps)
  on = "if (w < NW) " if warps > nw else ""
  KV, R, H = s.kv_lora, s.qk_rope, s.n_head
  D, KS, NB = KV + R, DECODE_T_KEYS, DECODE_MMA_STAGES
  SK, NKT, MC, NM, NJ, NTW = D + _stage_pad(True), D // 16, KV // nw // 16, KS // 16, KS // 16, -(-NT // nw)
  NKW = -(-NKT // nw)                             # k16 steps of the dims a warp takes at most (w, w + NW, ...)
  assert D % 16 == 0, s
  QS, NL, NRQ, NRC = D + 8, -(-8 * NT * KV // 4 // (32 * nw)), -(-8 * NT * R // (32 * nw)), -(-D // 8 // 32)
  assert 8 * NT * QS <= 4 * (nw * NM * NT * 32 + KS // 8 * NT * 32), "the queries fit in part_s and pbuf"
  hilo = lambda h, l, a, b: f"{h} = PACK_H2({a}, {b}); {l} = PACK_H2({a} - H2F_BITS({h}), {b} - H2F_BITS({h} >> 16));"
  nbytes = _shared_bytes(_mma_t_shared(s))
  body = f"""{_common(s)}
  const int D = {D}, R = {R}, NOPE = {s.qk_nope}, HALF = {R // 2}, DQW = {D // nw}, DVW = {KV // nw}, QS = {QS}, NW = {nw}, NT = {NT};
  const float SCALE2 = {_f32(scale * math.log2(math.e))}, EPS = {_f32(eps)};
  int lane = LID_X, w = LID_Y, g = lane >> 2, t = lane & 3, tid = w*32 + lane, sp = GID_X;
{_SPLIT_KEYS}
  {"" if smem else "DYN_SHARED(uint4, smem_);"}
  {_shared(_mma_t_shared(s), smem or "smem_")}
  const uint* sw = (const uint*)stage;
  // the stages as attend_mma_kernel's: cached rows by cp.async, rows past t1 zeros, the new row from warp 0's registers
{_stage_macros(KS, D, SK, NRC, nw, on)}
  for (int s_ = 0; s_ < {NB - 1}; s_++) {{ LOAD_STAGE(t0 + s_*{KS}, s_) }}
  // the {8 * NT} (padded) heads' queries, roped and scaled to base 2, into workgroup memory rows QS floats apart (over part_s
  // and pbuf, free until the stages' loop), every load issued before any is used
  float* qs = (float*)part_s;
  {on}{{
    float4 lat[{NL}];
    float x0[{NRQ}], x1[{NRQ}], ca[{NRQ}], sa[{NRQ}];
    for (int i = 0; i < {NL}; i++) {{
      int e = tid + i*{32 * nw}; e = e < {8 * NT * KV // 4} ? e : {8 * NT * KV // 4 - 1};
      int h = e / {KV // 4}; h = h < H ? h : H - 1;
      lat[i] = ((const GLOBAL float4*)(q_lat + h*KV))[e % {KV // 4}];
    }}
    for (int i = 0; i < {NRQ}; i++) {{
      int e = tid + i*{32 * nw}; e = e < {8 * NT * R} ? e : {8 * NT * R - 1};
      int h = e / R, j = e % R, k = j < HALF ? j : j - HALF; h = h < H ? h : H - 1;
      const GLOBAL float* x = q_raw + h*(NOPE + R) + NOPE;
      x0[i] = x[2*k]; x1[i] = x[2*k + 1]; ca[i] = cs[k]; sa[i] = sn[k];
    }}
{_new_row(kv_offset, D, NRC, NB, KS)}
    for (int i = 0; i < {NL}; i++) {{
      int e = tid + i*{32 * nw}, r = e / {KV // 4};
      float f = r < H ? SCALE2 : 0.0f;
      if (e < {8 * NT * KV // 4}) ((float4*)(qs + r*QS))[e % {KV // 4}] = FLOAT4(lat[i].x * f, lat[i].y * f, lat[i].z * f, lat[i].w * f);
    }}
    for (int i = 0; i < {NRQ}; i++) {{
      int e = tid + i*{32 * nw}, r = e / R, j = e % R;
      float f = r < H ? SCALE2 : 0.0f;
      if (e < {8 * NT * R}) qs[r*QS + KV + j] = (j < HALF ? x0[i] * ca[i] - x1[i] * sa[i] : x1[i] * ca[i] + x0[i] * sa[i]) * f;
    }}
  }}
  float o[{MC}][{NT}][4], mr[{NTW}][2], lr[{NTW}][2];   // this warp's columns' output; its n-tiles' heads' max and sum
  for (int m = 0; m < {MC}; m++) for (int nt = 0; nt < {NT}; nt++) o[m][nt][0] = o[m][nt][1] = o[m][nt][2] = o[m][nt][3] = 0.0f;
  for (int j = 0; j < {NTW}; j++) mr[j][0] = mr[j][1] = NEG, lr[j][0] = lr[j][1] = 0.0f;
  BARRIER();                                      // the queries are in qs
  // this warp's k16 steps w + NW i of the dims, the queries as fp16 B fragments (hi + lo: x = hi + lo to 22 bits, the keys
  // exact in fp16): head 8nt + g, b0 dims 16k + 2t, + 1 and b1 those + 8
  uint4 qb[{NKW}][{NT}];                          // hi b0, hi b1, lo b0, lo b1
  {on}for (int i = 0; i < {NKW}; i++) for (int nt = 0; nt < {NT}; nt++) {{
    int k = w + i*NW; k = k < {NKT} ? k : {NKT - 1};
    float2 a = ((const float2*)(qs + (8*nt + g)*QS + 16*k))[t], c = ((const float2*)(qs + (8*nt + g)*QS + 16*k + 8))[t];
    {hilo("qb[i][nt].x", "qb[i][nt].z", "a.x", "a.y")} {hilo("qb[i][nt].y", "qb[i][nt].w", "c.x", "c.y")}
  }}
  for (int c0 = t0, b = 0; c0 < t1; c0 += {KS}, b = b + 1 < {NB} ? b + 1 : 0) {{
    CP_ASYNC_WAIT_PENDING({NB - 2});              // this thread's copies of stage b are in
    BARRIER();                                    // everyone's; the last stage's buffer, part_s and pbuf are free again
    LOAD_STAGE(c0 + {(NB - 1) * KS}, (b + {NB - 1}) % {NB})
    NEW_ROW(c0 + {(NB - 1) * KS}, (b + {NB - 1}) % {NB})
    // partial scores^T of this warp's dims: A = keys 16m + g, + 8 (words of dims 16k + 2t, + 1 and + 8), B = the queries
    {on}{{
      float sc[{NM}][{NT}][4];
      for (int m = 0; m < {NM}; m++) for (int nt = 0; nt < {NT}; nt++) sc[m][nt][0] = sc[m][nt][1] = sc[m][nt][2] = sc[m][nt][3] = 0.0f;
      const uint* kr = sw + (b*{KS} + g)*{SK // 2} + t;
      for (int i = 0; i < {NKW}; i++) if (w + i*NW < {NKT}) for (int m = 0; m < {NM}; m++) {{
        int k = w + i*NW;
        uint a[4] = {{kr[16*m*{SK // 2} + 8*k], kr[(16*m + 8)*{SK // 2} + 8*k], kr[16*m*{SK // 2} + 8*k + 4], kr[(16*m + 8)*{SK // 2} + 8*k + 4]}};
        for (int nt = 0; nt < {NT}; nt++) {{ MMA_F16(sc[m][nt], a, qb[i][nt].x, qb[i][nt].y); MMA_F16(sc[m][nt], a, qb[i][nt].z, qb[i][nt].w); }}
      }}
      for (int m = 0; m < {NM}; m++) for (int nt = 0; nt < {NT}; nt++)
        part_s[((w*{NM} + m)*{NT} + nt)*32 + lane] = FLOAT4(sc[m][nt][0], sc[m][nt][1], sc[m][nt][2], sc[m][nt][3]);
    }}
    BARRIER();
    // warp w: n-tiles nt = w, w + NW, ..., the parts summed; lane (g, t): heads 8nt + 2t, + 1 at keys c0 + 16m + g, + 8 (x,
    // y: key g; z, w: key g + 8); the online softmax per head over the lanes of one t; P x 2^14 (its lo part clear of fp16's
    // subnormals) as fp16 B fragments (hi, lo) of k16 step m: head 2t + e, key g (+ 8) at lane 4 (2t + e) + g / 2, b0 (b1),
    // half g % 2
    {on}for (int j = 0; j < {NTW}; j++) if (w + j*NW < NT) {{
      int nt = w + j*NW;
      float4 a[{NM}];
      for (int m = 0; m < {NM}; m++) {{
        a[m] = part_s[(m*{NT} + nt)*32 + lane];
        for (int v = 1; v < NW; v++) {{ float4 x = part_s[((v*{NM} + m)*{NT} + nt)*32 + lane]; a[m].x += x.x; a[m].y += x.y; a[m].z += x.z; a[m].w += x.w; }}
        int key = c0 + 16*m + g;
        if (key >= t1) a[m].x = a[m].y = NEG;
        if (key + 8 >= t1) a[m].z = a[m].w = NEG;
      }}
      float x0 = mr[j][0], x1 = mr[j][1];
      for (int m = 0; m < {NM}; m++) {{ x0 = FMAX(x0, FMAX(a[m].x, a[m].z)); x1 = FMAX(x1, FMAX(a[m].y, a[m].w)); }}
      for (int o_ = 4; o_ < 32; o_ <<= 1) {{ x0 = FMAX(x0, SHFL_XOR(x0, o_)); x1 = FMAX(x1, SHFL_XOR(x1, o_)); }}
      float al0 = EXP2(mr[j][0] - x0), al1 = EXP2(mr[j][1] - x1);
      mr[j][0] = x0; mr[j][1] = x1; lr[j][0] *= al0; lr[j][1] *= al1;
      unsigned short* pf = (unsigned short*)pbuf;
      for (int m = 0; m < {NM}; m++) {{
        float pr[4] = {{EXP2(a[m].x - x0), EXP2(a[m].y - x1), EXP2(a[m].z - x0), EXP2(a[m].w - x1)}};
        lr[j][0] += pr[0] + pr[2]; lr[j][1] += pr[1] + pr[3];
        for (int i = 0; i < 4; i++) {{
          float x = pr[i] * 16384.0f;
          unsigned ph = PACK_H2(x, 0.0f) & 0xffffu, pl = PACK_H2(x - H2F_BITS(ph), 0.0f) & 0xffffu;
          int e = ((m*{NT} + nt)*32 + 4*(2*t + (i & 1)) + (g >> 1))*8 + 2*(i >> 1) + (g & 1);
          pf[e] = (unsigned short)ph; pf[e + 4] = (unsigned short)pl;
        }}
      }}
      if (g == 0) {{ alpha_s[8*nt + 2*t] = al0; alpha_s[8*nt + 2*t + 1] = al1; }}
    }}
    BARRIER();
    // out^T = out^T * alpha + V^T . P^T over this warp's columns DVW*w..: m-tile m's rows are columns 16m.., its A fragment
    // of k16 step kk (keys 16kk..) by ldmatrix .trans from the key rows: lane 8j + i posts key 16kk + i + 8 (j >> 1) at
    // column 16m + 8 (j & 1)
    {on}{{
      for (int nt = 0; nt < {NT}; nt++) {{
        float f0 = alpha_s[8*nt + 2*t], f1 = alpha_s[8*nt + 2*t + 1];
        for (int m = 0; m < {MC}; m++) {{ o[m][nt][0] *= f0; o[m][nt][1] *= f1; o[m][nt][2] *= f0; o[m][nt][3] *= f1; }}
      }}
      const unsigned short* vr = (const unsigned short*)stage + (b*{KS} + (lane & 7) + 8*(lane >> 4))*{SK} + DVW*w + 8*((lane >> 3) & 1);
      for (int kk = 0; kk < {NJ}; kk++) {{
        uint4 pb[{NT}];
        for (int nt = 0; nt < {NT}; nt++) pb[nt] = ((const uint4*)pbuf)[(kk*{NT} + nt)*32 + lane];
        for (int m = 0; m < {MC}; m++) {{
          uint a[4];
          LDSM_X4_T(a, vr + 16*kk*{SK} + 16*m);
          for (int nt = 0; nt < {NT}; nt++) {{ MMA_F16(o[m][nt], a, pb[nt].x, pb[nt].y); MMA_F16(o[m][nt], a, pb[nt].z, pb[nt].w); }}
        }}
      }}
    }}
  }}
  #undef LOAD_STAGE
  #undef NEW_ROW
  if (w >= NW) return;
  for (int j = 0; j < {NTW}; j++) if (w + j*NW < NT) {{
    float l0 = lr[j][0], l1 = lr[j][1];
    for (int o_ = 4; o_ < 32; o_ <<= 1) {{ l0 += SHFL_XOR(l0, o_); l1 += SHFL_XOR(l1, o_); }}
    int h = 8*(w + j*NW) + 2*t;
    if (g == 0 && h < H) {{ ml[2*(sp*H + h)] = mr[j][0]; ml[2*(sp*H + h) + 1] = l0; }}
    if (g == 0 && h + 1 < H) {{ ml[2*(sp*H + h + 1)] = mr[j][1]; ml[2*(sp*H + h + 1) + 1] = l1; }}
  }}
  // heads 8nt + 2t, + 1 at columns DVW*w + 16m + g, + 8 (P's 2^14 taken out)
  const float PS = 1.0f / 16384.0f;
  for (int nt = 0; nt < {NT}; nt++) for (int m = 0; m < {MC}; m++) {{
    int h = 8*nt + 2*t, col = DVW*w + 16*m + g;
    if (h < H) {{ part[(sp*H + h)*KV + col] = o[m][nt][0] * PS; part[(sp*H + h)*KV + col + 8] = o[m][nt][2] * PS; }}
    if (h + 1 < H) {{ part[(sp*H + h + 1)*KV + col] = o[m][nt][1] * PS; part[(sp*H + h + 1)*KV + col + 8] = o[m][nt][3] * PS; }}
  }}"""
  params = _attend_params(True)
  name = f"mla_attend_mmat_h{H}_kv{KV}_r{R}" + (f"_o{kv_offset}" if kv_offset else "") + "_f16"
  return SourceKernel(name, params, body, (SPLITS, 1, 1), (32, max(nw, warps), 1), _ROPE_LANE, smem=0 if smem else nbytes)

DECODE_MMA_FROM = (2048, 6144)   # keys from which a decode token attends on the tensor cores (attend_depth_kernel): one tile
                                 # of 16 heads, two tiles of 25-32 (the model's decode at 4,096 keys, H200: 16 heads +6-8%
                                 # from 2,048 against 6,144; GLM-4.7-Flash's 20 heads as two tiles -5%: they take
                                 # attend_mma_t_kernel now)

def decode_mma_from(s: AttentionShape) -> int: return DECODE_MMA_FROM[0] if s.n_head <= 16 else DECODE_MMA_FROM[1]

def attend_depth_kernel(s: AttentionShape, scale: float, eps: float, kv_offset: int = 0, keys: int | None = None) -> SourceKernel:
  """One sequence's token over an fp16 cache: attend_mma_kernel from `keys` keys on (decode_mma_from), attend_kernel below,
  in one launch (the same parameters and partials): the decode step is captured once, so the token's position picks at run
  time. The tensor-core kernel costs more a launch and much less a key (H200, us a block with the combine, kernels alone, 20
  heads, two tiles, tensor cores / CUDA cores: 2,047 keys 22.7 / 16.2, 4,095 23.2 / 20.8, 32,767 54.3 / 101; one tile of 16
  heads crosses over lower: the model's decode at 4,096 keys is 6-8% faster on the tensor cores, GLM-4.7-Flash's 5% slower).
  The launch is the CUDA-core kernel's: 20 heads (GLM-4.7-Flash's shape, which the model gives attend_mma_t_kernel) take two tiles of 8 warps on the tensor cores and one workgroup of 10 warps a split on
  the CUDA cores (its second tile's workgroups leave at once, the tensor cores' last two warps only pass the barriers). One
  dynamic workgroup buffer holds either body's arrays."""
  keys = decode_mma_from(s) if keys is None else keys
  assert decode_mma_serves_shape(s), s
  cc = attend_kernel(s, scale, eps, kv_offset, half=True, smem="smem_")
  mma = attend_mma_kernel(s, scale, eps, kv_offset, warps=cc.local_size[1], smem="smem_")
  assert mma.global_size[0] == cc.global_size[0] and mma.local_size[1] >= cc.local_size[1], (mma, cc)
  size = max(_shared_bytes(_mma_decode_shared(s)), _shared_bytes(_attend_shared(s)))
  body = f"""  GRID_WAIT();
  DYN_SHARED(uint4, smem_);                       // attend_mma_kernel's stages or attend_kernel's
  if (pos[0] + 1 >= {keys}) {{
{mma.body}
  }} else {{
  if (GID_Y > 0) return;                          // the CUDA cores: one workgroup a split
{cc.body}
  }}"""
  return SourceKernel(f"mla_attend_h{s.n_head}_kv{s.kv_lora}_r{s.qk_rope}" + (f"_o{kv_offset}" if kv_offset else "") + f"_f16_mma{keys}",
                      mma.params, body, mma.global_size, mma.local_size, _ROPE_LANE, smem=-(-size // 16) * 16)

def combine_kernel(s: AttentionShape, tokens: int = 0, max_context: int = 0, rows: int = 1) -> SourceKernel:
  """The partials of each decode row's splits (grid z: `rows` sequences' new tokens) into out (rows, H, kv_lora), or with
  `tokens`, of each prefill token's into (tokens, H, kv_lora). Warp w takes splits w, w + CW, ... Two forms, chosen by the
  position at run time: splits of MIN_CHUNK keys (a short context) take the largest max over the (max, sum) pairs first,
  then sum one split after another (at 512-576 keys GLM-4.7-Flash's decode +1.5% in the model, H200); longer splits load
  every (max, sum) and partial of the warp's splits before using any (a constant count at clamped addresses, the splits
  past those that hold tokens masked), so the kernel waits on memory once, not once a split (at 4,096 keys that form is
  1.7% faster in the model)."""
  _check_shape(s)
  cw, S = COMBINE_WARPS, prefill_splits(tokens) if tokens else SPLITS
  nsw = -(-S // cw)
  guard_v = "" if (s.kv_lora // 4) % 32 == 0 else "if (v < KV4) "
  body = f"""{_common(s, "GID_Z" if tokens else None, max_context, S, row="GID_Z")}
  const int CW = {cw}, KV4 = {s.kv_lora // 4};
  int h = GID_X, lane = LID_X, w = LID_Y, v = GID_Y*32 + lane, vc = v < KV4 ? v : KV4 - 1, b0 = GID_Z*S*H;
  int ns = (n + chunk - 1) / chunk;              // the splits that hold tokens: exactly those the attend kernel wrote
  SHARED float red_m[CW], red_l[CW], red_a[CW][128];
  float mx = NEG, L = 0.0f, a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  if (chunk == MINC) {{
    // the largest partial max: a split or a few a thread, then the warp's and the workgroup's
    for (int sp = w*32 + lane; sp < ns; sp += 32*CW) {{ float ms = ml[2*(b0 + sp*H + h)]; mx = ms > mx ? ms : mx; }}
    mx = WARP_MAX(mx);
    if (lane == 0) red_m[w] = mx;
    BARRIER();
    mx = red_m[0];
    for (int k = 1; k < CW; k++) mx = red_m[k] > mx ? red_m[k] : mx;
    // the warp's splits rescaled to the common max and summed, eight loads in flight
    #pragma unroll 8
    for (int sp = w; sp < ns; sp += CW) {{
      int b = b0 + sp*H + h;
      float f = EXP2(ml[2*b] - mx);
      L += f * ml[2*b + 1];
      float4 x = ((const GLOBAL float4*)(part + b*KV))[vc];
      a0 += f * x.x; a1 += f * x.y; a2 += f * x.z; a3 += f * x.w;
    }}
  }} else {{
    float mm[{nsw}], ll[{nsw}];
    float4 x[{nsw}];
    for (int i = 0; i < {nsw}; i++) {{
      int sp = w + i*CW, b = b0 + (sp < ns ? sp : 0)*H + h;
      mm[i] = ml[2*b]; ll[i] = ml[2*b + 1]; x[i] = ((const GLOBAL float4*)(part + b*KV))[vc];
    }}
    // the largest partial max: the warp's (its lanes hold the same splits), then the workgroup's
    for (int i = 0; i < {nsw}; i++) mx = w + i*CW < ns && mm[i] > mx ? mm[i] : mx;
    if (lane == 0) red_m[w] = mx;
    BARRIER();
    mx = red_m[0];
    for (int k = 1; k < CW; k++) mx = red_m[k] > mx ? red_m[k] : mx;
    // the warp's splits rescaled to the common max and summed
    for (int i = 0; i < {nsw}; i++) {{
      float f = w + i*CW < ns ? EXP2(mm[i] - mx) : 0.0f;
      L += f * ll[i]; a0 += f * x[i].x; a1 += f * x[i].y; a2 += f * x[i].z; a3 += f * x[i].w;
    }}
  }}
  red_a[w][4*lane] = a0; red_a[w][4*lane+1] = a1; red_a[w][4*lane+2] = a2; red_a[w][4*lane+3] = a3;
  if (lane == 0) red_l[w] = L;
  BARRIER();
  if (w == 0) {{
    for (int k = 1; k < CW; k++) {{
      a0 += red_a[k][4*lane]; a1 += red_a[k][4*lane+1]; a2 += red_a[k][4*lane+2]; a3 += red_a[k][4*lane+3]; L += red_l[k];
    }}
    {guard_v}((GLOBAL float4*)(out + (GID_Z*H + h)*KV))[v] = FLOAT4(a0 / L, a1 / L, a2 / L, a3 / L);
  }}"""
  params = (Param("out", dtypes.float32, True), Param("part", dtypes.float32), Param("ml", dtypes.float32), Param("pos", dtypes.int32))
  name = f"mla_prefill_combine_{tokens}" if tokens else "mla_combine" + (f"_b{rows}" if rows > 1 else "")
  return SourceKernel(f"{name}_h{s.n_head}_kv{s.kv_lora}", params, body, (s.n_head, -(-s.kv_lora // 128), tokens or rows), (32, cw, 1),
                      trigger=not tokens)

CHUNK_WARPS = 4   # chunk_rows_kernel: warps a token (warp 0 its latent row too, then every warp a quarter of the heads)

def chunk_rows_kernel(s: AttentionShape, eps: float, tokens: int, max_context: int, kv_offset: int, q_stride: int, kv_stride: int,
                      first: int = 0, half: bool = False) -> SourceKernel:
  """A prefill chunk's new latent rows and roped queries, a workgroup a token (grid x: up to `tokens`; pos an int32 [start,
  first cache row, length] buffer). Token t at position pos[0] + t, its q_raw and kv_raw row `first` + t (rows of q_stride
  and kv_stride elements, its kv row at kv_offset: the projections' outputs read in place), writes its cache row
  [rms_norm(kv[:kv_lora]) * kv_norm_w, rope(kv[kv_lora:])] (decode's new row: warp 0) and rope(q_raw[h, qk_nope:]) of every
  head into q_pe (t, n_head, qk_rope) fp32; a token past the length writes zero queries and no row. The generated path
  makes the same in ~8 kernels (the norm's sum, the two ropes, their join and the cast, the store); the attend kernels
  read both."""
  _check_shape(s, half)
  to_cache = (lambda x: f"F2H({x})") if half else (lambda x: x)
  guard_v = "" if (s.kv_lora // 4) % 32 == 0 else "if (v < KV4) "
  store_c = "((GLOBAL float4*)(row))[v] = FLOAT4(r[4*i], r[4*i+1], r[4*i+2], r[4*i+3]);" if not half else \
            " ".join(f"row[4*v + {k}] = F2H(r[4*i+{k}]);" for k in range(4))
  body = f"""  GRID_WAIT();                            // q_raw, kv_raw and pos come from the kernels before
  const int H = {s.n_head}, KV = {s.kv_lora}, R = {s.qk_rope}, NR = {-(-s.qk_rope // 32)}, HALF = {s.qk_rope // 2}, NOPE = {s.qk_nope};
  const int ROW = KV + R, KV4 = {s.kv_lora // 4}, NV4 = {-(-s.kv_lora // 128)}, W = {CHUNK_WARPS};
  const float EPS = {_f32(eps)};
  int t = GID_X, lane = LID_X, w = LID_Y, p = pos[0] + t;
  if (t >= pos[2] || p >= {max_context}) {{       // a bound's padding (or a position past the rope tables): zero queries
    for (int h = w; h < H; h += W)
      for (int k = 0; k < NR; k++) {{ int j = lane + 32*k; if (j < R) q_pe[(t*H + h)*R + j] = 0.0f; }}
    return;
  }}
  const GLOBAL float* cs = rope_cos + p*HALF;
  const GLOBAL float* sn = rope_sin + p*HALF;
  const GLOBAL float* qt = q_raw + (long)({first} + t)*{q_stride};
  for (int h = w; h < H; h += W)
    for (int k = 0; k < NR; k++) {{
      int j = lane + 32*k;
      if (j < R) q_pe[(t*H + h)*R + j] = rope_lane(qt + h*(NOPE + R) + NOPE, cs, sn, j, HALF);
    }}
  if (w != 0) return;
  const GLOBAL float* kv = kv_raw + (long)({first} + t)*{kv_stride} + {kv_offset};
  float r[4*NV4];
  {_load4("r", "((const GLOBAL float4*)kv)[v]", s)}
  float ss = 0.0f;
  for (int i = 0; i < 4*NV4; i++) ss += r[i] * r[i];
  float rs = 1.0f / sqrt(WARP_SUM(ss) / (float)KV + EPS);
  GLOBAL {"half" if half else "float"}* row = cache + ((long)pos[1] + p)*ROW;
  for (int i = 0; i < NV4; i++) {{
    int v = lane + 32*i;
    {guard_v}{{
      float4 nw = ((const GLOBAL float4*)kv_norm_w)[v];
      r[4*i] = r[4*i] * rs * nw.x; r[4*i+1] = r[4*i+1] * rs * nw.y;
      r[4*i+2] = r[4*i+2] * rs * nw.z; r[4*i+3] = r[4*i+3] * rs * nw.w;
      {store_c}
    }}
  }}
  for (int k = 0; k < NR; k++) {{
    int j = lane + 32*k;
    if (j < R) row[KV + j] = {to_cache("rope_lane(kv + KV, cs, sn, j, HALF)")};
  }}"""
  params = (Param("q_pe", dtypes.float32, True), Param("cache", _cache_dtype(half), True), Param("q_raw", dtypes.float32),
            Param("kv_raw", dtypes.float32), Param("kv_norm_w", dtypes.float32, weight=True), Param("rope_cos", dtypes.float32, weight=True),
            Param("rope_sin", dtypes.float32, weight=True), Param("pos", dtypes.int32))
  name = f"mla_chunk_rows_{tokens}_h{s.n_head}_kv{s.kv_lora}_r{s.qk_rope}_q{q_stride}_k{kv_stride}" + (f"_o{kv_offset}" if kv_offset else "") + \
         (f"_f{first}" if first else "") + ("_f16" if half else "")
  return SourceKernel(name, params, body, (tokens, 1, 1), (32, CHUNK_WARPS, 1), _ROPE_LANE, trigger=False)

@cached
def kernels(s: AttentionShape, scale: float, eps: float, device: str, kv_offset: int = 0, trigger: bool = True, half: bool = False,
            rows: int = 1, q_stride: int = 0, kv_stride: int = 0):
  """The custom_kernel bodies (attend, combine) for shape `s` on `device` (a CUDA or Metal device); trigger=False: without
  GRID_TRIGGER() (Fusions.trigger off); half: an fp16 cache; rows, q_stride, kv_stride: attend_kernel's. One sequence's
  token over an fp16 cache takes attend_mma_t_kernel where decode_t_serves (H200, GLM-4.7-Flash's decode at 4k / 16k / 32k
  +2% / +16% / +24% against the depth kernel), else attend_depth_kernel where decode_mma_serves (the tensor cores from
  decode_mma_from keys)."""
  one = half and rows == 1
  if one and decode_t_serves(s, device): attend = attend_mma_t_kernel(s, scale, eps, kv_offset)
  elif one and decode_mma_serves(s, device): attend = attend_depth_kernel(s, scale, eps, kv_offset)
  else: attend = attend_kernel(s, scale, eps, kv_offset, half, rows, q_stride, kv_stride)
  return program(attend, device, trigger), program(combine_kernel(s, rows=rows), device, trigger)

@cached
def prefill_kernels(s: AttentionShape, scale: float, tokens: int, max_context: int, device: str, half: bool = False, first: int = 0):
  """The custom_kernel bodies (attend, combine) of a prefill chunk of `tokens` on `device` (combine None: one split); first:
  prefill_attend_kernel's."""
  if has_mma(device) and mma_warps(s, half) and tokens >= PREFILL_MMA_FROM:
    return program(prefill_mma_kernel(s, scale, tokens, max_context, half, first=first), device), None
  combine = program(combine_kernel(s, tokens, max_context), device) if prefill_splits(tokens) > 1 else None
  return program(prefill_attend_kernel(s, scale, tokens, max_context, half, first), device), combine

CACHE_DTYPES = (dtypes.float32, dtypes.float16)   # the latent caches the kernels read

def _half_cache(cache: Tensor, who: str) -> bool:
  """Whether `cache` is fp16 (the kernels' other form); a cache of any other dtype is an error."""
  if cache.dtype not in CACHE_DTYPES: raise ValueError(f"{who}: cache is {cache.dtype}, expected one of {CACHE_DTYPES}")
  return cache.dtype == dtypes.float16

def available(device: str) -> bool: return language_of(device) is not None

def decodes(device: str, cache: Tensor, n_head: int, kv_lora: int, qk_rope: int) -> bool:
  """mla_decode_attention serves this device, one sequence's token or a batched step's rows: the GPU kernels, or the CPU's
  (apps/kernels/cpu.py: an fp32 cache)."""
  if available(device): return True
  from apps.kernels import cpu
  return device.split(":")[0] == "CPU" and cpu.attention_supports(n_head, kv_lora, qk_rope, cache)

def prefills(device: str, cache: Tensor, n_head: int, kv_lora: int, qk_rope: int) -> bool:
  """mla_prefill_attention serves this device: the GPU kernels, or the CPU's (apps/kernels/cpu.py: an fp32 cache)."""
  return decodes(device, cache, n_head, kv_lora, qk_rope)

def _expect(t: Tensor, shape: tuple[int, ...], name: str, dtype=dtypes.float32) -> Tensor:
  if t.dtype != dtype: raise ValueError(f"mla_decode_attention: {name} is {t.dtype}, expected {dtype}")
  if t.shape != shape:
    if math.prod(t.shape) != math.prod(shape): raise ValueError(f"mla_decode_attention: {name} has shape {t.shape}, expected {shape}")
    t = t.reshape(shape)
  return t

def _rows(t: Tensor, B: int, least: int, name: str, exact: bool = False) -> Tensor:
  """t as (R, L) rows: given as such (R >= B, the rows past B another part's), flat (B = 1), or of exactly B x least
  elements; L >= least (== if exact)."""
  shape = t.shape
  if t.ndim == 1 and B == 1: t = t.reshape(1, -1)
  elif not (t.ndim == 2 and t.shape[0] == B > 1) and t.numel() == B * least: t = t.reshape(B, least)
  if t.dtype != dtypes.float32: raise ValueError(f"mla_decode_attention: {name} is {t.dtype}, expected {dtypes.float32}")
  if t.ndim != 2 or t.shape[0] < B or not isinstance(t.shape[1], int) or t.shape[1] < least or \
     (exact and t.shape[1] != least):
    raise ValueError(f"mla_decode_attention: {name} has shape {shape}, expected ({B}, {least}){'' if exact else ' or longer rows'}")
  return t

def mla_decode_attention(q_lat: Tensor, q_raw: Tensor, kv_raw: Tensor, kv_norm_w: Tensor, cache: Tensor, rope_cos: Tensor,
                         rope_sin: Tensor, pos: Tensor, *, n_head: int, kv_lora: int, qk_nope: int, qk_rope: int, scale: float,
                         eps: float, kv_offset: int = 0, fusions: Fusions = Fusions()) -> Tensor:
  """Attention output (B, n_head, kv_lora) fp32 of the new tokens of B sequences, row b's at position pos[b, 0] of the
  sequence whose cache rows start at cache row pos[b, 1] (pos an int32 (B, 2) buffer, or one sequence's [position, first
  row, 1] as Transformer.rope_args makes it), and their latent rows written into
  the cache (in place, by the same kernel: realize the output). See the module docstring for the math. The cache is fp32
  or fp16 (CACHE_DTYPES), its rows the sequences' (max_context rows each, one after the other) and rope_cos / rope_sin
  cover max_context positions.
  q_lat: (B, n_head, kv_lora). q_raw: (B, L) rows of L >= n_head * (qk_nope + qk_rope) whose first elements are the heads
  (a stacked [q; kv_a] output: read in place). kv_raw: (B, L') rows whose new-token kv row is [kv_offset : kv_offset +
  kv_lora + qk_rope] (kv_offset a multiple of 4). B = 1 may drop the leading dims; all three may have more rows (a mixed
  step's, a prompt's chunk after the rows; their count symbolic: the kernel reads the first B of its bound).
  fusions: the model's (trigger)."""
  s = AttentionShape(n_head, kv_lora, qk_nope, qk_rope)
  half = _half_cache(cache, "mla_decode_attention")
  _check_shape(s, half)
  dev = q_lat.device
  pos = _expect(pos, (1, 3) if pos.shape == (3,) else (pos.numel() // 2, 2), "pos", dtypes.int32)   # (3,): a chunk's table
  B = pos.shape[0]
  if q_lat.ndim == 3 and not isinstance(q_lat.shape[0], int): (q_lat, q_raw, kv_raw), _, _ = to_bound(q_lat, q_raw, kv_raw, slices=fusions.slices)
  q_lat = _expect(q_lat, (q_lat.shape[0] if q_lat.ndim == 3 and q_lat.shape[0] > B else B, n_head, kv_lora), "q_lat")
  if kv_offset < 0 or kv_offset % 4: raise ValueError(f"mla_decode_attention: kv_offset {kv_offset} is not a non-negative multiple of 4")
  q_raw = _rows(q_raw, B, n_head * (qk_nope + qk_rope), "q_raw")
  kv_raw = _rows(kv_raw, B, kv_offset + kv_lora + qk_rope, "kv_raw", exact=B == 1)
  kv_norm_w = _expect(kv_norm_w, (kv_lora,), "kv_norm_w")
  max_context = rope_cos.shape[0]
  if cache.ndim != 2 or cache.shape[1] != kv_lora + qk_rope or cache.shape[0] % max_context:
    raise ValueError(f"mla_decode_attention: cache has shape {cache.shape}, expected (sequences x {max_context}, {kv_lora + qk_rope})")
  rope_cos, rope_sin = _expect(rope_cos, (max_context, qk_rope // 2), "rope_cos"), _expect(rope_sin, (max_context, qk_rope // 2), "rope_sin")
  for name, t in (("q_raw", q_raw), ("kv_raw", kv_raw), ("kv_norm_w", kv_norm_w), ("cache", cache), ("rope_cos", rope_cos),
                  ("rope_sin", rope_sin), ("pos", pos)):
    if t.device != dev: raise ValueError(f"mla_decode_attention: {name} is on {t.device}, q_lat on {dev}")
  if not available(dev):
    if not decodes(dev, cache, n_head, kv_lora, qk_rope):
      raise ValueError(f"mla_decode_attention: device {dev} compiles no hand-written kernels (use the reference)")
    from apps.kernels import cpu
    return cpu.mla_decode_attention(q_lat, q_raw, kv_raw, kv_norm_w, cache, rope_cos, rope_sin, pos, n_head=n_head, kv_lora=kv_lora,
                                    qk_nope=qk_nope, qk_rope=qk_rope, scale=scale, eps=eps, kv_offset=kv_offset)
  attend, combine = kernels(s, float(scale), float(eps), dev, kv_offset, fusions.trigger, half, B, *((q_raw.shape[1], kv_raw.shape[1]) if B > 1 else (0, 0)))
  part, ml, *_ = Tensor.empty(B, SPLITS, n_head, kv_lora, device=dev).custom_kernel(
    Tensor.empty(B, SPLITS, n_head, 2, device=dev), cache, q_lat, q_raw, kv_raw, kv_norm_w, rope_cos, rope_sin, pos, fxn=attend)
  return Tensor.empty(B, n_head, kv_lora, device=dev).custom_kernel(part, ml, pos, fxn=combine)[0]

def mla_prefill_attention(q: Tensor, q_pe: Tensor, cache: Tensor, pos: Tensor, *, kv_lora: int, qk_rope: int, scale: float,
                          max_context: int | None = None, first: int = 0, fusions: Fusions = Fusions()) -> Tensor:
  """Causal attention output (T, n_head, kv_lora) fp32 of a prefill chunk: q (T, n_head, kv_lora) absorbed and q_pe (T,
  n_head, qk_rope) roped, of the tokens at positions pos[0] .. pos[0] + T - 1 of the sequence whose cache rows start at row
  pos[1] (pos an int32 (2,) buffer, or (3,) with the length) over its rows 0 .. their position (the chunk's rows must
  already be in `cache`; a cache of several sequences holds max_context rows each: the default, all of it). A symbolic T (a chunk of variable length) runs
  its bound and is sliced back. first: q's rows start with `first` rows of another part (a mixed step's decode rows), the
  chunk's after them. fusions: the model's (slices; the prefill kernels have no trigger)."""
  if first and not available(q.device): q = q[first:]
  T, n_head = q_pe.shape[0], q.shape[1]
  s = AttentionShape(n_head, kv_lora, 0, qk_rope)
  half = _half_cache(cache, "mla_prefill_attention")
  _check_shape(s, half)
  dev, max_context = q.device, max_context or cache.shape[0]
  if q.ndim != 3 or q.shape[2] != kv_lora or not isinstance(n_head, int):
    raise ValueError(f"mla_prefill_attention: q has shape {q.shape}, expected (T, n_head, {kv_lora})")
  if q_pe.ndim != 3 or q_pe.shape[1:] != (n_head, qk_rope):
    raise ValueError(f"mla_prefill_attention: q_pe has shape {q_pe.shape}, expected (T, {n_head}, {qk_rope})")
  if cache.ndim != 2 or cache.shape[1] != kv_lora + qk_rope or cache.shape[0] % max_context:
    raise ValueError(f"mla_prefill_attention: cache has shape {cache.shape}, expected (sequences x {max_context}, {kv_lora + qk_rope})")
  pos = _table(pos, "mla_prefill_attention")
  for name, t in (("q", q), ("q_pe", q_pe)):
    if t.dtype != dtypes.float32: raise ValueError(f"mla_prefill_attention: {name} is {t.dtype}, expected {dtypes.float32}")
  for name, t in (("q_pe", q_pe), ("cache", cache), ("pos", pos)):
    if t.device != dev: raise ValueError(f"mla_prefill_attention: {name} is on {t.device}, q on {dev}")
  if not prefills(dev, cache, n_head, kv_lora, qk_rope): raise ValueError(f"mla_prefill_attention: device {dev} compiles no hand-written kernels")
  (q_pe,), T, Tmax = to_bound(q_pe, slices=fusions.slices)
  (q,), _, _ = to_bound(q, slices=fusions.slices)
  if available(dev):
    out = launch_prefill(*prefill_kernels(s, float(scale), Tmax, max_context, dev, half, first), q.contiguous(), q_pe.contiguous(), cache, pos)
  else:
    from apps.kernels import cpu
    out = cpu.mla_prefill_attention(q.contiguous(), q_pe.contiguous(), cache, pos, kv_lora=kv_lora, qk_rope=qk_rope, scale=scale,
                                    max_context=max_context)
  return out if isinstance(T, int) else out[:T]

def _table(pos: Tensor, who: str) -> Tensor:
  """A prefill chunk's int32 [start, first cache row] buffer, or [start, first cache row, length] (rope_args' form)."""
  if pos.dtype != dtypes.int32 or pos.shape not in ((2,), (3,)): raise ValueError(f"{who}: pos is a {pos.dtype} {pos.shape}, expected int32 (2,) or (3,)")
  return pos

@cached
def chunk_rows_program(s: AttentionShape, eps: float, tokens: int, max_context: int, kv_offset: int, q_stride: int, kv_stride: int,
                       first: int, half: bool, device: str):
  return program(chunk_rows_kernel(s, eps, tokens, max_context, kv_offset, q_stride, kv_stride, first, half), device)

def mla_chunk_rows(q_raw: Tensor, kv_raw: Tensor, kv_norm_w: Tensor, cache: Tensor, rope_cos: Tensor, rope_sin: Tensor, pos: Tensor, *,
                   n_head: int, kv_lora: int, qk_nope: int, qk_rope: int, eps: float, kv_offset: int = 0, first: int = 0,
                   fusions: Fusions = Fusions()) -> tuple[Tensor, Tensor]:
  """A prefill chunk's latent rows into the cache and its queries' rope part, in one kernel (chunk_rows_kernel): for the
  chunk's T tokens, rows `first`.. of q_raw (rows whose first n_head * (qk_nope + qk_rope) elements are the heads) and of
  kv_raw (its kv row at kv_offset, a multiple of 4), at positions pos[0].. of the sequence whose cache rows start at pos[1]
  (pos an int32 [start, first row, length] buffer: length = T); T may be symbolic (the bound's padding rows write zero
  queries and no cache row).
  (q_pe (T, n_head, qk_rope) fp32 roped, the cache after the rows are stored: what mla_prefill_attention reads)."""
  s = AttentionShape(n_head, kv_lora, qk_nope, qk_rope)
  half = _half_cache(cache, "mla_chunk_rows")
  _check_shape(s, half)
  dev, max_context = q_raw.device, rope_cos.shape[0]
  if pos.dtype != dtypes.int32 or pos.shape != (3,): raise ValueError(f"mla_chunk_rows: pos is a {pos.dtype} {pos.shape}, expected int32 (3,)")
  if kv_offset < 0 or kv_offset % 4: raise ValueError(f"mla_chunk_rows: kv_offset {kv_offset} is not a non-negative multiple of 4")
  if kv_raw.ndim == 2 and isinstance(kv_raw.shape[1], int) and kv_raw.shape[1] % 4:
    raise ValueError(f"mla_chunk_rows: kv_raw's rows of {kv_raw.shape[1]} elements are not 16-byte aligned (a multiple of 4)")
  for name, t, least in (("q_raw", q_raw, n_head * (qk_nope + qk_rope)), ("kv_raw", kv_raw, kv_offset + kv_lora + qk_rope)):
    if t.dtype != dtypes.float32 or t.ndim != 2 or not isinstance(t.shape[1], int) or t.shape[1] < least:
      raise ValueError(f"mla_chunk_rows: {name} is a {t.dtype} {t.shape}, expected float32 rows of at least {least}")
    if t.device != dev: raise ValueError(f"mla_chunk_rows: {name} is on {t.device}, q_raw on {dev}")
  if cache.ndim != 2 or cache.shape[1] != kv_lora + qk_rope or cache.shape[0] % max_context:
    raise ValueError(f"mla_chunk_rows: cache has shape {cache.shape}, expected (sequences x {max_context}, {kv_lora + qk_rope})")
  if not available(dev): raise ValueError(f"mla_chunk_rows: device {dev} compiles no hand-written kernels")
  (q_raw, kv_raw), rows, bound = to_bound(q_raw, kv_raw, slices=fusions.slices)
  T, tokens = rows - first, bound - first
  fxn = chunk_rows_program(s, float(eps), tokens, max_context, kv_offset, q_raw.shape[1], kv_raw.shape[1], first, half, dev)
  q_pe, cache, *_ = Tensor.empty(tokens, n_head, qk_rope, device=dev).custom_kernel(
    cache, q_raw, kv_raw, _expect(kv_norm_w, (kv_lora,), "kv_norm_w"), rope_cos, rope_sin, pos, fxn=fxn)
  return (q_pe if isinstance(T, int) else q_pe[:T]), cache

def launch_prefill(attend, combine, q: Tensor, q_pe: Tensor, cache: Tensor, pos: Tensor) -> Tensor:
  """The output (T, n_head, kv_lora) of prefill_kernels' pair for q (T, n_head, kv_lora; more rows before them with the
  kernels' `first`) and q_pe (T, n_head, qk_rope) of a concrete T: the
  attend kernel alone (combine None), or its partials of prefill_splits(T) splits and their combine."""
  (T, n_head, kv_lora), dev = (q_pe.shape[0], *q.shape[1:]), q.device
  if combine is None: return Tensor.empty(T, n_head, kv_lora, device=dev).custom_kernel(q, q_pe, cache, pos, fxn=attend)[0]
  S = prefill_splits(T)
  part, ml, *_ = Tensor.empty(T, S, n_head, kv_lora, device=dev).custom_kernel(Tensor.empty(T, S, n_head, 2, device=dev), q, q_pe,
                                                                               cache, pos, fxn=attend)
  return Tensor.empty(T, n_head, kv_lora, device=dev).custom_kernel(part, ml, pos, fxn=combine)[0]

# ---- a prefill chunk's attention in the form expanded per head (apps/mla.expanded_attention: keys [c_kv @ k_b[h] | k_rope],
# values c_kv @ v_b[h].T): flash attention on the tensor cores, the scores never leave the registers
FLASH_KEYS = 16   # keys per shared-memory stage: two n8 tiles of the scores, two k8 steps of the values
FLASH_WARPS = 4   # warps a workgroup: 16 query rows each, one head

def flash_stages(dqk: int, dv: int, half: bool = False, split: bool = False) -> tuple[int, int] | None:
  """Keys a stage holds and stages: FLASH_KEYS in two stages where two stages of keys and values (and the warps' partial
  scores) fit the 48 KB of static workgroup memory, else 8 in two (fp32 rows only: fp16 ones take the values' products in
  k16 steps), else FLASH_KEYS in one (`split` rows only: each stage's loads then wait for the last one's math, which a
  second workgroup on the SM overlaps), else None. `split` rows are fp16 pairs (hi, lo) of fp32 ones: an fp32 row's bytes."""
  pad, size, wide = (8, 2, 2 if split else 1) if half or split else (4, 4, 1)
  tries = ((FLASH_KEYS, 2), (FLASH_KEYS, 1)) if split else ((FLASH_KEYS, 2),) if half else ((FLASH_KEYS, 2), (8, 2))
  return next(((kt, n) for kt, n in tries if n * kt * (wide * dqk + pad + wide * dv + 8) * size + FLASH_WARPS * kt * 64 <= 48 * 1024), None)

def flash_keys(dqk: int, dv: int, half: bool = False, split: bool = False) -> int | None:
  """Keys a stage holds (flash_stages)."""
  return None if (st := flash_stages(dqk, dv, half, split)) is None else st[0]

def split_halves(x: Tensor) -> Tensor:
  """fp32 x (..., n) as fp16 (..., 2n): hi = x to nearest, then lo = (x - hi) * 2^11 (fp16 keeps it normal where x is);
  hi + lo * 2^-11 holds 22 of x's 24 mantissa bits. The flash kernel's `split` rows: three fp16 products a pair (hi hi,
  hi lo, lo hi) are as accurate as three tf32 ones. |x| must stay within fp16's range (65504)."""
  hi = x.cast(dtypes.float16)
  return hi.cat(((x - hi.float()) * 2048).cast(dtypes.float16), dim=-1)

def flash_form(dqk: int, dv: int, cache_dtype) -> str:
  """The flash kernel's rows for a cache of `cache_dtype`: "f16" rows for an fp16 cache; for an fp32 one "split" (fp16 hi,
  lo pairs: split_halves) where a stage of 16 of them fits (flash_stages), else "tf32" (fp32 rows, three tf32 products a
  pair)."""
  if cache_dtype == dtypes.float16: return "f16"
  return "split" if flash_keys(dqk, dv, split=True) else "tf32"

def flash_supports(n_head: int, nope: int, rope: int, dv: int, kv_lora: int, cache_dtype) -> bool:
  """Whether the flash prefill's kernels take this attention shape over a cache of `cache_dtype`: its expansion GEMM
  (expand_kernel: whole tiles of key and value columns) and the flash kernel in the cache's form (flash_form)."""
  form = flash_form(nope + rope, dv, cache_dtype)
  try:
    expand_kernel(n_head, nope, rope, dv, kv_lora, 16, 64, form == "f16", "f32" if form == "tf32" else form)
    flash_prefill_kernel(n_head, nope + rope, dv, 0.1, 16, 64, half=form == "f16", split=form == "split")
  except AssertionError: return False
  return True

def flash_split(dqk: int, dv: int, half: bool = False, split: bool = False) -> int:
  """Warps that share a tile of 16 queries (each a slice of the query's dims and of the value columns): two where one warp
  would hold more than 128 registers of fp32 queries and output (a row tile's dqk / 2 + dv / 2 a lane). fp16 kernels take
  one: their queries hold half the registers, and the workgroup's 64 queries share each staged key (at 2048 x 14,336 keys on
  the H200 4.4 against 5.6 ms at GLM-4.7-Flash's shape, whose 255 registers spill 136 bytes; 2.1 against 3.1 ms at 16 heads).
  fp16 pairs of fp32 rows (`split`) take one up to 192 + 128 dims (4.1 against 5.5 ms at 16 heads) and two above (GLM-4.7-
  Flash's 256 + 256: 10.7 against 13.2 ms)."""
  wide = dqk + dv > 320 if split else not half and (dqk + dv) // 2 > 128
  return 2 if wide and dqk % 16 == 0 and dv % 16 == 0 else 1

def flash_prefill_kernel(n_head: int, dqk: int, dv: int, scale: float, tokens: int, key_rows: int, ws: int | None = None,
                         half: bool = False, split: bool = False) -> SourceKernel:
  """Causal attention of a chunk's `tokens` queries q (tokens, n_head, dqk) at positions pos[0].. over keys k (key_rows,
  n_head, dqk) and values v (key_rows, n_head, dv), of which rows 0..pos[0] + tokens - 1 are read: out (tokens, n_head,
  dv). Rows are tokens, as the cache's are, so a chunk's expansions of rows 0..start_pos + T - 1 are a prefix of a buffer of
  the context's rows. A workgroup of FLASH_WARPS warps owns one head's queries in tiles of 16 (the last ones first: the
  most keys), `ws` warps a tile (flash_split): each holds its slice of the tile's query dims in registers as A fragments and
  walks the keys up to its workgroup's last query, a stage of keys and their values at a time through shared memory (two
  stages, cp.async: the next loads while this one computes; one where two do not fit: flash_stages). The 16 x kt scores stay in registers (with ws 2, the two
  slices' partial scores meet in shared memory and both warps sum them alike): the online softmax over the quad that holds
  a row, then P . V, each warp its slice of the value columns, a stage's values summed apart and added to the running
  output in fp32. fp32 keys and values: every product three tf32 mma.sync (hi hi + hi lo + lo hi: fp32 accuracy), the
  weights moved by shuffles from the scores' C layout into the A layout of P . V, as prefill_mma_kernel does. With `half`
  the keys and values are fp16 (an fp16 cache's expansions, its 10-bit mantissas) and every product one fp16 mma.sync
  m16n8k16 of the queries and weights rounded to fp16: the scores' C fragments are the weights' A fragments as they stand,
  the values' B fragments come transposed from shared memory (ldmatrix). With `split` the rows are fp32 ones as fp16 pairs
  (split_halves: a key row [hi | lo] of 2 dqk halves, a value row of 2 dv) and so are the queries and weights: each product
  three fp16 mma.sync (hi hi; hi lo and lo hi summed apart, scaled by 2^-11), fp32-accurate as the tf32 form is at half its
  products (m16n8k16 against k8) and with no splits of staged rows in registers. The key and value rows up to the last query's
  position must hold finite numbers, a padded query's too (a zero weight still multiplies them)."""
  assert not (half and split)
  h16, WK, WV = half or split, dqk * (1 + split), dv * (1 + split)   # fp16 rows; a row's elements in the buffers
  ws = ws or flash_split(dqk, dv, half, split)
  assert ws in (1, 2) and dqk % (8 * ws) == 0 and dv % (8 * ws) == 0 and tokens > 0 and key_rows > 0, (dqk, dv, ws, tokens, key_rows)
  (kt, stages), qt, DQW, DVW = flash_stages(dqk, dv, half, split) or (0, 0), 16 * FLASH_WARPS // ws, dqk // ws, dv // ws
  assert kt > 0 and (not h16 or (kt % 16 == 0 and DQW % 16 == 0 and DVW % 16 == 0)), (kt, DQW, DVW)
  # staged row strides in elements: the fragments' reads (and ldmatrix's rows) hit 32 banks
  SK, SV, E, vec = (WK + 8, WV + 8, 8, "uint4") if h16 else (dqk + 4, dv + 8, 4, "float4")
  # a score of the scores' two accumulators (hi hi; the cross terms, in units of 2^-11 with split)
  score = "sh[n][i] + sx[n][i] * 0.00048828125f" if split else "sh[n][i] + sx[n][i]"
  pack = lambda hi, lo, a, b: f"{hi} = PACK_H2({a}, {b}); {lo} = PACK_H2(({a} - H2F_BITS({hi})) * 2048.0f, ({b} - H2F_BITS({hi} >> 16)) * 2048.0f);"
  tf32_hilo = lambda x, h, l: f"{h} = AS_FLOAT((AS_UINT({x}) + 0x1000u) & 0xffffe000u); {l} = {x} - {h};"
  tiles = -(-tokens // qt)
  exchange = "" if ws == 1 else f"""
    // the two slices' partial scores: each warp's C fragments into shared memory, both warps of the tile sum them in order
    for (int n = 0; n < {kt // 8}; n++) for (int i = 0; i < 4; i++) part[((w*{kt // 8} + n)*4 + i)*32 + lane] = {score};
    BARRIER();
    for (int n = 0; n < {kt // 8}; n++) for (int i = 0; i < 4; i++) {{
      int w0 = w - wd;
      sh[n][i] = part[((w0*{kt // 8} + n)*4 + i)*32 + lane] + part[(((w0 + 1)*{kt // 8} + n)*4 + i)*32 + lane]; sx[n][i] = 0.0f;
    }}"""
  if split:
    queries = f"""  // the warp's queries as fp16 A fragments of m16n8k16, hi and lo (rows g, g + 8; dims d0 + 16j + 2t, + 1 and + 8, + 9),
  // scaled to base-2 scores
  unsigned qf[{DQW // 16}][4], qx[{DQW // 16}][4];
  for (int j = 0; j < {DQW // 16}; j++) for (int i = 0; i < 4; i++) {{
    int r = (i & 1) ? rb : ra, d = (r*H + h)*DQK + d0 + 16*j + 2*t + 8*(i >> 1);
    float a = r < T ? q[d] * SCALE2 : 0.0f, b = r < T ? q[d + 1] * SCALE2 : 0.0f;
    {pack("qf[j][i]", "qx[j][i]", "a", "b")}
  }}"""
    scores = f"""    // scores of the 16 rows x keys c0 + 8n + 0..7: B fragment key g, dims 2t, 2t + 1 (and + 8, + 9), a word each; the
    // key's lo half {dqk // 2} words on
    const unsigned* kb = (const unsigned*)ks4 + b*{kt * SK // 2} + d0 / 2;
    float sh[{kt // 8}][4], sx[{kt // 8}][4];
    for (int n = 0; n < {kt // 8}; n++) for (int i = 0; i < 4; i++) sh[n][i] = sx[n][i] = 0.0f;
    for (int j = 0; j < {DQW // 16}; j++) for (int n = 0; n < {kt // 8}; n++) {{
      const unsigned* kr = kb + (8*n + g)*{SK // 2} + 8*j + t;
      MMA_F16(sh[n], qf[j], kr[0], kr[4]); MMA_F16(sx[n], qf[j], kr[{dqk // 2}], kr[{dqk // 2 + 4}]); MMA_F16(sx[n], qx[j], kr[0], kr[4]);
    }}{exchange}"""
    values = f"""    // P's A fragments, a k16 step of the values, hi and lo: the C fragments of its two n8 tiles of scores as they stand
    unsigned pf[{kt // 16}][4], px[{kt // 16}][4];
    for (int s = 0; s < {kt // 16}; s++) {{
      {pack("pf[s][0]", "px[s][0]", "sh[2*s][0]", "sh[2*s][1]")} {pack("pf[s][1]", "px[s][1]", "sh[2*s][2]", "sh[2*s][3]")}
      {pack("pf[s][2]", "px[s][2]", "sh[2*s + 1][0]", "sh[2*s + 1][1]")} {pack("pf[s][3]", "px[s][3]", "sh[2*s + 1][2]", "sh[2*s + 1][3]")}
    }}
    // out = out * alpha + P . V over this warp's value columns, two n8 tiles at a time, the hi and lo values (dv halves on)
    // by ldmatrix .trans as in the fp16 form
    const half* vb = (const half*)vs4 + b*{kt * SV} + v0c;
    for (int m = 0; m < {DVW // 8}; m += 2) {{
      float acc[2][4] = {{{{0.0f, 0.0f, 0.0f, 0.0f}}, {{0.0f, 0.0f, 0.0f, 0.0f}}}}, acx[2][4] = {{{{0.0f, 0.0f, 0.0f, 0.0f}}, {{0.0f, 0.0f, 0.0f, 0.0f}}}};
      for (int s = 0; s < {kt // 16}; s++) {{
        unsigned vf[4], vl[4];
        LDSM_X4_T(vf, vb + (16*s + (lane & 15))*SV + 8*m + 8*(lane >> 4));
        LDSM_X4_T(vl, vb + (16*s + (lane & 15))*SV + {dv} + 8*m + 8*(lane >> 4));
        MMA_F16(acc[0], pf[s], vf[0], vf[1]); MMA_F16(acc[1], pf[s], vf[2], vf[3]);
        MMA_F16(acx[0], pf[s], vl[0], vl[1]); MMA_F16(acx[1], pf[s], vl[2], vl[3]);
        MMA_F16(acx[0], px[s], vf[0], vf[1]); MMA_F16(acx[1], px[s], vf[2], vf[3]);
      }}
      for (int e = 0; e < 2; e++) for (int i = 0; i < 4; i++) acc[e][i] += acx[e][i] * 0.00048828125f;
      for (int e = 0; e < 2; e++) {{
        o[m + e][0] = o[m + e][0]*aa + acc[e][0]; o[m + e][1] = o[m + e][1]*aa + acc[e][1];
        o[m + e][2] = o[m + e][2]*ab + acc[e][2]; o[m + e][3] = o[m + e][3]*ab + acc[e][3];
      }}
    }}"""
  elif half:
    queries = f"""  // the warp's queries as fp16 A fragments of m16n8k16 (rows g, g + 8; dims d0 + 16j + 2t, + 1 and + 8, + 9), scaled to
  // base-2 scores
  unsigned qf[{DQW // 16}][4];
  for (int j = 0; j < {DQW // 16}; j++) for (int i = 0; i < 4; i++) {{
    int r = (i & 1) ? rb : ra, d = (r*H + h)*DQK + d0 + 16*j + 2*t + 8*(i >> 1);
    qf[j][i] = r < T ? PACK_H2(q[d] * SCALE2, q[d + 1] * SCALE2) : 0u;
  }}"""
    scores = f"""    // scores of the 16 rows x keys c0 + 8n + 0..7: B fragment key g, dims 2t, 2t + 1 (and + 8, + 9), a word each
    const unsigned* kb = (const unsigned*)ks4 + b*{kt * SK // 2} + d0 / 2;
    float sh[{kt // 8}][4], sx[{kt // 8}][4];
    for (int n = 0; n < {kt // 8}; n++) for (int i = 0; i < 4; i++) sh[n][i] = sx[n][i] = 0.0f;
    for (int j = 0; j < {DQW // 16}; j++) for (int n = 0; n < {kt // 8}; n++) {{
      const unsigned* kr = kb + (8*n + g)*{SK // 2} + 8*j + t;
      MMA_F16(sh[n], qf[j], kr[0], kr[4]);
    }}{exchange}"""
    values = f"""    // P's A fragments, a k16 step of the values: the C fragments of its two n8 tiles of scores as they stand, in fp16
    unsigned pf[{kt // 16}][4];
    for (int s = 0; s < {kt // 16}; s++) {{
      pf[s][0] = PACK_H2(sh[2*s][0], sh[2*s][1]); pf[s][1] = PACK_H2(sh[2*s][2], sh[2*s][3]);
      pf[s][2] = PACK_H2(sh[2*s + 1][0], sh[2*s + 1][1]); pf[s][3] = PACK_H2(sh[2*s + 1][2], sh[2*s + 1][3]);
    }}
    // out = out * alpha + P . V over this warp's value columns, two n8 tiles at a time: ldmatrix's four 8 x 8 matrices
    // (keys 0..7 and 8..15 of the step, columns 8m.. and 8m + 8..) transposed into B fragments (keys 2t, 2t + 1, column g)
    const half* vb = (const half*)vs4 + b*{kt * SV} + v0c;
    for (int m = 0; m < {DVW // 8}; m += 2) {{
      float acc[2][4] = {{{{0.0f, 0.0f, 0.0f, 0.0f}}, {{0.0f, 0.0f, 0.0f, 0.0f}}}};
      for (int s = 0; s < {kt // 16}; s++) {{
        unsigned vf[4];
        LDSM_X4_T(vf, vb + (16*s + (lane & 15))*SV + 8*m + 8*(lane >> 4));
        MMA_F16(acc[0], pf[s], vf[0], vf[1]); MMA_F16(acc[1], pf[s], vf[2], vf[3]);
      }}
      for (int e = 0; e < 2; e++) {{
        o[m + e][0] = o[m + e][0]*aa + acc[e][0]; o[m + e][1] = o[m + e][1]*aa + acc[e][1];
        o[m + e][2] = o[m + e][2]*ab + acc[e][2]; o[m + e][3] = o[m + e][3]*ab + acc[e][3];
      }}
    }}"""
  else:
    queries = f"""  // the warp's queries as A fragments (rows g, g + 8; dims d0 + 8j + t, + 4), scaled to base-2 scores
  float qf[{DQW // 8}][4];
  for (int j = 0; j < {DQW // 8}; j++) for (int i = 0; i < 4; i++) {{
    int r = (i & 1) ? rb : ra;
    qf[j][i] = r < T ? q[(r*H + h)*DQK + d0 + 8*j + t + 4*(i >> 1)] * SCALE2 : 0.0f;
  }}"""
    scores = f"""    // scores of the 16 rows x keys c0 + 8n + 0..7: B fragment key g, dims t, t + 4; hi hi and the cross terms apart
    const float* kb = (const float*)ks4 + b*{kt * SK} + d0;
    float sh[{kt // 8}][4], sx[{kt // 8}][4];
    for (int n = 0; n < {kt // 8}; n++) for (int i = 0; i < 4; i++) sh[n][i] = sx[n][i] = 0.0f;
    for (int j = 0; j < {DQW // 8}; j++) {{
      float qh[4], ql[4];
      for (int i = 0; i < 4; i++) {{ {tf32_hilo("qf[j][i]", "qh[i]", "ql[i]")} }}
      for (int n = 0; n < {kt // 8}; n++) {{
        float k0 = kb[(8*n + g)*SK + 8*j + t], k1 = kb[(8*n + g)*SK + 8*j + t + 4], k0h, k0l, k1h, k1l;
        {tf32_hilo("k0", "k0h", "k0l")} {tf32_hilo("k1", "k1h", "k1l")}
        MMA_TF32(sh[n], qh, k0h, k1h); MMA_TF32(sx[n], qh, k0l, k1l); MMA_TF32(sx[n], ql, k0h, k1h);
      }}
    }}{exchange}"""
    values = f"""    // P's A fragments, a k8 step of the values per n8 tile: (row g, key t) and (row g, key t + 4) come from the quad's
    // lanes t >> 1 and 2 + (t >> 1), slot t & 1 of their C (rows g + 8: slots 2, 3); then split hi / lo
    float ph[{kt // 8}][4], pl[{kt // 8}][4];
    int xo0 = t ^ (t >> 1), xo1 = t ^ (2 + (t >> 1)), odd = t & 1;
    for (int n = 0; n < {kt // 8}; n++) {{
      float a00 = SHFL_XOR(sh[n][0], xo0), a01 = SHFL_XOR(sh[n][1], xo0), a20 = SHFL_XOR(sh[n][0], xo1), a21 = SHFL_XOR(sh[n][1], xo1);
      float b00 = SHFL_XOR(sh[n][2], xo0), b01 = SHFL_XOR(sh[n][3], xo0), b20 = SHFL_XOR(sh[n][2], xo1), b21 = SHFL_XOR(sh[n][3], xo1);
      float pa[4] = {{odd ? a01 : a00, odd ? b01 : b00, odd ? a21 : a20, odd ? b21 : b20}};
      for (int i = 0; i < 4; i++) {{ {tf32_hilo("pa[i]", "ph[n][i]", "pl[n][i]")} }}
    }}
    // out = out * alpha + P . V over this warp's value columns (B fragment: keys t, t + 4 of the step, column g)
    const float* vb = (const float*)vs4 + b*{kt * SV} + v0c;
    for (int m = 0; m < {DVW // 8}; m++) {{
      float acc[4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
      for (int n = 0; n < {kt // 8}; n++) {{
        float v0 = vb[(8*n + t)*SV + 8*m + g], v1 = vb[(8*n + t + 4)*SV + 8*m + g], v0h, v0l, v1h, v1l;
        {tf32_hilo("v0", "v0h", "v0l")} {tf32_hilo("v1", "v1h", "v1l")}
        MMA_TF32(acc, ph[n], v0h, v1h); MMA_TF32(acc, ph[n], v0l, v1l); MMA_TF32(acc, pl[n], v0h, v1h);
      }}
      o[m][0] = o[m][0]*aa + acc[0]; o[m][1] = o[m][1]*aa + acc[1]; o[m][2] = o[m][2]*ab + acc[2]; o[m][3] = o[m][3]*ab + acc[3];
    }}"""
  pipeline = f"""  LOAD_STAGE(0, 0)
  for (int c0 = 0, b = 0; c0 < nmax; c0 += {kt}, b ^= 1) {{
    CP_ASYNC_WAIT();
    BARRIER();                                   // stage b is in; every warp is done with stage b ^ 1 (and the partial scores)
    if (c0 + {kt} < nmax) LOAD_STAGE(c0 + {kt}, b ^ 1)""" if stages == 2 else f"""  for (int c0 = 0, b = 0; c0 < nmax; c0 += {kt}) {{
    BARRIER();                                   // every warp is done with the stage (and the partial scores)
    LOAD_STAGE(c0, 0)
    CP_ASYNC_WAIT();
    BARRIER();                                   // the stage is in"""
  body = f"""  GRID_WAIT();
  const int H = {n_head}, DQK = {dqk}, DV = {dv}, T = {tokens}, KR = {key_rows}, SK = {SK}, SV = {SV};
  const float NEG = {NEG}, SCALE2 = {_f32(scale * math.log2(math.e))};
  int lane = LID_X, w = LID_Y, g = lane >> 2, t = lane & 3, tid = w * 32 + lane, h = GID_Y, wd = w % {ws};
  int q0 = ({tiles - 1} - (int)GID_X) * {qt}, ra = q0 + 16 * (w / {ws}) + g, rb = ra + 8;
  const int d0 = wd * {DQW}, v0c = wd * {DVW};   // this warp's query dims and value columns
  int p0 = pos[0];
  // keys 0..n - 1 of query row r: its position p0 + r, + 1 (a padded row past the chunk: the last query's)
  int na = p0 + (ra < T ? ra : T - 1) + 1, nb = p0 + (rb < T ? rb : T - 1) + 1;
  int nmax = p0 + (q0 + {qt - 1} < T ? q0 + {qt - 1} : T - 1) + 1;
  if (nmax > KR) nmax = KR;
{queries}
  SHARED {vec} ks4[{stages * kt * SK // E}];
  SHARED {vec} vs4[{stages * kt * SV // E}];
  {"" if ws == 1 else f"SHARED float part[{FLASH_WARPS * kt // 8 * 4 * 32}];"}
  float o[{DVW // 8}][4], ma = NEG, mb = NEG, la = 0.0f, lb = 0.0f;
  for (int m = 0; m < {DVW // 8}; m++) o[m][0] = o[m][1] = o[m][2] = o[m][3] = 0.0f;
  // stage b <- the keys and values c0..c0 + {kt - 1} (past the last one: the last one again), 16 bytes a copy
  #define LOAD_STAGE(c0, b) for (int e = tid; e < {kt * (WK + WV) // E}; e += {32 * FLASH_WARPS}) {{ \\
    int i = e / {(WK + WV) // E}, c = e % {(WK + WV) // E}, key = (c0) + i < nmax ? (c0) + i : nmax - 1; \\
    if (c < {WK // E}) CP_ASYNC16(&ks4[((b)*{kt} + i)*{SK // E} + c], (const GLOBAL {vec}*)(k + ((long)key*H + h)*{WK}) + c); \\
    else CP_ASYNC16(&vs4[((b)*{kt} + i)*{SV // E} + c - {WK // E}], (const GLOBAL {vec}*)(v + ((long)key*H + h)*{WV}) + c - {WK // E}); }}
{pipeline}
{scores}
    // C (row g | g + 8, key 8n + 2t + e): masked at each row's own position; the rows' max over the stage (a row's keys
    // sit in its quad), rescale, weights
    float xa = NEG, xb = NEG;
    for (int n = 0; n < {kt // 8}; n++) for (int i = 0; i < 4; i++) {{
      int key = c0 + 8*n + 2*t + (i & 1);
      float s = {score};
      sh[n][i] = key < ((i >> 1) ? nb : na) ? s : NEG;
      if (i >> 1) xb = FMAX(xb, sh[n][i]); else xa = FMAX(xa, sh[n][i]);
    }}
    xa = FMAX(xa, SHFL_XOR(xa, 1)); xb = FMAX(xb, SHFL_XOR(xb, 1));
    xa = FMAX(xa, SHFL_XOR(xa, 2)); xb = FMAX(xb, SHFL_XOR(xb, 2));
    xa = FMAX(xa, ma); xb = FMAX(xb, mb);
    float aa = EXP2(ma - xa), ab = EXP2(mb - xb);
    ma = xa; mb = xb;
    la *= aa; lb *= ab;
    for (int n = 0; n < {kt // 8}; n++) for (int i = 0; i < 4; i++) {{
      sh[n][i] = EXP2(sh[n][i] - ((i >> 1) ? xb : xa));
      if (i >> 1) lb += sh[n][i]; else la += sh[n][i];
    }}
{values}
  }}
  #undef LOAD_STAGE
  la += SHFL_XOR(la, 1); la += SHFL_XOR(la, 2); lb += SHFL_XOR(lb, 1); lb += SHFL_XOR(lb, 2);
  float ia = 1.0f / la, ib = 1.0f / lb;
  for (int m = 0; m < {DVW // 8}; m++) {{
    int col = v0c + 8*m + 2*t;
    if (ra < T) {{ out[(ra*H + h)*DV + col] = o[m][0] * ia; out[(ra*H + h)*DV + col + 1] = o[m][1] * ia; }}
    if (rb < T) {{ out[(rb*H + h)*DV + col] = o[m][2] * ib; out[(rb*H + h)*DV + col + 1] = o[m][3] * ib; }}
  }}"""
  kv = dtypes.float16 if h16 else dtypes.float32
  params = (Param("out", dtypes.float32, True), Param("q", dtypes.float32), Param("k", kv), Param("v", kv), Param("pos", dtypes.int32))
  name = f"mla_prefill_flash_{tokens}_h{n_head}_qk{dqk}_v{dv}_k{key_rows}" + (f"_w{ws}" if ws > 1 else "") + ("_f16" if half else "_split" if split else "")
  return SourceKernel(name, params, body, (tiles, n_head, 1), (32, FLASH_WARPS, 1), trigger=False)

@cached
def flash_prefill_program(n_head: int, dqk: int, dv: int, scale: float, tokens: int, key_rows: int, device: str, ws: int | None = None,
                          half: bool = False, split: bool = False):
  return program(flash_prefill_kernel(n_head, dqk, dv, scale, tokens, key_rows, ws, half, split), device)

def mla_flash_prefill(q: Tensor, keys: Tensor, values: Tensor, pos: Tensor, scale: float, ws: int | None = None) -> Tensor:
  """Causal attention (T, n_head, dv) fp32 of a chunk's queries q (T, n_head, dqk) at positions pos[0] .. pos[0] + T - 1
  (pos an int32 (2,) buffer) over per-head keys (rows, n_head, dqk) and values (rows, n_head, dv), rows 0 .. pos[0] + T - 1
  of them read: flash_prefill_kernel on the tensor cores (CUDA sm_80+), its fp16 products where the keys and values are fp16
  (or fp16 pairs of fp32 rows from split_halves: keys (rows, n_head, 2 dqk), values (rows, n_head, 2 dv))."""
  (T, H, dqk), (rows, _, wv) = q.shape, values.shape
  if not has_mma(q.device): raise ValueError(f"mla_flash_prefill: device {q.device} has no tensor-core kernels")
  if values.dtype != keys.dtype: raise ValueError(f"mla_flash_prefill: keys are {keys.dtype}, values {values.dtype}")
  split = keys.dtype == dtypes.float16 and keys.shape[-1] == 2 * dqk
  half, dv = keys.dtype == dtypes.float16 and not split, wv // 2 if split else wv
  if keys.shape != (rows, H, dqk * (1 + split)):
    raise ValueError(f"mla_flash_prefill: keys have shape {keys.shape}, expected ({rows}, {H}, {dqk}) (or {2 * dqk} fp16: split_halves)")
  fxn = flash_prefill_program(H, dqk, dv, float(scale), T, rows, q.device, ws, half, split)
  kv = (lambda x: x.contiguous()) if half or split else (lambda x: x.float().contiguous())
  return Tensor.empty(T, H, dv, device=q.device).custom_kernel(q.float().contiguous(), kv(keys), kv(values),
                                                             _table(pos, "mla_flash_prefill"), fxn=fxn)[0]

EXPAND_TILE = 128    # rows and columns of the expansion a workgroup's tile holds (8 warps of 64 x 32)
EXPAND_GROUPS = 132  # workgroups of an expansion: one an SM of an H100 / H200 (215 registers a thread), each walking tiles

def expand_kernel(n_head: int, nope: int, rope: int, dv: int, kv_lora: int, tokens: int, key_rows: int, half: bool = False,
                  form: str = "split", groups: int = EXPAND_GROUPS) -> SourceKernel:
  """The flash kernel's keys k (key_rows, n_head, dqk) and values v (key_rows, n_head, dv) of rows 0 .. min(pos[0] + tokens,
  key_rows) - 1, expanded per head from the latent cache rows base + r (base = pos[1]; a row [c_kv | k_rope], kv_lora + rope
  wide): k[r, h] = [c_kv[r] . w[h nope + j] over j < nope | k_rope[r]], v[r, h, j] = c_kv[r] . w[H nope + h dv + j], with w
  (H (nope + dv), 2 kv_lora) the expansions' weights as fp16 (hi, lo) pairs (split_halves of k_b's and v_b's rows, kv_lora
  innermost). One GEMM of the rows by all heads' columns (keys' then values') on the tensor cores, fp16 mma.sync m16n8k16:
  an fp32 cache's rows as (hi, lo) pairs in registers, three products (hi hi; hi lo and lo hi summed apart, scaled by
  2^-11), fp32-accurate; an fp16 cache's rows as they are, two (w's hi and lo). Tiles of EXPAND_TILE rows x columns, `groups`
  workgroups walking them (the rows' count is the chunk's, known on the device), k16 steps through shared memory (two
  stages, cp.async). The output in the flash kernel's `form`: "split" fp16 pairs (a row [hi | lo], twice as wide), "f16"
  fp16 rows, "f32" fp32 ones."""
  assert form in ("split", "f16", "f32") and not (half and form != "f16") and (form != "f16" or half)
  NK, NV, TL = n_head * nope, n_head * dv, EXPAND_TILE
  assert NK % TL == 0 and NV % TL == 0 and kv_lora % 32 == 0 and nope % 2 == 0 and dv % 2 == 0, (NK, NV, kv_lora, nope)
  dqk, wide = nope + rope, 2 if form == "split" else 1
  # staged row strides: the cache's rows 24 elements (fp32: float2 fragment reads hit 32 banks; fp16: 12 words), w's rows 20
  # words ([hi 16 | lo 16] halves and 8 of padding)
  SA, SB = 24, 20
  a_elems, CA = ("half", 2) if half else ("float", 4)   # 16-byte copies a staged row of the cache holds (16 elements)
  if half:
    a_frag = """        const unsigned* ar = (const unsigned*)as + ((b*128 + r0 + g)*12 + t);
        ah[mi][0] = ar[0]; ah[mi][1] = ar[8*12]; ah[mi][2] = ar[4]; ah[mi][3] = ar[8*12 + 4];"""
    products = "MMA_F16(ch[mi][nj], ah[mi], bh[nj][0], bh[nj][1]); MMA_F16(cx[mi][nj], ah[mi], bl[nj][0], bl[nj][1]);"
  else:
    a_frag = """        const float* ar = as + (b*128 + r0 + g)*24 + 2*t;
        for (int i = 0; i < 4; i++) {
          float a0 = ar[(i & 1)*8*24 + (i >> 1)*8], a1 = ar[(i & 1)*8*24 + (i >> 1)*8 + 1];
          ah[mi][i] = PACK_H2(a0, a1); al[mi][i] = PACK_H2((a0 - H2F_BITS(ah[mi][i])) * 2048.0f, (a1 - H2F_BITS(ah[mi][i] >> 16)) * 2048.0f);
        }"""
    products = ("MMA_F16(ch[mi][nj], ah[mi], bh[nj][0], bh[nj][1]); MMA_F16(cx[mi][nj], ah[mi], bl[nj][0], bl[nj][1]); "
                "MMA_F16(cx[mi][nj], al[mi], bh[nj][0], bh[nj][1]);")
  if form == "split":
    store = lambda dst, lo, v0, v1: (f"{{ unsigned hi = PACK_H2({v0}, {v1}); *(GLOBAL unsigned*)({dst}) = hi; *(GLOBAL unsigned*)({dst} + {lo}) = "
                                     f"PACK_H2(({v0} - H2F_BITS(hi)) * 2048.0f, ({v1} - H2F_BITS(hi >> 16)) * 2048.0f); }}")
    store1 = lambda dst, lo, x: f"{{ half hi = F2H({x}); {dst}[0] = hi; {dst}[{lo}] = F2H(({x} - H2F(hi)) * 2048.0f); }}"
  elif form == "f16":
    store = lambda dst, lo, v0, v1: f"*(GLOBAL unsigned*)({dst}) = PACK_H2({v0}, {v1});"
    store1 = lambda dst, lo, x: f"{dst}[0] = F2H({x});"
  else:
    store = lambda dst, lo, v0, v1: f"{{ {dst}[0] = {v0}; {dst}[1] = {v1}; }}"
    store1 = lambda dst, lo, x: f"{dst}[0] = {x};"
  rope_x = "H2F(cache[src])" if half else "cache[src]"
  body = f"""  GRID_WAIT();
  const int H = {n_head}, NOPE = {nope}, DQK = {dqk}, DV = {dv}, KV = {kv_lora}, CW = {kv_lora + rope}, NK = {NK}, NTILES = {(NK + NV) // TL};
  int lane = LID_X, w = LID_Y, g = lane >> 2, t = lane & 3, tid = w*32 + lane, wm = w >> 2, wn = w & 3;
  int rows = pos[0] + {tokens}, base = pos[1];
  if (rows > {key_rows}) rows = {key_rows};
  int tiles = (rows + 127) / 128 * NTILES;
  SHARED {a_elems} as[{2 * TL * SA}];
  SHARED unsigned bs[{2 * TL * SB}];
  // stage b <- rows m0.. (past the last: the last one) and columns n0.. of k16 step k0: 16-byte copies, 2 a thread
  #define LOAD_STAGE(k0, b) for (int e = tid; e < {TL * CA + TL * 4}; e += 256) {{ \\
    if (e < {TL * CA}) {{ int i = e / {CA}, c = e % {CA}, r = m0 + i < rows ? m0 + i : rows - 1; \\
      CP_ASYNC16((uint4*)(as + ((b)*128 + i)*{SA}) + c, (const GLOBAL uint4*)(cache + (long)(base + r)*CW + (k0)) + c); }} \\
    else {{ int f = e - {TL * CA}, i = f >> 2, c = f & 3; \\
      CP_ASYNC16((uint4*)(bs + ((b)*128 + i)*{SB}) + c, (const GLOBAL uint4*)(wp + (long)(n0 + i)*{2 * kv_lora} + (c >> 1)*KV + (k0)) + (c & 1)); }} }}
  for (int tile = GID_X; tile < tiles; tile += {groups}) {{
    int m0 = tile / NTILES * 128, n0 = tile % NTILES * 128;
    float ch[4][4][4], cx[4][4][4];
    for (int mi = 0; mi < 4; mi++) for (int nj = 0; nj < 4; nj++) for (int i = 0; i < 4; i++) ch[mi][nj][i] = cx[mi][nj][i] = 0.0f;
    LOAD_STAGE(0, 0)
    for (int s = 0, b = 0; s < {kv_lora // 16}; s++, b ^= 1) {{
      CP_ASYNC_WAIT();
      BARRIER();                                 // stage b is in; every warp is done with stage b ^ 1
      if (s + 1 < {kv_lora // 16}) LOAD_STAGE((s + 1)*16, b ^ 1)
      // A fragments of the warp's 4 m16 tiles (rows r0 + g, + 8; k 2t, 2t + 1 and + 8, + 9), B of its 4 n8 tiles (column
      // g; the hi words, then the lo ones 8 words on)
      unsigned ah[4][4], al[4][4], bh[4][2], bl[4][2];
      for (int mi = 0; mi < 4; mi++) {{
        int r0 = wm*64 + 16*mi;
{a_frag}
      }}
      for (int nj = 0; nj < 4; nj++) {{
        const unsigned* br = bs + (b*128 + wn*32 + 8*nj + g)*{SB} + t;
        bh[nj][0] = br[0]; bh[nj][1] = br[4]; bl[nj][0] = br[8]; bl[nj][1] = br[12];
      }}
      for (int mi = 0; mi < 4; mi++) for (int nj = 0; nj < 4; nj++) {{ {products} }}
    }}
    // C (row g | g + 8, columns 2t, 2t + 1) into its head's row of the keys (the columns past NK: the values')
    #pragma unroll
    for (int mi = 0; mi < 4; mi++)
    #pragma unroll
    for (int nj = 0; nj < 4; nj++)
    #pragma unroll
    for (int e = 0; e < 2; e++) {{
      int r = m0 + wm*64 + 16*mi + g + 8*e, n = n0 + wn*32 + 8*nj + 2*t;
      if (r >= rows) continue;
      float v0 = ch[mi][nj][2*e] + cx[mi][nj][2*e] * 0.00048828125f, v1 = ch[mi][nj][2*e + 1] + cx[mi][nj][2*e + 1] * 0.00048828125f;
      if (n < NK) {{ int h = n / NOPE; GLOBAL {'half' if form != 'f32' else 'float'}* dst = k + ((long)r*H + h)*{wide * dqk} + n - h*NOPE; {store("dst", "DQK", "v0", "v1")} }}
      else {{ int h = (n - NK) / DV; GLOBAL {'half' if form != 'f32' else 'float'}* dst = v + ((long)r*H + h)*{wide * dv} + n - NK - h*DV; {store("dst", "DV", "v0", "v1")} }}
    }}
    // the keys' rope dims: the cache row's k_rope, by the tile that holds the head's first column
    for (int h = (n0 + NOPE - 1) / NOPE; h * NOPE < n0 + 128 && h * NOPE < NK; h++)
      for (int e = tid; e < 128 * {rope}; e += 256) {{
        int r = m0 + e / {rope}, d = e % {rope};
        if (r >= rows) continue;
        long src = (long)(base + r)*CW + KV + d;
        float x = {rope_x};
        GLOBAL {'half' if form != 'f32' else 'float'}* dst = k + ((long)r*H + h)*{wide * dqk} + NOPE + d;
        {store1("dst", "DQK", "x")}
      }}
  }}
  #undef LOAD_STAGE"""
  out = dtypes.float32 if form == "f32" else dtypes.float16
  params = (Param("k", out, True), Param("v", out, True), Param("cache", dtypes.float16 if half else dtypes.float32),
            Param("wp", dtypes.float16), Param("pos", dtypes.int32))
  name = f"mla_expand_{tokens}_h{n_head}_n{nope}_r{rope}_v{dv}_k{key_rows}_{'f16' if half else 'f32'}_{form}"
  return SourceKernel(name, params, body, (groups, 1, 1), (32, 8, 1), trigger=False)

def expansion_weights(k_b: Tensor, v_b: Tensor) -> Tensor:
  """k_b (H, kv_lora, nope) and v_b (H, dv, kv_lora) as expand_kernel's w: (H nope + H dv, 2 kv_lora), a row a column of
  the keys (then of the values), kv_lora innermost, as fp16 (hi, lo) pairs (split_halves)."""
  H, KV, nope = k_b.shape
  return split_halves(k_b.float().permute(0, 2, 1).reshape(H * nope, KV).cat(v_b.float().reshape(-1, KV), dim=0))

@cached
def expand_program(n_head: int, nope: int, rope: int, dv: int, kv_lora: int, tokens: int, key_rows: int, device: str, half: bool, form: str):
  return program(expand_kernel(n_head, nope, rope, dv, kv_lora, tokens, key_rows, half, form), device)

def mla_expand(cache: Tensor, k_b: Tensor, v_b: Tensor, pos: Tensor, keys: Tensor, values: Tensor, tokens: int) -> tuple[Tensor, Tensor]:
  """The flash kernel's keys (rows, H, dqk) and values (rows, H, dv) buffers (or their fp16 pairs: flash_form) with rows 0 ..
  pos[0] + tokens - 1 expanded per head from the latent cache rows pos[1] + r (k_b (H, kv_lora, qk_nope), v_b (H, v_head,
  kv_lora)): expand_kernel on the tensor cores (CUDA sm_80+). The rows past the chunk's last real one (a bound's padding)
  are expanded from what the cache holds there."""
  (H, KV, nope), dv, rope, rows = k_b.shape, v_b.shape[1], cache.shape[1] - k_b.shape[1], keys.shape[0]
  if not has_mma(cache.device): raise ValueError(f"mla_expand: device {cache.device} has no tensor-core kernels")
  half = _half_cache(cache, "mla_expand")
  form = "f32" if keys.dtype == dtypes.float32 else "split" if keys.shape[-1] == 2 * (nope + rope) else "f16"
  wide = 2 if form == "split" else 1
  if keys.shape != (rows, H, wide * (nope + rope)) or values.shape != (rows, H, wide * dv) or values.dtype != keys.dtype or (form == "f16") != half:
    raise ValueError(f"mla_expand: buffers {keys.shape} {keys.dtype} / {values.shape} {values.dtype} are not the flash form of a "
                     f"{cache.dtype} cache's {H} x ({nope} + {rope}, {dv}) rows")
  fxn = expand_program(H, nope, rope, dv, KV, tokens, rows, cache.device, half, form)
  keys, values, *_ = Tensor.custom_kernel(keys, values, cache, expansion_weights(k_b, v_b).contiguous(), _table(pos, "mla_expand"), fxn=fxn)
  return keys, values
