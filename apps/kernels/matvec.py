"""Decode matvecs on packed GGUF weights: out = W @ x for a few tokens, with the norm before and the residual / SwiGLU /
expert mix after folded into the same kernel (each a kernel launch less per use, ~1-3 us each on the H100).

Layout of the work: a warp owns R output rows and walks a row's packed blocks with its 32 lanes (lane i takes chunks
i, i+32, ...: consecutive lanes read consecutive 16-byte words, so every weight load is coalesced and wide); WARPS warps
per workgroup; the R partial sums are reduced across the warp with shuffles. Grid: (row groups x B tokens, J slots), the
tokens fastest: the B workgroups of one row group (up to MAX_ROWS tokens: a batched decode step's sequences) run together,
so its weights come from DRAM once and from L2 for the other tokens.

What makes it fast is memory-level parallelism (H100 profile, OPTIMIZATION_JOURNAL.md): a lane's loads for all its rows
and chunks are written out one after the other, in batches that fit the registers, before any of their math, so a warp
has many 512-byte loads in flight instead of one per DRAM latency; the first batch is issued before x is staged. x (times
the norm weight) is staged once per workgroup in shared memory, laid out [slot][float4 q of a chunk][chunk], so a warp
reads its 32 chunks' q-th float4s as one contiguous 512-byte row (from global memory those reads touched 32 cache lines
each). Nibbles and bytes become floats by the 2^23 trick (BYTE_F: a byte placed in the mantissa of 2^23, one byte permute
and one add per weight) instead of integer-to-float conversions, which issue at a quarter of the FMA rate.

Q4_0 and Q8_0 go further: their weights are small integers times a scale per 32, so each workgroup rounds its staged x
to 24-bit integers times a scale per block of 32 (max |x| / 8323072, rounded half away from zero: X24_SPLIT) and the math
is integer DP4A. An x value is split into three signed bytes (X = 65536 h + 256 m + l), so one weight word meets x in
three DP4A: 8 weights in 3 instructions against ~3 float instructions per weight. In these one-wave decode matvecs a warp
issues all its loads and then computes, so math is time the memory system idles (OPTIMIZATION_JOURNAL.md). 24 bits keep
the product fp32-accurate; 16 bits (two DP4A) were within ~1e-5 of float, which is enough to flip a router's near tie
some blocks later (X24_SPLIT); llama.cpp rounds x to 8 bits (q8_1), which moved the test models' logits by 3e-2 to 9e-2
(rejected, the journal). The tests' references round x the same way (test_quantized.x24); the norm's scale (a scalar per
token) applies after the product.

What a kernel computes (buffers in this order: out, x, [sel], [mix], [norm_w], [residual], *packed parts):
  linear   out[b, n] = W[n] . xn[b]                       xn = x, or rms_norm(x) * norm_w with `norm`
  experts  out[b, j, n] = W[sel[b, j]][n] . xn[b] (x (B, K)) or . x[b, j] (x (B, J, K))
  x_stride x rows (slots) x_stride apart, of which the first K are read (a stacked layer's output, q_nope in q)
  x_row    per-slot x: token b's slots start at b * x_row (their heads inside rows of a stacked [q; kv_a] output)
  batched  out[b, e, n] = W[e][n] . x[b, e]
  glu      the W rows are [gate; up] (2F): out[..., f] = silu(gate_f . x) * (up_f . x)
  mix      (experts) out[b, n] = sum_j mix[b, j] * (W[sel[b, j]][n] . x[b, j])
  residual out += residual (same shape as out)
  sum      out[b, n] = the sum of several terms' products (+ the first term's residual): each term is a linear or an
           expert-mix matvec with its own weights (of any type) and x, all rows of one output (a routed experts' down
           and a shared expert's down: one launch, one output write, the shared weights' loads issued before the
           wait and the routed ones right after it)
"""
from __future__ import annotations
import functools, re
from dataclasses import dataclass
from tinygrad import dtypes
from apps.gguf import GGMLType, BLOCK
from apps.kernels import SourceKernel, Param, program, cached, language_of, side_by_side

MAX_ROWS = 8    # tokens (rows of x) a matvec takes; more go to the GEMMs, and so do 5-8 where gemm.FEW_TOKENS says
MAX_ROWS_F32 = 64   # tokens an f32 product takes (the MoE router's, 64 x 2048, which no GEMM takes and whose weight stays in
                    # L2): a workgroup a token and row group, the norm in x's staging, not the portable kernel and the norm's
                    # two kernels (a mixed step of DeepSeek-V2-Lite -0.8 ms, GLM-4.7-Flash -1.1 ms: OPTIMIZATION_JOURNAL.md)

# ---- per type: packed parts (name, element type), weights per lane step (CH), weights per packed block, the loads of one
# lane step and their math. In `load` and `math`, `@` is the item's suffix: the load sees `bi@` (packed block index) and
# `c@` (chunk in the block) and declares its registers; the math reads them and xr[] (the chunk's CH x values, in the
# order `xrun` gives), xsum[h] (the sum of xr[32h .. 32h+31]), and sets `s` to the chunk's dot product. An xint type (CH = 32,
# one x block per chunk) instead reads the block's 32 x values as integers X = 65536 h + 256 m + l (signed bytes, four to
# an int, in order): xh[8], xm[8], xl[8]; dx (their scale: x = dx * X); xqhm and xql, the sums of the 32 (256 h + m) and l.
@dataclass(frozen=True)
class TypeCode:
  parts: tuple[tuple[str, object], ...]
  ch: int
  block: int
  load: str
  math: str
  regs: int                   # registers one item's loads hold (sizes the batches)
  xrun: str = "c*CH + 16*r"   # offset in the block of the chunk's r-th run of 16 x values (xr[16r..16r+15])
  xint: bool = False          # the math reads x as 24-bit integers (xh, xm, xl, dx, xqhm, xql) instead of xr/xsum

# Q4_0 and Q8_0 meet x as 24-bit integers: DP4A multiplies and sums four weights with four bytes of x
_Q4_0 = TypeCode((("d", dtypes.float16), ("qs", dtypes.uint32)), 32, 32, """
    uint4 q@ = ((const GLOBAL uint4*)qs)[bi@]; float d@ = H2F(d[bi@]);""", """
    uint w[4] = {q@.x, q@.y, q@.z, q@.w};
    int th = 0, tm = 0, tl = 0;
    for (int i = 0; i < 4; i++) {
      uint n0 = w[i] & 0x0F0F0F0Fu, n1 = (w[i] >> 4) & 0x0F0F0F0Fu;
      th = DP4A(n0, xh[i], th); th = DP4A(n1, xh[4 + i], th);
      tm = DP4A(n0, xm[i], tm); tm = DP4A(n1, xm[4 + i], tm);
      tl = DP4A(n0, xl[i], tl); tl = DP4A(n1, xl[4 + i], tl);
    }
    s = d@ * dx * ((float)(256*th + tm - 8*xqhm) * 256.0f + (float)(tl - 8*xql));   // the nibbles are the weights + 8""", 5, xint=True)

_Q8_0 = TypeCode((("d", dtypes.float16), ("qs", dtypes.uint32)), 32, 32, """
    uint4 qa@ = ((const GLOBAL uint4*)qs)[2*bi@], qb@ = ((const GLOBAL uint4*)qs)[2*bi@ + 1]; float d@ = H2F(d[bi@]);""", """
    uint w[8] = {qa@.x, qa@.y, qa@.z, qa@.w, qb@.x, qb@.y, qb@.z, qb@.w};
    int th = 0, tm = 0, tl = 0;
    for (int i = 0; i < 8; i++) { th = DP4A(w[i], xh[i], th); tm = DP4A(w[i], xm[i], tm); tl = DP4A(w[i], xl[i], tl); }
    s = d@ * dx * ((float)(256*th + tm) * 256.0f + (float)tl);""", 9, xint=True)

# K-quants: a lane step is 64 weights (chunk c of 4 per 256-weight block); c = 2*c1 + c0, sub-blocks 2c and 2c+1 of 32
_QK_LOAD = """
    const GLOBAL uint4* q4@ = (const GLOBAL uint4*)qs + bi@*8 + (c@ >> 1)*4 + (c@ & 1)*2;
    uint4 qa@ = q4@[0], qb@ = q4@[1];
    uint sc@ = scm[bi@*4 + (c@ >> 1)], mn@ = scm[bi@*4 + (c@ >> 1) + 2];
    float dd@ = H2F(dm[2*bi@]), dmin@ = H2F(dm[2*bi@ + 1]);"""
_QK_MATH = """
    uint w[8] = {qa@.x, qa@.y, qa@.z, qa@.w, qb@.x, qb@.y, qb@.z, qb@.w};
    HIGH_WORDS
    s = 0.0f;
    for (int h = 0; h < 2; h++) {
      float t = 0.0f;
      for (int i = 0; i < 8; i++) {
        uint q = (w[i] >> (4*h)) & 0x0F0F0F0Fu;
        HIGH_BITS
        for (int b = 0; b < 4; b++) t += (BYTE_F(q, b) - 8388608.0f) * xr[32*h + 4*i + b];
      }
      int sh = 16*(c@ & 1) + 8*h;
      s += dd@ * (float)((sc@ >> sh) & 255u) * t - dmin@ * (float)((mn@ >> sh) & 255u) * xsum[h];
    }"""
_Q4_K = TypeCode((("dm", dtypes.float16), ("scm", dtypes.uint32), ("qs", dtypes.uint32)), 64, 256,
                 _QK_LOAD, _QK_MATH.replace("HIGH_WORDS", "").replace("HIGH_BITS", ""), 12)
_Q5_K = TypeCode((("dm", dtypes.float16), ("scm", dtypes.uint32), ("qh", dtypes.uint32), ("qs", dtypes.uint32)), 64, 256,
                 _QK_LOAD + "\n    uint4 ha@ = ((const GLOBAL uint4*)qh)[bi@*2], hb@ = ((const GLOBAL uint4*)qh)[bi@*2 + 1];",
                 _QK_MATH.replace("HIGH_WORDS", "uint hw[8] = {ha@.x, ha@.y, ha@.z, ha@.w, hb@.x, hb@.y, hb@.z, hb@.w};")
                         .replace("HIGH_BITS", "q |= ((hw[i] >> (2*c@ + h)) & 0x01010101u) << 4;"), 20)

# Q6_K: chunk c = (half i = c >> 1, lh = c & 1): 4 runs of 16 weights at i*128 + s4*32 + lh*16 (s4 = 2*s4h + s4l)
_Q6_K = TypeCode((("ql", dtypes.uint32), ("qh", dtypes.uint32), ("sc", dtypes.uint32), ("d", dtypes.float16)), 64, 256, """
    const GLOBAL uint4* l4@ = (const GLOBAL uint4*)ql + bi@*8 + (c@ >> 1)*4 + (c@ & 1);
    uint4 la@ = l4@[0], lb@ = l4@[2];
    uint4 hq@ = ((const GLOBAL uint4*)qh)[bi@*4 + (c@ >> 1)*2 + (c@ & 1)];
    uint sa@ = sc[bi@*4 + (c@ >> 1)*2], sb@ = sc[bi@*4 + (c@ >> 1)*2 + 1];
    float dd@ = H2F(d[bi@]);""", """
    uint lw0[4] = {la@.x, la@.y, la@.z, la@.w}, lw1[4] = {lb@.x, lb@.y, lb@.z, lb@.w}, hw[4] = {hq@.x, hq@.y, hq@.z, hq@.w};
    uint scw[2] = {sa@, sb@};
    s = 0.0f;
    for (int s4h = 0; s4h < 2; s4h++) for (int s4l = 0; s4l < 2; s4l++) {
      float t = 0.0f;
      for (int lw = 0; lw < 4; lw++) {
        uint q = (((s4l ? lw1[lw] : lw0[lw]) >> (4*s4h)) & 0x0F0F0F0Fu) | (((hw[lw] >> (4*s4h + 2*s4l)) & 0x03030303u) << 4);
        for (int b = 0; b < 4; b++) t += (BYTE_F(q, b) - 8388640.0f) * xr[32*s4h + 16*s4l + 4*lw + b];
      }
      int scale = ((int)(scw[s4h] << (24 - 16*s4l - 8*(c@ & 1)))) >> 24;
      s += dd@ * (float)scale * t;
    }""", 15, xrun="(c >> 1)*128 + (c & 1)*16 + 32*r")

_F32 = TypeCode((("w", dtypes.float32),), 8, 8, """
    float4 wa@ = ((const GLOBAL float4*)w)[2*bi@], wb@ = ((const GLOBAL float4*)w)[2*bi@ + 1];""", """
    s = wa@.x*xr[0] + wa@.y*xr[1] + wa@.z*xr[2] + wa@.w*xr[3] + wb@.x*xr[4] + wb@.y*xr[5] + wb@.z*xr[6] + wb@.w*xr[7];""", 8)

_F16 = TypeCode((("w", dtypes.float16),), 8, 8, """
    float w@[8]; for (int i = 0; i < 8; i++) w@[i] = H2F(w[8*bi@ + i]);""", """
    s = 0.0f;
    for (int i = 0; i < 8; i++) s += w@[i] * xr[i];""", 8)

TYPES: dict[GGMLType, TypeCode] = {GGMLType.Q4_0: _Q4_0, GGMLType.Q8_0: _Q8_0, GGMLType.Q4_K: _Q4_K, GGMLType.Q5_K: _Q5_K,
                                   GGMLType.Q6_K: _Q6_K, GGMLType.F32: _F32, GGMLType.F16: _F16}

@dataclass(frozen=True)
class MatvecShape:
  op: str           # linear | experts | batched
  type: GGMLType
  B: int
  J: int            # slots (experts), heads (batched), 1 (linear)
  N: int            # output rows (for glu: F, the W has 2F rows)
  K: int
  E: int            # experts in W (experts, batched), 1 (linear)
  x_per_slot: bool
  norm: bool = False
  residual: bool = False
  glu: bool = False
  mix: bool = False
  x_stride: int = 0 # elements between x rows / slots (0: K); a larger stride reads the first K of each (a stacked output)
  x_row: int = 0    # per-slot x: elements between rows, their slots x_stride apart (0: J * x_stride); a stacked output's heads

BATCH_REGS = 64             # registers one batch of loads holds per lane (the source has batch k+1's loads before batch k's
                            # math; ptxas may hoist more of them, and in the SASS seen it hoists all where registers allow).
                            # H100 decode, 40 -> 64: DSV2 -0.6%, GLM -1.7%, Youtu -0.3%; 96: no better (the journal)
# An expert mix of several rows (a batched step's routed down, summed with the shared down): two workgroups an SM. Its loads
# of six or more experts and a K-quant term, all hoisted, took 160-246 registers (sm_90), one workgroup an SM, whose grid of
# 2-8 waves then ran each wave's loads, x staging and math one after another; at 128 registers (half the batch, ptxas's
# bound for two) it spills nothing; at four rows a warp (eight accumulators) batches of 24 (DeepSeek-V2-Lite's six mix
# weights leave one word on the stack; 32 spilled 96 bytes)
MIX_BLOCKS, MIX_BATCH_REGS, MIX_BATCH_REGS_4 = 2, 32, 24
# x as 24-bit integers: the float4 v of each of 8 lanes (a block of 32 x values) -> its scale d = max |x| / 8323072 (three
# shuffles; 127 * 65536 keeps the top byte signed), X0..X3 = round(v / d), split into three signed bytes X = 65536 h +
# 256 m + l, packed four to an int: wh, wm, wl (byte i: component i). The one rounding of x of the integer kernels (these
# matvecs and the prefill GEMM's apps/kernels/gemm.build_xq). It is ~fp32's own (2^-22 of the block's max at most), so
# their products are fp32-accurate, as the routing of the blocks after them needs: at 16 bits (two bytes) the products
# moved full-size GLM-4.7-Flash's hidden state by 2e-4 over 22 blocks, enough to flip a near tie of a router there and
# the logits by 6e-2 (prefill; decode: DeepSeek-V2-Lite 2e-3, OPTIMIZATION_JOURNAL.md)
X24_SPLIT = """
    float am = FMAX(FMAX(FABS(v.x), FABS(v.y)), FMAX(FABS(v.z), FABS(v.w)));
    am = FMAX(am, SHFL_XOR(am, 1)); am = FMAX(am, SHFL_XOR(am, 2)); am = FMAX(am, SHFL_XOR(am, 4));
    float d = am / 8323072.0f, id = d == 0.0f ? 0.0f : 1.0f / d;
    int X0 = (int)ROUNDF(v.x * id), X1 = (int)ROUNDF(v.y * id), X2 = (int)ROUNDF(v.z * id), X3 = (int)ROUNDF(v.w * id);
    int M0 = (X0 + 128) >> 8, M1 = (X1 + 128) >> 8, M2 = (X2 + 128) >> 8, M3 = (X3 + 128) >> 8;
    int H0 = (M0 + 128) >> 8, H1 = (M1 + 128) >> 8, H2 = (M2 + 128) >> 8, H3 = (M3 + 128) >> 8;
    uint wh = ((uint)H0 & 255u) | (((uint)H1 & 255u) << 8) | (((uint)H2 & 255u) << 16) | ((uint)H3 << 24);
    uint wm = ((uint)(M0 - 256*H0) & 255u) | (((uint)(M1 - 256*H1) & 255u) << 8) | (((uint)(M2 - 256*H2) & 255u) << 16) |
              ((uint)(M3 - 256*H3) << 24);
    uint wl = ((uint)(X0 - 256*M0) & 255u) | (((uint)(X1 - 256*M1) & 255u) << 8) | (((uint)(X2 - 256*M2) & 255u) << 16) |
              ((uint)(X3 - 256*M3) << 24);"""
SHARED_BYTES = {"CUDA": 48 * 1024, "METAL": 32 * 1024}  # static workgroup memory a kernel may declare
SMS = 132                   # multiprocessors of the H100 the plan is tuned on

@dataclass(frozen=True)
class Plan:
  warps: int                # warps per workgroup
  rows: int                 # output rows per warp (R)

Terms = tuple[MatvecShape, ...]  # a sum: out = the terms' products summed (+ the first term's residual), one kernel

def _terms(s: MatvecShape | Terms) -> Terms: return s if isinstance(s, tuple) else (s,)

def summable(terms: Terms) -> bool:
  """Whether matvecs can be one sum kernel: one output (B, N) (linear terms, or expert terms with the mix), no norm or glu
  (each term reads its own x), the residual (added once) only on the first."""
  s0 = terms[0]
  return all(t.B == s0.B and t.N == s0.N and (t.op == "linear" or t.mix) and not (t.norm or t.glu) for t in terms) and \
         not any(t.residual for t in terms[1:])

def staged_slots(s: MatvecShape) -> int:
  """x vectors a workgroup stages: all J slots for the expert mix, else the one it reads."""
  return s.J if s.mix else 1

def plan(s: MatvecShape | Terms) -> Plan:
  """Rows per warp: as many as keep >= 2 workgroups of 4 warps per SM (up to 4: x reuse from registers). Then more warps per
  workgroup while staging x costs more than half the weight bytes of a workgroup (every workgroup reads all of x from L2:
  for a down projection, K = 6144 and 4 rows of 3.4 KB, that was 1.8x the weights) and >= 128 workgroups remain. A sum
  counts all its terms' x and weight bytes. Four rows at four warps become two at eight: the same workgroups."""
  terms = _terms(s)
  s0 = terms[0]
  slots = 1 if s0.mix else s0.J
  groups = lambda warps, r: -(-s0.N // (r * warps)) * slots * s0.B
  # a batched step's routed experts (each token its own experts: thousands of workgroups) at four rows and eight warps:
  # half the workgroups, each staging x once for twice the rows; the gate_up from 4 waves of two an SM, the down with its
  # mix (a workgroup per 32 rows of a token: 192 at three tokens) from 1 wave. H100: the step of 4 DeepSeek-V2-Lite
  # 3.55 -> 3.43 ms, GLM-4.7-Flash 5.24 -> 4.97; GLM-4.7-Flash's steps of 5 and 8 (their routed experts on the matvecs)
  # 7.30 -> 6.49 and 7.50 -> 6.90; the steps of 3 (the mix from 1 wave, not 1.5) -4.7% / -4.5%; the gate_up from 2 waves
  # moved nothing (OPTIMIZATION_JOURNAL.md)
  if s0.op == "experts" and s0.B > 1 and groups(8, 4) >= (1 if s0.mix else 4) * SMS: return Plan(8, 4)
  rows = next((r for r in (4, 2) if groups(4, r) >= 2 * SMS), 1)
  row_bytes = sum(t.K // BLOCK[t.type][0] * BLOCK[t.type][1] * (2 if t.glu else 1) * (t.J if t.mix else 1) for t in terms)
  staged = sum(staged_slots(t) * t.K * 4 for t in terms)
  warps = 4
  while warps < 16 and staged > 0.5 * warps * rows * row_bytes and groups(2 * warps, rows) >= 128: warps *= 2
  # four rows a warp at four warps: the same workgroups as two rows at eight, which give x's staging twice the threads
  # and each warp half the loads and math in a row (Youtu-LLM-2B decode -5.9%, OPTIMIZATION_JOURNAL.md)
  if (rows, warps) == (4, 4): rows, warps = 2, 8
  return Plan(warps, rows)

def _pad(steps: int) -> int: return 1 if steps % 2 == 0 else 2  # row stride of the staged x odd in float4s: no bank conflicts

def _staged_bytes(s: MatvecShape) -> int:
  tc = TYPES[s.type]
  steps = s.K // tc.ch
  per_chunk = (6 * (steps + _pad(steps)) * 16 + steps * 4) if tc.xint else (tc.ch // 4) * (steps + _pad(steps)) * 16
  return staged_slots(s) * per_chunk

def shared_bytes(s: MatvecShape | Terms, p: Plan | None = None) -> int:
  return sum(_staged_bytes(t) for t in _terms(s)) + (p or plan(s)).warps * 4

class _Term:
  """One term of a kernel's sum: its weights, x and expert ids, with the names its code uses (the first term's are the
  plain names, term t's end in _t)."""
  def __init__(self, t: int, s: MatvecShape):
    self.t, self.s, self.tc, self.sx = t, s, TYPES[s.type], "" if t == 0 else f"_{t}"
    tc = self.tc
    assert s.K % tc.block == 0 and tc.block % tc.ch == 0, (s, tc)
    self.nb, self.cpb = s.K // tc.block, tc.block // tc.ch
    self.steps = self.nb * self.cpb              # chunks of CH weights in a row
    self.q4 = tc.ch // 4                         # float4s of x per chunk
    self.sp = self.steps + _pad(self.steps)      # row stride of the staged x, in float4s
    self.rows_w = 2 * s.N if s.glu else s.N      # rows of one expert's W
    self.js = list(range(s.J)) if s.mix else [None]  # the slots a workgroup loops over (None: the one of GID_Y)
    # the type's loads name the packed parts: term t reads its own
    self.load = functools.reduce(lambda code, n: re.sub(rf"\b{n}\b(?!@)", n + self.sx, code), (n for n, _ in tc.parts), tc.load)

  def e(self, j) -> str: return f"e{self.t}" if j is None else f"e{self.t}_{j}"
  def wj(self, j) -> str: return f"wj{self.t}_{j}"

def build(s: MatvecShape | Terms, p: Plan | None = None) -> SourceKernel:
  """The kernel for shape `s`, or for a sum of terms (summable: out = the terms' products summed, plus the first term's
  residual); `p` overrides plan(s) (the tests reach every rows-per-warp on small shapes)."""
  terms = [_Term(t, ts) for t, ts in enumerate(_terms(s))]
  s = terms[0].s
  assert len(terms) == 1 or summable(tuple(T.s for T in terms)), terms
  p = p or plan(tuple(T.s for T in terms))
  R, W, slots = p.rows, p.warps, (1 if s.mix else s.J)
  # lanes a row in a batched step: half a warp where a term's row leaves a last chunk of at most 16 steps (K = 1408: 44
  # steps, 48 lane slots at 16 lanes against 64 at 32, whose last chunk idles 20 lanes), each half its own RH = R / 2 rows.
  # H100: steps of 2-8 tokens -0.3% to -4% on all three models. A step of one token keeps whole warps (Youtu-LLM-2B's q_b:
  # each lane would reuse its x over fewer rows; its step read +1.5% in one pair)
  LW = 16 if s.B > 1 and R % 2 == 0 and any(0 < T.steps % 32 <= 16 for T in terms) else 32
  RH = R * LW // 32
  spl = lambda T: -(-T.steps // LW)   # chunks per lane of a row (the last one partial if steps % LW)
  nacc = 2 * RH if s.glu else RH
  params = [Param("out", dtypes.float32, True)]
  for T in terms:
    params.append(Param("x" + T.sx, dtypes.float32))
    if T.s.op == "experts": params.append(Param("sel" + T.sx, dtypes.int32))
    if T.s.mix: params.append(Param("mix" + T.sx, dtypes.float32))
    if T.s.norm: params.append(Param("norm_w", dtypes.float32, weight=True))
    if T.s.residual: params.append(Param("residual", dtypes.float32))
    params += [Param(n + T.sx, dt, weight=True) for n, dt in T.tc.parts]
  jname = lambda j: "j" if j is None else str(j)

  # ---- prologue: slot, expert(s), the expert mix weights; what reads the expert ids comes after GRID_WAIT()
  pre, post = [], []
  for T in terms:
    for j in T.js:
      if T.s.op == "experts":
        e = T.e(j)
        post.append(f"int {e} = sel{T.sx}[b*{T.s.J} + {jname(j)}]; {e} = {e} < 0 ? 0 : ({e} >= {T.s.E} ? {T.s.E - 1} : {e});")
      else: pre.append(f"int {T.e(j)} = {'j' if T.s.op == 'batched' else '0'};")
      if T.s.mix: post.append(f"float {T.wj(j)} = mix{T.sx}[b*{T.s.J} + {j}];")

  # ---- items: (term, slot, lane chunk u, accumulator a) in batches that fit BATCH_REGS, a term's own batches (terms
  # without expert ids first: their loads can go before GRID_WAIT()); batch k+1's loads are issued before batch k's math,
  # so a warp always has a batch in flight while it computes
  batches, mixes = [], any(T.s.mix for T in terms) and s.B > 1
  for T in sorted(terms, key=lambda T: T.s.op == "experts"):
    items = [(T, j, u, a) for j in T.js for u in range(spl(T)) for a in range(nacc)]
    per = max(1, ((MIX_BATCH_REGS_4 if R == 4 else MIX_BATCH_REGS) if mixes else BATCH_REGS) // T.tc.regs)
    batches += [items[i:i + per] for i in range(0, len(items), per)]
  def suffix(it):
    T, j, u, a = it
    return f"{T.sx}_{'s' if j is None else j}_{u}_{a}"
  def loads(batch):
    out = []
    for it in batch:
      T, j, u, a = it
      sf = suffix(it)
      n = f"min(row0 + hw*RH + {a % RH}, N - 1)"
      wrow = (n if a < RH else f"N + {n}") if s.glu else n
      partial = T.steps % LW != 0 and u == spl(T) - 1
      st = f"min(sub + {LW * u}, {T.steps - 1})" if partial else f"sub + {LW * u}"
      out.append(f"int st{sf} = {st}, ib{sf} = st{sf} / {T.cpb}, c{sf} = st{sf} - ib{sf} * {T.cpb};")
      out.append(f"int bi{sf} = ({T.e(j)} * {T.rows_w} + {wrow}) * {T.nb} + ib{sf};")
      out.append(T.load.replace("@", sf).strip())
    return "\n  ".join(out)
  def maths(batch):
    out, cur = [], None
    for it in batch:
      T, j, u, a = it
      sf, tc, sp = suffix(it), T.tc, T.sp
      if (T.t, j, u) != cur:
        if cur is not None: out.append("}")
        cur = (T.t, j, u)
        guard = f"if (sub + {LW * u} < {T.steps}) " if T.steps % LW != 0 and u == spl(T) - 1 else ""
        slot = 0 if j is None else j
        out.append(f"{guard}{{  // term {T.t}, slot {jname(j)}, chunk {u}")
        xi = f"sub + {LW * u}"
        if tc.xint:
          xq4 = "xq4" + T.sx
          for part, name in enumerate("lmh"):
            out.append(f"  uint4 {name}a = {xq4}[{6 * slot + 2 * part}*{sp} + {xi}], {name}b = {xq4}[{6 * slot + 2 * part + 1}*{sp} + {xi}];")
            out.append(f"  int x{name}[8] = {{(int){name}a.x, (int){name}a.y, (int){name}a.z, (int){name}a.w, "
                       f"(int){name}b.x, (int){name}b.y, (int){name}b.z, (int){name}b.w}};")
          out.append(f"  float dx = xd{T.sx}[{slot * T.steps} + {xi}];")
          out.append("  int xql = 0, xqm = 0, xqh = 0;")
          out.append("  for (int i = 0; i < 8; i++) { xqh = DP4A(xh[i], 0x01010101, xqh); xqm = DP4A(xm[i], 0x01010101, xqm); "
                     "xql = DP4A(xl[i], 0x01010101, xql); }")
          out.append("  int xqhm = 256*xqh + xqm;")
        else:
          out.append(f"  float xr[{tc.ch}], xsum[{max(1, tc.ch // 32)}];")
          out.append(f"  for (int q = 0; q < {T.q4}; q++) {{ float4 v = xs4{T.sx}[({slot * T.q4} + q) * {sp} + {xi}]; "
                     "xr[4*q] = v.x; xr[4*q+1] = v.y; xr[4*q+2] = v.z; xr[4*q+3] = v.w; }")
          if tc.ch >= 64: out.append(f"  for (int h = 0; h < {tc.ch // 32}; h++) {{ xsum[h] = 0.0f; for (int i = 0; i < 32; i++) xsum[h] += xr[32*h + i]; }}")  # noqa: E501
      wj = f" * {T.wj(j)}" if T.s.mix else ""
      out.append(f"  {{ float s;{tc.math.replace('@', sf)}\n    acc[{a}] += s{wj}; }}")
    out.append("}")
    return "\n  ".join(out)

  # ---- x staging, read in x's order (coalesced), written to xs4[(slot*Q4 + q)*SP + st] = the q-th float4 of chunk st's
  # x values (times norm_w): in the math a warp reads 32 consecutive float4s. xint types stage integer blocks instead.
  # with `norm`: the squares summed for the rms scale, and x times the norm weight (read as the load of x is guarded)
  normed = lambda pre, post: f"""
    ss += v.x*v.x + v.y*v.y + v.z*v.z + v.w*v.w;
    float4 g = {pre}*(const GLOBAL float4*)(norm_w + ko){post};
    v = FLOAT4(v.x*g.x, v.y*g.y, v.z*g.z, v.w*g.w);"""
  stage, shared = "float ss = 0.0f;", []
  for T in terms:
    ts, tc, sp, steps, staged, x = T.s, T.tc, T.sp, T.steps, staged_slots(T.s), "x" + T.sx
    run = min(16, tc.ch)
    xrun = tc.xrun.replace("CH", str(tc.ch)).replace("16*r", f"{run}*r")
    xs = ts.x_stride or ts.K
    xbase = f"(b*{ts.J} + js)*{xs}" if ts.mix else (f"b*{ts.x_row} + j*{xs}" if ts.x_row else f"(b*{ts.J} + j)*{xs}") if ts.x_per_slot \
      else f"b*{xs}"
    if tc.xint:
      # a block of 32 x values per 8 lanes (a float4 each), four blocks per warp step: the block's max |x| from 3 shuffles;
      # X = round(x / dx) splits into signed bytes X = 65536 h + 256 m + l (X24_SPLIT); each lane packs its 4 bytes of
      # each into three ints, and the block's first and fifth lanes gather 4 of each into uint4s of xq4[(slot*6 + part)*SP
      # + st], parts l0-15, l16-31, m0-15, m16-31, h0-15, h16-31 (uniform trip counts: every lane of a warp takes part in
      # every shuffle)
      shared.append(f"SHARED uint4 xq4{T.sx}[{staged * 6 * sp}];\n  SHARED float xd{T.sx}[{staged * steps}];")
      stage += f"""
  for (int base = warp * 4; base < {staged * steps}; base += {4 * W}) {{
    int u = base + lane / 8, e = lane % 8, ok = u < {staged * steps};
    int st = ok ? u % {steps} : 0, js = ok ? u / {steps} : 0, ko = st*32 + 4*e;
    float4 v = ok ? *(const GLOBAL float4*)({x} + {xbase} + ko) : FLOAT4(0.0f, 0.0f, 0.0f, 0.0f);"""
      if ts.norm: stage += normed("ok ? ", " : FLOAT4(0.0f, 0.0f, 0.0f, 0.0f)")
      stage += X24_SPLIT + f"""
    uint l1 = SHFL_XOR(wl, 1), l2 = SHFL_XOR(wl, 2), l3 = SHFL_XOR(wl, 3);
    uint m1 = SHFL_XOR(wm, 1), m2 = SHFL_XOR(wm, 2), m3 = SHFL_XOR(wm, 3);
    uint h1 = SHFL_XOR(wh, 1), h2 = SHFL_XOR(wh, 2), h3 = SHFL_XOR(wh, 3);
    if (ok && (e & 3) == 0) {{
      xq4{T.sx}[(js*6 + e/4)*{sp} + st] = UINT4(wl, l1, l2, l3);
      xq4{T.sx}[(js*6 + 2 + e/4)*{sp} + st] = UINT4(wm, m1, m2, m3);
      xq4{T.sx}[(js*6 + 4 + e/4)*{sp} + st] = UINT4(wh, h1, h2, h3);
    }}
    if (ok && e == 0) xd{T.sx}[u] = d;
  }}"""
    else:
      shared.append(f"SHARED float4 xs4{T.sx}[{staged * T.q4 * sp}];")
      stage += f"""
  for (int idx = tid; idx < {staged * steps * T.q4}; idx += {32 * W}) {{
    int q = idx % {T.q4}, t2 = idx / {T.q4}, st = t2 % {steps}, js = t2 / {steps};
    int ib = st / {T.cpb}, c = st - ib * {T.cpb}, r = (4*q) / {run};
    int ko = ib*{tc.block} + {xrun} + (4*q) % {run};
    float4 v = *(const GLOBAL float4*)({x} + {xbase} + ko);"""
      if ts.norm: stage += normed("", "")
      stage += f"\n    xs4{T.sx}[(js*{T.q4} + q)*{sp} + st] = v;\n  }}"
  if s.norm: stage += """
  ss = WARP_SUM(ss);
  if (lane == 0) part[warp] = ss;"""
  stage += "\n  BARRIER();"
  if s.norm: stage += f"\n  rs = 1.0f / sqrt(({' + '.join(f'part[{w}]' for w in range(W))}) / (float)K + EPS);"

  final = "float v = acc[r]"
  if s.norm: final += " * rs"
  if s.glu: final = "float g = acc[r]" + (" * rs" if s.norm else "") + ", u = acc[RH + r]" + (" * rs" if s.norm else "") + \
                    ";\n      float v = g / (1.0f + exp(-g)) * u"
  out_idx = "b*N + n" if s.mix or s.op == "linear" else "(b*J + j)*N + n"
  if s.residual: final += f";\n      v += residual[{out_idx}]"
  # programmatic dependent launch: the weights are read before GRID_WAIT() (the previous kernel may still run), x and the
  # rest after it; an expert term's weights depend on `sel`, so its first batch is issued after the wait, but still
  # before x is staged (a sum's expert loads would otherwise queue behind the staging)
  wait = ["GRID_WAIT();  // from here on, what earlier kernels wrote is visible", *post]
  first_experts = next((k for k, bt in enumerate(batches) if bt[0][0].s.op == "experts"), None)
  early = {0, first_experts} - {None}
  main = [*(wait if first_experts == 0 else []),
          f"// batch 0 of the weight loads: in flight while the previous kernel ends and x is staged\n  {loads(batches[0])}",
          *(wait if first_experts != 0 else [])]
  if first_experts: main.append(f"// batch {first_experts}: the first expert loads, also before x is staged\n  {loads(batches[first_experts])}")
  main.append(stage)
  for k, bt in enumerate(batches):
    if k + 1 < len(batches) and k + 1 not in early: main.append(f"// batch {k + 1}: loads\n  {loads(batches[k + 1])}")
    main.append(f"// batch {k}: math\n  {maths(bt)}")
  nl = "\n  "
  # a row's sum over its lanes: the warp, or its half (lanes xor 8, 4, 2, 1 stay in it)
  rsum = (lambda v: f"{v} = WARP_SUM({v});") if LW == 32 else (lambda v: f"for (int o = 8; o > 0; o >>= 1) {v} += SHFL_XOR({v}, o);")
  body = f"""  const int R = {R}, RH = {RH}, N = {s.N}, K = {s.K}, J = {s.J};
  const float EPS = EPS_VALUE;
  int lane = LID_X, warp = LID_Y, b = GID_X % {s.B}, j = GID_Y, tid = warp * 32 + lane, sub = lane % {LW}, hw = lane / {LW};
  (void)j; (void)K; (void)J; (void)EPS; (void)tid; (void)RH; (void)hw;
  int row0 = (GID_X / {s.B} * {W} + warp) * R;
  {nl.join(shared)}
  SHARED float part[{W}];
  float rs = 1.0f; (void)rs; (void)part;
  {nl.join(pre)}
  float acc[{nacc}];
  for (int a = 0; a < {nacc}; a++) acc[a] = 0.0f;
  {nl.join(main)}
  for (int r = 0; r < RH; r++) {{
    int n = row0 + hw*RH + r;
    {"" if not s.glu else rsum("acc[RH + r]")}
    {rsum("acc[r]")}
    if (sub == 0 && n < N) {{
      {final};
      out[{out_idx}] = v;
    }}
  }}"""
  name = lambda s: f"{s.type.name.lower()}_{s.op}_{s.B}_{s.J}_{s.N}_{s.K}" + (f"_xs{s.x_stride}" if s.x_stride else "") + \
                   (f"_xr{s.x_row}" if s.x_row else "") + "".join(f"_{f}" for f in ("norm", "residual", "glu", "mix") if getattr(s, f))
  return SourceKernel("mv_" + "_plus_".join(name(T.s) for T in terms), tuple(params), body, (-(-s.N // (R * W)) * s.B, slots, 1), (32, W, 1),
                      min_blocks=MIX_BLOCKS if mixes else 1)

def _with_eps(k: SourceKernel, eps: float) -> SourceKernel:
  from dataclasses import replace
  return replace(k, body=k.body.replace("EPS_VALUE", f"{float(eps)!r}f" if "e" not in repr(float(eps)) else f"{float(eps):.9e}f"))

def supports(s: MatvecShape | Terms, language: str = "CUDA") -> bool:
  terms = _terms(s)
  if len(terms) > 1 and not summable(terms): return False
  for t in terms:
    if t.type not in TYPES or t.B > (MAX_ROWS_F32 if t.type == GGMLType.F32 else MAX_ROWS): return False
    tc = TYPES[t.type]
    if t.K % tc.block or t.K % 4: return False
    if t.x_stride and (t.x_stride < t.K or t.x_stride % 4): return False
    if t.x_row and (not t.x_per_slot or t.mix or t.x_row < t.J * (t.x_stride or t.K) or t.x_row % 4): return False
    if t.mix and t.op != "experts": return False
    if t.norm and t.x_per_slot: return False
  return shared_bytes(terms) <= SHARED_BYTES[language]

@cached
def kernel(s: MatvecShape | Terms, eps: float, device: str, trigger: bool = True):
  """The custom_kernel body for shape `s` (or a sum of terms, supported) on `device` (a CUDA or Metal device); trigger=False:
  without GRID_TRIGGER() (Fusions.trigger off; callers pass it only then, so the default form has one cache entry)."""
  return program(_with_eps(build(s), eps), device, trigger)

def side_by_side_plans(shapes: tuple[MatvecShape, ...]) -> list[Plan]:
  """The plans of matvecs run side by side: the most warps any of them plans; an expert term its own plan's rows per warp,
  a linear one (the shared expert beside the routed ones) one row. The launch runs at the registers of its hungriest
  term, and a K-quant's rows cost registers: DeepSeek-V2-Lite's shared Q5_K gate_up at two rows took 168 (3 workgroups
  of 4 warps an SM) against the routed Q4_0 term's 128 at four rows (4), at one row 127; decode -2.3%
  (OPTIMIZATION_JOURNAL.md; measured before plan() turned four rows at four warps into two at eight)."""
  warps = max(plan(s).warps for s in shapes)
  return [Plan(warps, 1 if s.op == "linear" else plan(s).rows) for s in shapes]

@cached
def kernel_side_by_side(shapes: tuple[MatvecShape, ...], eps: tuple[float, ...], device: str, trigger: bool = True):
  """One launch computing several matvecs side by side (kernels.side_by_side), each with its own plan's rows per warp and
  the most warps any of them plans; None when one is not supported or their workgroup memory together does not fit.
  trigger as kernel's."""
  language = language_of(device)
  if language is None or not all(supports(s, language) for s in shapes): return None
  plans = side_by_side_plans(shapes)
  if sum(shared_bytes(s, p) for s, p in zip(shapes, plans)) > SHARED_BYTES[language]: return None
  ks = [_with_eps(build(s, p), e) for s, p, e in zip(shapes, plans, eps)]
  return program(side_by_side("+".join(k.name for k in ks), ks), device, trigger)

def available(device: str) -> bool: return language_of(device) is not None
