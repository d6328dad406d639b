"""Prefill products on packed GGUF weights: out[t, n] = W[n] . x[t] for a chunk of tokens (more than the decode matvecs
take), the routed-expert product out[t, j, n] = W[sel[t, j]][n] . x[t] (or x[t, j]) and the per-slot product
out[t, j, n] = W[j][n] . x[t, j] (MLA's k_b and v_b). Two kernels of one tiling (a workgroup owns tokens x rows of out,
steps of 32 weights of K, the loads of step k + 1 in flight during step k's math, token groups past a tile's entries
skip the math):

The tensor-core kernel (`build_mma`, CUDA sm_80+, what the H100 runs). x is first rounded to 24-bit integers per block
of 32 (`build_xq`: X = round(x / dx), dx = max |x| / 8323072, split into signed bytes h, m and l with X = 65536 h + 256 m
+ l), into records laid out as mma.sync's B fragments. The weights stay integers too: a Q4_0 block's word t holds its
weights 4t.. and 16 + 4t.. (the A fragment's k order), so a lane loads its rows' words straight into the fragment
(nibbles to signed bytes, no float dequantization); each 16 x 8 x 32 tile of the product is three mma.sync (h, m, l) into
int32, put together and scaled by the row's and the token's scale into fp32 (the K-quants' mins through the block's sum
of X; Q6_K's two scales per 32 through two k = 16 mma). So the result is the product of the rounded x, held to the fp32
bound against x24(x) and gguf-py's dequantization; x24's rounding is about fp32's own, so the product is fp32-accurate.
It has to be: at 16 bits (two mma.sync) the products moved full-size GLM-4.7-Flash's hidden state by 2e-4 over 22 blocks,
enough to flip a near tie of a later router and move the prompt's logits by 6e-2 (OPTIMIZATION_JOURNAL.md). A linear
product's rms norm goes into x's rounding (x * norm_w rounded, 1 / rms in dx) and its SwiGLU into the store (a warp's
row blocks in gate / up pairs). x records reach shared memory by cp.async, two steps double-buffered. A product of at most
64 tokens (a batched decode step's 16 or 32 sequences, or a step with a prompt's chunk as further rows) splits K over
workgroups (`split_k`): its tokens make one tile, so unsplit it would be N / 64 workgroups each streaming its rows' whole
K with few loads in flight; the slices' sums are added up by a tensor op, which then applies SwiGLU and the residual (H200,
Youtu-LLM-2B decode of 16 sequences: 2,658 -> 5,395 tok/s, OPTIMIZATION_JOURNAL.md); a SwiGLU product's slices go to the
next product's x quantization instead, where that is their reader (build_xq's glu). Such a step's routed experts (up to 32
tokens) split too, in tiles of a few entries (an expert's entries are at most its tokens): the workgroups that run are the
chosen experts' row bands, so unsplit they were few, each streaming K whole; their expert mix is the tensor ops' after
the slices' sum.

The CUDA-core kernel (`build`, Metal and older CUDA): per step it dequantizes its rows' 32 weights exactly (as gguf-py:
d * (q - offset), or (d * sc) * q - (dmin * m) for the K-quants, in fp32) and stages x in shared memory, both k-major as
float4s of 4 rows / 4 tokens, and every thread accumulates 4 x 4 of out from two float4 reads per k (16 FMA), in fp32:
the result is the float product.

apps/dispatch.py asks this module first for every product of more tokens than the matvecs take (matvec.MAX_ROWS) (H100 prefill 512 A/Bs with
`python3 -m tools.ab prefill`, OPTIMIZATION_JOURNAL.md: CUDA-core kernel against the portable kernels +44% Youtu-LLM-2B, +8%
DeepSeek-V2-Lite, +2.5% / +63% more with its loads one step ahead; the tensor-core kernel against it +40% / +93% / +126%
on GLM-4.7-Flash, and its later steps up to +30% more).

Experts: a workgroup owns one expert and a band of rows; it first lists the (token, slot) entries of sel that chose its
expert (a prefix sum over sel in shared memory, in entry order), then runs tiles of those entries (16 or 64 in the tensor-core
kernel, 16 in the CUDA-core one), gathering x rows
and scattering out rows. Each expert's weights are read once per chunk instead of once per token, and workgroups of
experts nobody chose end after the scan.

Buffers: out (T, N) | (T, J, N), x (T, K) | (T, J, K) with x_per_slot (the tensor-core kernel: x's records instead),
[sel (T, J) int32], [residual (T, N)], then the packed parts of W (apps/packed.py's layouts: Q4_0 / Q8_0 d, qs; Q4_K
dm, scm, qs; Q5_K dm, scm, qh, qs; Q6_K ql, qh, sc, d).
"""
from __future__ import annotations
from dataclasses import dataclass, replace
from math import prod
from tinygrad import dtypes
from apps.gguf import GGMLType, BLOCK
from apps.kernels import SourceKernel, Param, program, cached, language_of, has_mma, matvec

KB = 32          # weights of K per step of the loop (one packed block, or one sub-block of a K-quant's 256)

@dataclass(frozen=True)
class GemmType:
  parts: tuple[tuple[str, object], ...]  # the packed parts (name, element type), in apps/packed.py's order
  words: int     # items of a row's 32 weights of a step, one thread's load each
  per_word: int  # weights per item
  regs: str      # the registers a thread holds for its 4 rows between the load and the dequantization
  load: str      # row i's item p of step s (the sub-block in the packed block bi) into the registers
  dequant: str   # v[0 .. per_word) = row i's weights of item p (at k offsets koffs(b) of the step) from the registers
  koffs: str     # k offset in the step of weight b of item p (C expression in p, b)

# Q4_0: byte j of the block holds weight j (low nibble) and weight j + 16 (high); word p = bytes 4p..4p+3
_Q4_0 = GemmType((("d", dtypes.float16), ("qs", dtypes.uint32)), 4, 8, "uint rq@; half rd@;",
  "rq@ = qs[bi*4 + p]; rd@ = d[bi];", """
      uint lo = rq@ & 0x0F0F0F0Fu, hi = (rq@ >> 4) & 0x0F0F0F0Fu;
      float dw = H2F(rd@);
      v[0] = BYTE_F(lo, 0); v[1] = BYTE_F(lo, 1); v[2] = BYTE_F(lo, 2); v[3] = BYTE_F(lo, 3);
      v[4] = BYTE_F(hi, 0); v[5] = BYTE_F(hi, 1); v[6] = BYTE_F(hi, 2); v[7] = BYTE_F(hi, 3);
      for (int b = 0; b < 8; b++) v[b] = dw * (v[b] - 8388616.0f);""", "(b < 4 ? 4*p + b : 16 + 4*p + b - 4)")
# Q8_0: 32 int8 weights, word p = weights 4p..4p+3
_Q8_0 = GemmType((("d", dtypes.float16), ("qs", dtypes.uint32)), 8, 4, "uint rq@; half rd@;",
  "rq@ = qs[bi*8 + p]; rd@ = d[bi];", """
      uint u = rq@ ^ 0x80808080u;   // int8 + 128
      float dw = H2F(rd@);
      for (int b = 0; b < 4; b++) v[b] = dw * (BYTE_F(u, b) - 8388736.0f);""", "4*p + b")
# Q4_K / Q5_K: sub-block s of 32 = the low (s even) or high nibbles of qs bytes 32 (s >> 1) .. + 31, scale and min = byte s
# of scm's first and last two words; Q5_K's fifth bit of weight l is bit s of qh byte l
_QK_LOAD = "rq@ = qs[bi*32 + 8*(s >> 1) + p]; rsc@ = scm[bi*4 + (s >> 2)]; rmn@ = scm[bi*4 + 2 + (s >> 2)]; rd@ = dm[2*bi]; rdm@ = dm[2*bi + 1];"
_QK_DEQUANT = """
      uint q = (rq@ >> (4*(s & 1))) & 0x0F0F0F0Fu;HIGH
      float dsc = H2F(rd@) * (float)((rsc@ >> (8*(s & 3))) & 255u), mn = H2F(rdm@) * (float)((rmn@ >> (8*(s & 3))) & 255u);
      for (int b = 0; b < 4; b++) v[b] = dsc * (BYTE_F(q, b) - 8388608.0f) - mn;"""
_Q4_K = GemmType((("dm", dtypes.float16), ("scm", dtypes.uint32), ("qs", dtypes.uint32)), 8, 4,
  "uint rq@, rsc@, rmn@; half rd@, rdm@;", _QK_LOAD, _QK_DEQUANT.replace("HIGH", ""), "4*p + b")
_Q5_K = GemmType((("dm", dtypes.float16), ("scm", dtypes.uint32), ("qh", dtypes.uint32), ("qs", dtypes.uint32)), 8, 4,
  "uint rq@, rsc@, rmn@, rh@; half rd@, rdm@;", _QK_LOAD + " rh@ = qh[bi*8 + p];",
  _QK_DEQUANT.replace("HIGH", "\n      q |= ((rh@ >> s) & 0x01010101u) << 4;"), "4*p + b")
# Q6_K: sub-block s = 4 h + g: low 4 bits = nibble g >> 1 of ql bytes 64 h + 32 (g & 1) + l, high 2 bits = bits 2g, 2g + 1 of
# qh byte 32 h + l; the int8 scale of weights l = 16 r .. is sc byte 2 s + r; weight = (d * scale) * (q - 32)
_Q6_K = GemmType((("ql", dtypes.uint32), ("qh", dtypes.uint32), ("sc", dtypes.uint32), ("d", dtypes.float16)), 8, 4,
  "uint rl@, rh@, rs@; half rd@;",
  "rl@ = ql[bi*32 + 16*(s >> 2) + 8*(s & 1) + p]; rh@ = qh[bi*16 + 8*(s >> 2) + p]; rs@ = sc[bi*4 + ((2*s + (p >> 2)) >> 2)]; rd@ = d[bi];", """
      uint q = ((rl@ >> (4*((s & 3) >> 1))) & 0x0F0F0F0Fu) | (((rh@ >> (2*(s & 3))) & 0x03030303u) << 4);
      float ds = H2F(rd@) * (float)((int)(rs@ << (24 - 8*((2*s + (p >> 2)) & 3))) >> 24);
      for (int b = 0; b < 4; b++) v[b] = ds * (BYTE_F(q, b) - 8388640.0f);""", "4*p + b")

TYPES: dict[GGMLType, GemmType] = {GGMLType.Q4_0: _Q4_0, GGMLType.Q8_0: _Q8_0, GGMLType.Q4_K: _Q4_K, GGMLType.Q5_K: _Q5_K,
                                   GGMLType.Q6_K: _Q6_K}

@dataclass(frozen=True)
class GemmShape:
  type: GGMLType
  T: int                    # tokens (rows of x and out)
  N: int                    # rows of W (columns of out); per expert for experts
  K: int
  J: int = 1                # experts: slots per token
  E: int = 0                # experts: experts in W (0: a plain linear product)
  x_per_slot: bool = False  # experts: x (T, J, K), one row per slot
  batched: bool = False     # every slot j its own expert j (J = E, x (T, J, K), no sel): MLA's per-head k_b and v_b
  residual: bool = False    # linear: out = W . x + residual (T, N), the residual add in the store
  glu: bool = False         # linear / experts, tensor-core kernel: W's (an expert's) rows are [gate; up] (2N): out = silu(gate . x) * (up . x)
  x_stride: int = 0         # tensor-core kernel: elements between x's rows (slots); 0: K. Wider rows: the first K are the input
                            # (a stacked output's part), read in place by the x quantization
  split: int = 1            # tensor-core kernel: K in this many slices, a workgroup each (grid z; experts: y); out (split, T[, J], rows of W)
                            # holds each slice's sums as they are (no residual, no SwiGLU: apps/dispatch.launch adds them up)

  @property
  def experts(self) -> bool: return self.E > 0 and not self.batched

  @property
  def tile(self) -> tuple[int, int]:
    """(tokens, rows) of out per workgroup, each thread 4 x 4 of them. An expert's tile is narrow and tall: a chunk gives an
    expert few entries (~12 of a 128-token DeepSeek-V2-Lite chunk's 768), so 64-token tiles were mostly padding, and a
    workgroup's weights in flight per step (its rows x 32 weights) are what bounds these memory-bound products. A dense
    product takes 64 rows and as many tokens (64, 32 or 16) as leave two workgroups per SM (a 128-token chunk of a 2048-row
    product made 64 workgroups of 64 x 64: half the SMs idle)."""
    if self.experts: return (16, 128)
    tt = 64
    while tt > 16 and -(-self.N // 64) * -(-self.T // tt) * (self.E if self.batched else 1) < 2 * matvec.SMS: tt //= 2
    return (tt, 64)

def shared_bytes(s: GemmShape, tile: tuple[int, int] | None = None) -> int:
  tt, tn = tile or s.tile
  return KB * (tt // 4 + 1 + tn // 4 + 1) * 16 + (_list_bytes(s) + (tt // 4) * (tn // 4) * 4 if s.experts else 0)

def supports(s: GemmShape, language: str = "CUDA") -> bool:
  return s.type in TYPES and s.K % BLOCK[s.type][0] == 0 and s.T > 0 and s.N > 0 and s.J > 0 and \
         shared_bytes(s) <= matvec.SHARED_BYTES[language]

def _list_bytes(s: GemmShape) -> int:
  """Workgroup memory of an expert's list of entries, 16 bits each (a chunk of 2048 tokens of DeepSeek-V2-Lite lists
  12,288 entries: 48 KiB as ints, over the static limit with the tensor-core kernel's x records; any list past 65,536
  entries is past that limit too)."""
  return 2 * s.T * s.J

def _entries(s: GemmShape, NT: int, TT: int) -> tuple[str, str, str, str, str]:
  """The rows of a workgroup's tiles, for a kernel of NT threads and tiles of TT entries: (the code that lists them: an
  expert's entries (t*J + j) of sel that chose it, in order, lst[0 .. cnt), by a prefix sum of NT at a time; x's row of
  entry `ent`; the first W row of the workgroup's expert; entry {t} of the tile (a format string); the loop over tiles)."""
  P = s.T * s.J
  if s.experts:
    assert NT % 32 == 0 and P <= 65536, (NT, P)
    # a warp's prefix sum by a butterfly of shuffles (at distance o, the lanes of a group's upper half add the lower half's
    # total), then the warps' totals through shared memory: two barriers per NT entries (a shared-memory scan took 15)
    listing = f"""  int e = GID_Z;
  SHARED unsigned short lst[{P}];
  SHARED int wsum[{NT // 32}];
  int cnt = 0;
  for (int base = 0; base < {P}; base += {NT}) {{
    int i = base + tid, f = 0;
    if (i < {P}) {{ int se = sel[i]; se = se < 0 ? 0 : (se >= {s.E} ? {s.E - 1} : se); f = se == e ? 1 : 0; }}
    int pre = f, tot = f;
    for (int o = 1; o < 32; o <<= 1) {{ int v = SHFL_XOR(tot, o); if (tid & o) pre += v; tot += v; }}
    if (tid % 32 == 0) wsum[tid / 32] = tot;
    BARRIER();
    int all = 0;
    for (int w = 0; w < {NT // 32}; w++) {{ if (w < tid / 32) pre += wsum[w]; all += wsum[w]; }}
    if (f) lst[cnt + pre - 1] = i;
    cnt += all;
    BARRIER();
  }}"""
    return listing, ("ent" if s.x_per_slot else f"ent / {s.J}"), f"e * {2 * s.N if s.glu else s.N} + ", "lst[min(m0 + ({t}), cnt - 1)]", \
           f"for (int m0 = 0; m0 < cnt; m0 += {TT})"
  if s.batched:  # a dense product per slot: entry t*J + e of x and out, expert e's rows
    return "  const int cnt = T, e = GID_Z; (void)cnt;", "ent", f"e * {s.N} + ", f"(min(m0 + ({{t}}), T - 1) * {s.J} + e)", \
           f"int m0 = GID_Y * {TT};"
  return "  const int cnt = T; (void)cnt;", "ent", "", "min(m0 + ({t}), T - 1)", f"int m0 = GID_Y * {TT};"

def build(s: GemmShape, tile: tuple[int, int] | None = None) -> SourceKernel:
  """The kernel for shape `s`; `tile` overrides s.tile (the tests reach every tile on small shapes)."""
  gt = TYPES[s.type]
  assert supports(s) and shared_bytes(s, tile) <= matvec.SHARED_BYTES["CUDA"], s
  TT, TN = tile or s.tile
  NT = (TT // 4) * (TN // 4)          # threads: one 4 x 4 part of out each
  RX, RW = TT // 4 + 1, TN // 4 + 1   # float4s per k of the shared x and W tiles (one of padding: the k-major stores spread over banks)
  NX, NW = (TT // 4) * (KB // 4), (TN // 4) * gt.words  # a step's x items (token group, 4 k) and W items (row group, word)
  rounds = -(-NW // NT)               # W items per thread
  assert NX <= NT
  spb = BLOCK[s.type][0] // KB        # steps per packed block
  nb = s.K // BLOCK[s.type][0]
  params = (Param("out", dtypes.float32, True), Param("x", dtypes.float32), *([Param("sel", dtypes.int32)] if s.experts else []),
            *([Param("residual", dtypes.float32)] if s.residual else []), *(Param(n, dt, weight=True) for n, dt in gt.parts))
  listing, xrow, wrow0, ent, mloop = _entries(s, NT, TT)
  reg = lambda code: code.replace("@", "[r][i]")
  # a thread's part of a step: an x item (threads 0..NX-1: entry group g of 4 entries, 4 k values c; 8 consecutive threads
  # read 128 contiguous bytes of a row) and W items (the threads from NX on, then round the workgroup: row group gw of 4
  # rows, word p of their 32 weights)
  def load(step: str) -> str:
    return f"""{{
      const int kl = {step}, s = kl % {spb};
      (void)s;
      if (tid < {NX} && 4*g < mt) for (int i = 0; i < 4; i++) a[i] = *(const GLOBAL float4*)(x + xr[i] * K + kl * {KB} + 4*c);
      for (int r = 0; r < {rounds}; r++) if (wi[r] < {NW}) {{
        int p = wi[r] % {gt.words}; (void)p;
        for (int i = 0; i < 4; i++) {{ int bi = wr[r][i] + kl / {spb}; {reg(gt.load)} }}
      }}
    }}"""
  store = f"""if (tid < {NX}) {{
        xs4[(4*c + 0) * {RX} + g] = FLOAT4(a[0].x, a[1].x, a[2].x, a[3].x);
        xs4[(4*c + 1) * {RX} + g] = FLOAT4(a[0].y, a[1].y, a[2].y, a[3].y);
        xs4[(4*c + 2) * {RX} + g] = FLOAT4(a[0].z, a[1].z, a[2].z, a[3].z);
        xs4[(4*c + 3) * {RX} + g] = FLOAT4(a[0].w, a[1].w, a[2].w, a[3].w);
      }}
      for (int r = 0; r < {rounds}; r++) if (wi[r] < {NW}) {{
        const int s = ks % {spb}, p = wi[r] % {gt.words}, gw = wi[r] / {gt.words};
        (void)s;
        float rv[4][{gt.per_word}];
        for (int i = 0; i < 4; i++) {{
          float v[{gt.per_word}];{reg(gt.dequant)}
          for (int b = 0; b < {gt.per_word}; b++) rv[i][b] = v[b];
        }}
        for (int b = 0; b < {gt.per_word}; b++) ws4[({gt.koffs}) * {RW} + gw] = FLOAT4(rv[0][b], rv[1][b], rv[2][b], rv[3][b]);
      }}"""
  body = f"""  const int T = {s.T}, N = {s.N}, K = {s.K}, NB = {nb}, NS = {s.K // KB};
  (void)T;
  int tx = LID_X, ty = LID_Y, tid = ty * {TN // 4} + tx;
  int n0 = GID_X * {TN};
  SHARED float4 xs4[{KB * RX}];   // [k][token group]: x[4g .. 4g + 3 of the tile][k0 + k]
  SHARED float4 ws4[{KB * RW}];   // [k][row group]: W[n0 + 4g .. 4g + 3][k0 + k]
  GRID_WAIT();
{listing}
  int g = tid / 8, c = tid % 8;
  int wi[{rounds}], wr[{rounds}][4];   // the W items (row group, word), and their rows' first packed blocks
  for (int r = 0; r < {rounds}; r++) {{
    wi[r] = (tid + {NT - NX}) % {NT} + {NT} * r;
    for (int i = 0; i < 4; i++) wr[r][i] = ({wrow0}min(n0 + 4*(wi[r] / {gt.words}) + i, N - 1)) * NB;
  }}
  {mloop} {{
  int mt = min({TT}, cnt - m0);   // entries of this tile
  int xr[4];   // x rows of the thread's 4 entries
  for (int i = 0; i < 4; i++) {{ int ent = {ent.format(t="4*g + i")}; xr[i] = {xrow}; }}
  float acc[4][4];
  for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
  float4 a[4];
  for (int i = 0; i < 4; i++) a[i] = FLOAT4(0.0f, 0.0f, 0.0f, 0.0f);
  {gt.regs.replace("@", f"[{rounds}][4]")}
  {load("0")}
  for (int ks = 0; ks < NS; ks++) {{
      {store}
    BARRIER();
    if (ks + 1 < NS) {load("ks + 1")}   // step ks + 1's loads: in flight during step ks's math
    // warps whose token groups lie past the tile's entries skip the math (an expert's last tile is part padding)
    if (4*ty < mt) for (int k = 0; k < {KB}; k++) {{
      float4 av4 = xs4[k * {RX} + ty], w = ws4[k * {RW} + tx];
      float av[4] = {{av4.x, av4.y, av4.z, av4.w}}, wv[4] = {{w.x, w.y, w.z, w.w}};
      for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) acc[i][j] += av[i] * wv[j];
    }}
    BARRIER();
  }}
  for (int i = 0; i < 4; i++) {{
    if (4*ty + i >= mt) continue;
    int ent = {ent.format(t="4*ty + i")};
    for (int j = 0; j < 4; j++) if (n0 + 4*tx + j < N) out[ent * N + n0 + 4*tx + j] = acc[i][j]{" + residual[ent * N + n0 + 4*tx + j]" if s.residual else ""};
  }}
  }}"""
  name = f"gemm_{s.type.name.lower()}_{s.T}_{s.N}_{s.K}" + (f"_e{s.E}_j{s.J}" + ("_xs" if s.x_per_slot else "") if s.experts else "") + \
         (f"_batched{s.J}" if s.batched else "") + ("_residual" if s.residual else "")
  grid = (-(-s.N // TN), 1, s.E) if s.experts else (-(-s.N // TN), -(-s.T // TT), s.E if s.batched else 1)
  return SourceKernel(name, params, body, grid, (TN // 4, TT // 4, 1), trigger=False)

# ---- the tensor-core GEMM (CUDA sm_80+): x as 24-bit integers, integer mma.sync per step of 32 weights of K

XQ_WORDS = 28   # uint32 words of one quantized x block (seven uint4s): per lane t of a fragment quad, words 4t..4t+3 = (h
                # word t, h word 4 + t, m word t, m word 4 + t) (word w = bytes of k 4w .. 4w + 3); then dx (float bits), the
                # sums of X over k 0..15 and 16..31, one of padding; then per lane t, words 20 + 2t, 21 + 2t = (l word t, l
                # word 4 + t)
XQ_VECS = XQ_WORDS // 4

def build_xq(R: int, K: int, eps: float | None = None, stride: int = 0, glu: int = 0) -> SourceKernel:
  """x (R, K) float, or its rows `stride` elements apart (the first K of each), -> xq (K / 32, R, XQ_WORDS) uint32: every block of 32 x values of a row as the 24-bit integers X =
  round(x / dx) with dx = max |x| / 8323072, split into signed bytes X = 65536 h + 256 m + l (matvec.X24_SPLIT), laid out
  as the B fragments of mma.sync read them. 8 lanes a block (a float4 each).
  With `glu` = S, x is a split SwiGLU product's slices (S, R, 2K) ([gate; up] a row): x = silu(sum gate) * sum up, made
  here (the product's sum kernel then has no other reader and is never run).
  With `eps` the rows are rms-normed first, as the decode matvecs do it: x * norm_w is rounded and its dx carries the
  row's 1 / rms (a workgroup per row: its float4s and norm_w's loaded once into registers, the sum of squares, then the
  row's blocks from the same registers)."""
  NS, NBLK = K // KB, K // KB * R
  quant = matvec.X24_SPLIT + f"""
  int xs = X0 + X1 + X2 + X3;
  xs += SHFL_XOR(xs, 1); xs += SHFL_XOR(xs, 2);   // the sum over k 0..15 (lanes 0..3) or 16..31 (lanes 4..7)
  int xs16 = SHFL_XOR(xs, 4);
  if (ok) {{
    GLOBAL uint* rec = xq + u * {XQ_WORDS};
    rec[4*(e & 3) + (e >> 2)] = wh; rec[4*(e & 3) + 2 + (e >> 2)] = wm; rec[20 + 2*(e & 3) + (e >> 2)] = wl;
    if (e == 0) {{ rec[16] = AS_UINT(d{" * rs" if eps is not None else ""}); rec[17] = (uint)xs; rec[18] = (uint)xs16; rec[19] = 0u; }}
  }}"""
  params = (Param("xq", dtypes.uint32, True), Param("x", dtypes.float32))
  XS, name = stride or K, f"gemm_xq_{R}_{K}" + (f"_xs{stride}" if stride else "") + (f"_glu{glu}" if glu else "")
  assert not glu or (eps is None and not stride), (glu, eps, stride)
  v = f"float4 v = ok ? *(const GLOBAL float4*)(x + r * {XS} + st * {KB} + 4*e) : FLOAT4(0.0f, 0.0f, 0.0f, 0.0f);"
  if glu: v = f"""float4 v = FLOAT4(0.0f, 0.0f, 0.0f, 0.0f);
  if (ok) {{
    float4 g = v, up = v;
    for (int s = 0; s < {glu}; s++) {{   // the slices in order, as the product's sum kernel adds them
      const GLOBAL float* sl = x + (s * {R} + r) * {2 * K} + st * {KB} + 4*e;
      float4 a = *(const GLOBAL float4*)sl, b = *(const GLOBAL float4*)(sl + {K});
      g = FLOAT4(g.x + a.x, g.y + a.y, g.z + a.z, g.w + a.w); up = FLOAT4(up.x + b.x, up.y + b.y, up.z + b.z, up.w + b.w);
    }}
    v = FLOAT4(g.x / (1.0f + exp(-g.x)) * up.x, g.y / (1.0f + exp(-g.y)) * up.y, g.z / (1.0f + exp(-g.z)) * up.z, g.w / (1.0f + exp(-g.w)) * up.w);
  }}"""
  if eps is None:
    body = f"""  GRID_WAIT();
  int tid = LID_X, u = GID_X * 32 + tid / 8, e = tid % 8, ok = u < {NBLK};   // block u = (step, row), lane e: k 4e .. 4e + 3
  int st = ok ? u / {R} : 0, r = ok ? u % {R} : 0;
  {v}{quant}"""
    return SourceKernel(name, params, body, (-(-NBLK // 32), 1, 1), (256, 1, 1), trigger=False)
  NR = -(-K // 4 // 256)   # float4s of the row a thread holds: loaded once, for the sum of squares and then the blocks
  body = f"""  GRID_WAIT();
  int tid = LID_X, r = GID_X, e = tid % 8;
  SHARED float part[8];
  float4 xv[{NR}], wv[{NR}];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < {NR}; k++) {{   // float4 i = tid + 256 k of the row: block i / 8's lane e (the blocks' mapping below)
    int i = tid + 256 * k, ok = i < {K // 4};
    xv[k] = ok ? *(const GLOBAL float4*)(x + r * {XS} + 4*i) : FLOAT4(0.0f, 0.0f, 0.0f, 0.0f);
    wv[k] = ok ? *(const GLOBAL float4*)(norm_w + 4*i) : FLOAT4(0.0f, 0.0f, 0.0f, 0.0f);
  }}
#pragma unroll
  for (int k = 0; k < {NR}; k++) ss += xv[k].x*xv[k].x + xv[k].y*xv[k].y + xv[k].z*xv[k].z + xv[k].w*xv[k].w;
  ss = WARP_SUM(ss);
  if (tid % 32 == 0) part[tid / 32] = ss;
  BARRIER();
  const float rs = 1.0f / sqrt(({" + ".join(f"part[{w}]" for w in range(8))}) / (float){K} + {float(eps)!r}f);
#pragma unroll
  for (int k = 0; k < {NR}; k++) {{   // the row's blocks, 32 a round (uniform trip counts for the shuffles)
  int st = 32 * k + tid / 8, ok = st < {NS}, u = st * {R} + r;
  float4 v = FLOAT4(xv[k].x * wv[k].x, xv[k].y * wv[k].y, xv[k].z * wv[k].z, xv[k].w * wv[k].w);{quant}
  }}"""
  return SourceKernel(f"{name}_norm", params + (Param("norm_w", dtypes.float32, weight=True),), body, (R, 1, 1), (256, 1, 1), trigger=False)

# a product's integer sum with X = 65536 h + 256 m + l: the mma of h, times 256, accumulates the mma of m (hm = 256 h + m,
# exact in int32), the mma of l apart; the whole can pass 2^31, so it is put together in fp32
_X24 = "DEVFN float X24(int hm, int l) { return (float)hm * 256.0f + (float)l; }"

@dataclass(frozen=True)
class MmaType:
  parts: tuple[tuple[str, object], ...]
  regs: str      # a row's registers for one step, `@` their index
  load: str      # a row's loads of sub-block s (packed block bi) for the lane of quad position t
  frag: str      # A0, A1 (the row's weights at k 4t..4t+3 and 16 + 4t..) and its scales from the registers
  scales: tuple[str, ...]  # the float scales `frag` sets: "ds" (and "mn": weight = ds q - mn; "sc0", "sc1": Q6_K's halves)

# signed bytes from unsigned ones with offset o (bytes in [0, 2o)): v - o per byte, no borrow between bytes
_SUB = lambda v, o: f"(({v} ^ 0x{o:02x}{o:02x}{o:02x}{o:02x}u) | ((({v} ^ 0x{o:02x}{o:02x}{o:02x}{o:02x}u) & 0x{o:02x}{o:02x}{o:02x}{o:02x}u) * {(256 - 2*o) // o}u))"
# Q4_0 / Q8_0's fp16 scales d: an even sub-step U loads the 32 bits of its own and the next one's (sub-step U's register
# holds its pair, `@P` the even sub-step's register; with one sub-step per step, just its own); `U` is the sub-step in the
# step, a constant
_D_PAIR = "if ((U & 1) == 0) rd@ = SB > 1 ? ((const GLOBAL uint*)d)[bi >> 1] : (uint)*(const GLOBAL ushort*)(d + bi);"
_DS_PAIR = "ds = H2F_BITS(rd@P >> (16 * (U & 1)));"
# K-quants: sub-blocks 2i and 2i + 1 are the low and high nibbles of the same qs words and share their scale words, d / dmin
# (one uint) and Q5_K's qh words (Q6_K: qh, sc and d), so a step's even sub-step U loads them for itself and U + 1 (`@P`: the
# even sub-step's register); steps of two sub-steps start at an even sub-block, steps of one load every sub-step
_qk_pair = lambda more="": ("if ((U & 1) == 0) { rq@ = qs[bi*32 + 8*(s >> 1) + t]; rp@ = qs[bi*32 + 8*(s >> 1) + 4 + t]; "
                            f"rsc@ = scm[bi*4 + (s >> 2)]; rmn@ = scm[bi*4 + 2 + (s >> 2)]; rdm@ = ((const GLOBAL uint*)dm)[bi]; {more}}}")
_QK_FRAG_Q = "A0 = (rq@P >> (4*(s & 1))) & 0x0F0F0F0Fu; A1 = (rp@P >> (4*(s & 1))) & 0x0F0F0F0Fu; "
_QK_FRAG_S = ("ds = H2F_BITS(rdm@P) * (float)((rsc@P >> (8*(s & 3))) & 255u); "
              "mn = H2F_BITS(rdm@P >> 16) * (float)((rmn@P >> (8*(s & 3))) & 255u);")
MMA_TYPES: dict[GGMLType, MmaType] = {
  GGMLType.Q4_0: MmaType(_Q4_0.parts, "uint rq@, rd@;", "rq@ = qs[bi*4 + t]; " + _D_PAIR,
    f"uint lo = rq@ & 0x0F0F0F0Fu, hi = (rq@ >> 4) & 0x0F0F0F0Fu; A0 = {_SUB('lo', 8)}; A1 = {_SUB('hi', 8)}; " + _DS_PAIR, ("ds",)),
  GGMLType.Q8_0: MmaType(_Q8_0.parts, "uint rq@, rp@, rd@;", "rq@ = qs[bi*8 + t]; rp@ = qs[bi*8 + 4 + t]; " + _D_PAIR,
    "A0 = rq@; A1 = rp@; " + _DS_PAIR, ("ds",)),
  GGMLType.Q4_K: MmaType(_Q4_K.parts, "uint rq@, rp@, rsc@, rmn@, rdm@;", _qk_pair(), _QK_FRAG_Q + _QK_FRAG_S, ("ds", "mn")),
  GGMLType.Q5_K: MmaType(_Q5_K.parts, "uint rq@, rp@, rsc@, rmn@, rdm@, rh@, rg@;", _qk_pair("rh@ = qh[bi*8 + t]; rg@ = qh[bi*8 + 4 + t]; "),
    "A0 = ((rq@P >> (4*(s & 1))) & 0x0F0F0F0Fu) | (((rh@P >> s) & 0x01010101u) << 4); "
    "A1 = ((rp@P >> (4*(s & 1))) & 0x0F0F0F0Fu) | (((rg@P >> s) & 0x01010101u) << 4); " + _QK_FRAG_S, ("ds", "mn")),
  GGMLType.Q6_K: MmaType(_Q6_K.parts, "uint rl@, rm@, rh@, rg@, rs@; half rd@;",
    "rl@ = ql[bi*32 + 16*(s >> 2) + 8*(s & 1) + t]; rm@ = ql[bi*32 + 16*(s >> 2) + 8*(s & 1) + 4 + t]; "
    "if ((U & 1) == 0) { rh@ = qh[bi*16 + 8*(s >> 2) + t]; rg@ = qh[bi*16 + 8*(s >> 2) + 4 + t]; rs@ = sc[bi*4 + (s >> 1)]; rd@ = d[bi]; }",
    "uint q0 = ((rl@ >> (4*((s & 3) >> 1))) & 0x0F0F0F0Fu) | (((rh@P >> (2*(s & 3))) & 0x03030303u) << 4); "
    "uint q1 = ((rm@ >> (4*((s & 3) >> 1))) & 0x0F0F0F0Fu) | (((rg@P >> (2*(s & 3))) & 0x03030303u) << 4); "
    f"A0 = {_SUB('q0', 32)}; A1 = {_SUB('q1', 32)}; ds = H2F(rd@P); "
    "sc0 = (float)((int)(rs@P << (24 - 8*((2*s) & 3))) >> 24); sc1 = (float)((int)(rs@P << (24 - 8*((2*s + 1) & 3))) >> 24);",
    ("ds", "sc0", "sc1")),
}

SPLIT_EXPERTS = 32   # tokens up to which routed experts split K (split_k): H200, DeepSeek-V2-Lite's batched step of 8
                     # sequences +7.0% against unsplit tiles; H100, on 8 x 256 tiles from 9 tokens, the steps of 16 / 32
                     # -15% / -10% (DeepSeek-V2-Lite) and -16% / -11% (GLM-4.7-Flash) against unsplit 16 x 256 ones
                     # (OPTIMIZATION_JOURNAL.md)
SPLIT_EXPERT_PICKS = 48   # (token, expert) picks from which such a step's routed experts take the split GEMM, not the
                          # matvecs (which dequantize an expert's rows again for each pick; the GEMM's slices cost two
                          # kernels a layer more): H200, 8 sequences, DeepSeek-V2-Lite's 48 picks +7.3%, GLM-4.7-Flash's 32 -8.6%;
                          # with this rule, H100: DeepSeek-V2-Lite's 8 sequences +6.1%, GLM-4.7-Flash's unchanged

def mma_tile(s: GemmShape) -> tuple[int, int]:
  """(tokens, rows) of out per workgroup of 4 warps. A warp's B fragments (x) serve all its row blocks of 16, so the more
  rows a warp owns the fewer shared-memory reads per mma (Nsight Compute: these kernels are bound by L1 / shared memory,
  not DRAM): an expert's 64 entries x 128 rows (32 a warp) where a chunk routes 32 or more entries to an expert on average
  (a 512-token chunk: ~48 to each of DeepSeek-V2-Lite's 64 experts; H100 prefill -16% against 16 x 256), else 16 x 256
  (a 128-token chunk's ~12: 64 x 128 was 4.5% slower there); a SwiGLU product's 64 tokens x 128 rows of W; any other
  product's 32 tokens (or fewer, down to 8, until there is a workgroup per SM) x 128 rows, or 64 where N is an odd multiple
  of 64 (a last band of 128 half empty). 32 tokens beat 64 by 1.1-1.4x at 512 tokens where the 64-token tiles left one or
  two workgroups an SM (tools/bench_gemm.py --sweep tiles, OPTIMIZATION_JOURNAL.md). Never more tokens than the product's
  own rounded to 8: a batched step's output head (8 tokens, K whole) in 32-token tiles staged 4x the x records it reads
  (H100: 207 -> 159 us alone, Youtu-LLM-2B's step of 8 -4.3%)."""
  few = -(-s.T // 8) * 8   # the tokens in whole column blocks: a wider tile stages x records nobody reads
  if s.experts:
    # a batched decode step, its K split (split_k): up to 8 tokens narrow tiles; 9-32 tokens pick ~1.5-3 entries an expert
    # (64 experts), so 8 entries x 256 rows: the 16 x 256 tile took 168 registers and spilled (sm_90), three workgroups an
    # SM at 18.8% occupancy, no eligible warp 60% of cycles (Nsight Compute, H100); 8 x 256 takes 142-146, no stack
    if s.T <= SPLIT_EXPERTS: return (min(16, few), 128 if s.glu else 64) if s.T <= 8 else (8, 256)
    return (64, 128) if s.T * s.J >= 32 * s.E else (16, 256)
  if s.split > 1: return (few, 128 if s.glu else 64)   # all the tokens in one tile, a row block a warp
  wgs = lambda tt, tn: -(-s.N * (2 if s.glu else 1) // tn) * -(-s.T // tt) * (s.E if s.batched else 1)
  if s.glu:   # a warp's row blocks in gate / up pairs: 128 rows of W, 64 of out
    tt = 64
    while tt > 8 and wgs(tt, 128) < matvec.SMS: tt //= 2
    return (min(tt, few), 128)
  tn, tt = (128 if s.N % 128 == 0 else 64), 32
  while tt > 8 and wgs(tt, tn) < matvec.SMS: tt //= 2
  return (min(tt, few), tn)

def _experts_bytes(s: GemmShape) -> int: return _list_bytes(s) + 128 * 4 if s.experts else 0

MMA_SHARED_BYTES = 96 * 1024   # an experts kernel's workgroup memory at most (its x records dynamic): within the opt-in
                               # limit of every sm_80+ device (sm_86 / sm_89: 99 KB a workgroup)

def _mma_limit(s: GemmShape, tile: tuple[int, int] | None = None, sb: int | None = None, stages: int | None = None) -> int:
  """Workgroup memory the tensor-core kernel of `s` may take: an experts kernel's x records are dynamic (DYN_SHARED), so its
  two sub-steps fit beside a 2048-token chunk's listing (DeepSeek-V2-Lite's 12,288 entries: 53.8 KB in all); the others
  declare theirs static (48 KB); a staged kernel's stages are dynamic too (the rule's for `tile` and `sb` unless `stages`)."""
  if stages is None and tile is not None: stages = mma_stages(s, tile, sb or _mma_steps(s, tile))
  return MMA_SHARED_BYTES if s.experts or stages else matvec.SHARED_BYTES["CUDA"]

def mma_steps_fit(s: GemmShape, tile: tuple[int, int], sb: int) -> bool:
  """Steps of `sb` sub-steps divide K and their x records (two steps of them; staged, the stages) fit the kernel's workgroup
  memory."""
  return (s.K // KB) % sb == 0 and mma_shared_bytes(s, tile, sb) <= _mma_limit(s, tile, sb)

def _mma_steps(s: GemmShape, tile: tuple[int, int]) -> int:
  """Sub-steps of 32 weights per step (a step's loads are in flight together): two, one where K or the shared memory (two
  steps of x records) asks. Four (8 row blocks of 16 a warp) held 32 more registers of weights in flight, which left two
  workgroups per SM; two, with registers for three workgroups an SM (build_mma's __launch_bounds__(128, 3): 168 a thread,
  no spills), ran the chunk's products up to 1.5x faster on the H100 (tools/bench_gemm.py --sweep steps, OPTIMIZATION_JOURNAL.md).
  Four for a step of 5-8 sequences (a tile of 8 tokens, at most 2 row blocks a warp: its accumulators few, its loads one
  step ahead all it has to hide memory behind; H100, 8 tokens alone: the output head 159 -> 124 us, DeepSeek-V2-Lite's
  routed down 44.9 -> 39.4; the step of 8 Youtu-LLM-2B 2.13 -> 2.08 ms, DeepSeek-V2-Lite unchanged). The step of 16 gained
  nothing (DeepSeek-V2-Lite +0.8%) and a step of 3-4 sequences' products keep two (not measured with four)."""
  sb = 4 if FEW_TOKENS < s.T <= 8 and tile[1] <= 128 else 2
  while sb > 1 and not mma_steps_fit(s, tile, sb): sb //= 2
  return sb

def mma_shared_bytes(s: GemmShape, tile: tuple[int, int] | None = None, steps: int | None = None, stages: int | None = None) -> int:
  """Workgroup memory of the tensor-core kernel: two steps of x records (5 uint4s a token and sub-step) and the experts'
  listing; the rule's tile and steps unless given."""
  tile = tile or mma_tile(s)
  sb = steps or _mma_steps(s, tile)
  if nst := mma_stages(s, tile, sb) if stages is None else stages:
    return nst * (sb * tile[0] * 8 * 16 + tile[1] * (4 * sb + 4 + sb // 2) * 4) + _experts_bytes(s)
  return 2 * sb * tile[0] * XQ_WORDS * 4 + _experts_bytes(s)

SPLIT_TOKENS = 64   # tokens up to which a plain product splits K (all of them in one tile)

def split_k(s: GemmShape) -> GemmShape:
  """s with its K split where a plain product of a few tokens (a batched decode step's) leaves the GPU few workgroups: a 2048-row
  product of 16 tokens is 32 workgroups of 64 rows, each streaming its rows' whole K with a few loads in flight. Slices
  double until there are two workgroups an SM (at most 16 slices, each a whole number of steps). Up to SPLIT_TOKENS: a
  batched step with a prompt's 32-token chunk as further rows (Transformer.launch(slots, prompt)) is 33-64 tokens."""
  if s.batched or s.T > SPLIT_TOKENS: return s
  one = replace(s, split=2)
  if s.experts:   # the workgroups that run are the experts chosen x row bands: slices of at least 4 steps, up to 4 of them
    if s.T > SPLIT_EXPERTS: return s
    steps, split = s.K // KB // _mma_steps(one, mma_tile(one)), 1
    while split < 4 and steps % (2 * split) == 0 and steps // (2 * split) >= 4: split *= 2
    return replace(s, split=split) if split > 1 else s
  tile = mma_tile(one)
  wgs, steps = -(-s.N * (2 if s.glu else 1) // tile[1]), s.K // KB // _mma_steps(one, tile)
  split = 1
  while split < 16 and wgs * split < 2 * matvec.SMS and steps % (2 * split) == 0: split *= 2
  return replace(s, split=split, residual=False) if split > 1 else s

def mma_supports(s: GemmShape, device: str | None = None) -> bool:
  """The tensor-core GEMM serves `s` (on `device`: a CUDA device of sm_80 or newer; None: any)."""
  if device is not None and not has_mma(device): return False
  return s.type in MMA_TYPES and s.K % BLOCK[s.type][0] == 0 and s.T > 0 and s.N > 0 and s.J > 0 and \
         mma_shared_bytes(s) <= _mma_limit(s, mma_tile(s)) and _experts_bytes(s) <= matvec.SHARED_BYTES["CUDA"]

STAGES = 3   # steps of a staged kernel's weights and x records in flight in workgroup memory (mma_stages): four left three
             # workgroups an SM by workgroup memory and ran DeepSeek-V2-Lite's step of 8 1.6% slower (H100)

def mma_stages(s: GemmShape, tile: tuple[int, int], sb: int) -> int:
  """Steps in flight through workgroup memory (0: the weights one step ahead in registers). A routed experts' Q4_0 product
  of at most 8 tokens (a batched step's) stages each step's weights with cp.async, a row's blocks whole (16 bytes a copy,
  their scales 2 sb bytes): the register loads took a lane's 4-byte word of each row's block and a row's 2-byte scales
  alone, so the L1 moved 32-byte sectors for 12 of their bytes and was the limit (Nsight Compute, H100: DeepSeek-V2-Lite's
  routed gate_up at 8 tokens, L1/TEX 78% busy, DRAM 46%). Staged, at the rule's steps, that gate_up takes 61.5 us against
  74.9 and its down 31.8 against 34.6; a plain product of 8 tokens gains nothing (attn_output 3.6 / 3.6 us) and the steps
  of 16 and Youtu-LLM-2B's of 8 run slower with every product of up to 16 tokens staged (H100, OPTIMIZATION_JOURNAL.md).
  build_mma stages any tile of up to 16 tokens when asked."""
  return STAGES if s.experts and s.type == GGMLType.Q4_0 and s.T <= 8 and tile[0] <= 8 and sb % 2 == 0 else 0

def build_mma(s: GemmShape, tile: tuple[int, int] | None = None, steps: int | None = None, min_blocks: int | None = None,
              stages: int | None = None) -> SourceKernel:
  """The tensor-core kernel for shape `s` (reads x as build_xq's records). A workgroup of 4 warps owns TT tokens x TN rows
  of out; warp w owns rows [w TN/4, (w + 1) TN/4) as MW row blocks of 16, for all TT tokens (TT / 8 column blocks). Per
  sub-step of 32 weights a lane loads word t of its rows g and g + 8 straight into the A fragment (a Q4_0 block's word t
  holds weights 4t.. and 16 + 4t..: the fragment's k order), the workgroup stages its tokens' x records in shared memory,
  and each (row block, column block) takes three mma.sync (x's h, m and l bytes) whose integer sums, put together as
  65536 h + 256 m + l, are scaled by the row's and the token's scale into fp32 accumulators. A step of SB sub-steps has
  its loads in flight one step ahead; staged (mma_stages), NST steps of weights and x records are in flight in workgroup
  memory, each lane's words read from there."""
  mt_ = MMA_TYPES[s.type]
  assert mma_supports(s) and (tile is None and steps is None and stages is None or
                             mma_shared_bytes(s, tile, steps, stages) <= _mma_limit(s, tile or mma_tile(s), steps, stages)), s
  TT, TN = tile or mma_tile(s)
  MW, NTL, SB = TN // 64, TT // 8, steps or _mma_steps(s, (TT, TN))
  OM = MW // 2 if s.glu else MW   # output row blocks of 16 per warp
  assert TN % 64 == 0 and TT % 8 == 0 and not (s.glu and (MW % 2 or s.batched))
  spb = BLOCK[s.type][0] // KB
  nb, NS = s.K // BLOCK[s.type][0], s.K // KB
  R = s.T * s.J if (s.x_per_slot or s.batched) else s.T   # rows of x (and of its records)
  NX = SB * TT * XQ_VECS   # a step's x record uint4s
  XR = -(-NX // 128)
  params = (Param("out", dtypes.float32, True), Param("xq", dtypes.uint32), *([Param("sel", dtypes.int32)] if s.experts else []),
            *([Param("residual", dtypes.float32)] if s.residual else []), *(Param(n, dt, weight=True) for n, dt in mt_.parts))
  listing, xrow, wrow0, ent, mloop = _entries(s, 128, TT)
  assert s.split == 1 or not (s.batched or s.residual) and (NS // SB) % s.split == 0, s
  KS = NS // SB // s.split   # steps of a workgroup's slice of K: steps ks0 .. ks0 + KS
  NST = mma_stages(s, (TT, TN), SB) if stages is None else stages
  assert NST == 0 or s.type == GGMLType.Q4_0 and SB % 2 == 0 and NST >= 2, (s, SB, NST)
  RW = SB * 4 + 4   # a staged row's words: its SB blocks and 16 bytes of padding (lanes g of a fragment on distinct banks)
  # staged: a token's record in 8 uint4 slots, uint4 j in slot j ^ SWZ(token): a fragment's loads of it (tokens g of a quad's
  # lanes, l words of four tokens, scales of tokens 2t) fall on distinct banks, where 7 uint4s a token conflicted 3-way
  XS = 8 if NST else XQ_VECS
  NXS = SB * TT * XS   # a stage's x record uint4s
  WQ, WD = NST * NXS * 4, NST * NXS * 4 + NST * TN * RW   # staged: uint offsets of the weights' and their scales' stages
  rec = (lambda tok, j: f"xo + ({tok}) * 8 + (({j}) ^ SWZ({tok}))") if NST else (lambda tok, j: f"xo + ({tok}) * {XQ_VECS} + {j}")
  def reg(code: str, idx: str, u: int | None = None) -> str:
    if u is not None: code = code.replace("@P", f"[{u & ~1}][m][h]").replace("U", str(u)).replace("SB", str(SB))
    return code.replace("@", idx)
  def load(step: str) -> str:
    """Step `step`'s x records into shared buffer (step) & 1 (cp.async) and its weights into the lane's registers."""
    wl = "\n".join(f"""      {{ const int sg = ({step}) * {SB} + {u}, bi0 = sg / {spb}, s = sg % {spb}; (void)s;
        for (int m = 0; m < {MW}; m++) for (int h = 0; h < 2; h++) {{ int bi = wrow[m][h] + bi0; {reg(mt_.load, f"[{u}][m][h]", u)} }} }}"""
                   for u in range(SB))
    return f"""{{
      for (int r = 0; r < {XR}; r++) {{
        int idx = tid + 128 * r;
        if (idx < {NX} && (idx / {XQ_VECS}) % {TT} < mt) {{   // the tile's entries only: a column past them is never stored
          int u = idx / {TT * XQ_VECS}, i = (idx / {XQ_VECS}) % {TT}, w = idx % {XQ_VECS};
          int ent = {ent.format(t="i")};
          CP_ASYNC16(&xs4[(({step}) & 1) * {NX} + idx], &xq4[((({step}) * {SB} + u) * {R} + {xrow}) * {XQ_VECS} + w]);
        }}
      }}
{wl}
    }}"""
  def issue(step: str) -> str:
    """Staged: step `step`'s x records, and its rows' blocks and scales, into stage (step) % NST (cp.async)."""
    gate = f"GID_X * {TN // 2} + lr" if s.glu else f"GID_X * {TN} + lr"
    row = f"(lr < {TN // 2} ? min({gate}, N - 1) : N + min({gate} - {TN // 2}, N - 1))" if s.glu else f"min({gate}, N - 1)"
    return f"""{{
      const int st = ({step}) % {NST};
      for (int r = 0; r < {XR}; r++) {{
        int idx = tid + 128 * r;
        if (idx < {NX} && (idx / {XQ_VECS}) % {TT} < mt) {{   // the tile's entries only: a column past them is never stored
          int u = idx / {TT * XQ_VECS}, i = (idx / {XQ_VECS}) % {TT}, w = idx % {XQ_VECS};
          int ent = {ent.format(t="i")};
          CP_ASYNC16(&xs4[st * {NXS} + (idx / {XQ_VECS}) * 8 + (w ^ SWZ(i))], &xq4[((({step}) * {SB} + u) * {R} + {xrow}) * {XQ_VECS} + w]);
        }}
      }}
      for (int r = 0; r < {-(-TN * SB // 128)}; r++) {{
        int idx = tid + 128 * r, lr = idx / {SB}, c = idx % {SB};
        if (idx < {TN * SB}) {{
          int wr = {wrow0}{row};
          CP_ASYNC16(&sw4[(st * {TN} + lr) * {RW // 4} + c], &qs4[(size_t)wr * NB + ({step}) * {SB} + c]);
          if (c == 0) CP_ASYNC_N(&sw[{WD} + (st * {TN} + lr) * {SB // 2}], &d[(size_t)wr * NB + ({step}) * {SB}], {2 * SB});
        }}
      }}
    }}"""
  # staged: a lane's words of its rows from the stage (the register code's sources), lr its row in the workgroup's TN
  lrow = f"warp * {16 * OM} + 16 * (m % {OM}) + 8 * h + g" + (f" + (m >= {OM} ? {TN // 2} : 0)" if s.glu else "")
  from_stage = "\n".join(f"""      for (int m = 0; m < {MW}; m++) for (int h = 0; h < 2; h++) {{ const int lr = {lrow};
        rq[{u}][m][h] = sw[{WQ} + (st * {TN} + lr) * {RW} + {4 * u} + t];{f" rd[{u}][m][h] = sw[{WD} + (st * {TN} + lr) * {SB // 2} + {u // 2}];" if u % 2 == 0 else ""} }}"""
                         for u in range(SB))
  scal = ", ".join(mt_.scales)
  frag = "\n".join(f"""      {{ const int s = (ks * {SB} + {u}) % {spb}; (void)s;
        for (int m = 0; m < {MW}; m++) for (int h = 0; h < 2; h++) {{
          uint A0, A1; float {scal};
          {reg(mt_.frag, f"[{u}][m][h]", u)}
          a[{u}][m][h] = A0; a[{u}][m][2 + h] = A1;
          {" ".join(f"f{n}[{u}][m][h] = {n};" for n in mt_.scales)}
        }} }}""" for u in range(SB))
  if s.type == GGMLType.Q6_K:
    mma = """int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0}, l0[4] = {0, 0, 0, 0}, l1[4] = {0, 0, 0, 0};
            MMA_K16(c0, a[u][m][0], a[u][m][1], b.x); MMA_K16(c1, a[u][m][2], a[u][m][3], b.y);
            for (int i = 0; i < 4; i++) { c0[i] *= 256; c1[i] *= 256; }
            MMA_K16(c0, a[u][m][0], a[u][m][1], b.z); MMA_K16(c1, a[u][m][2], a[u][m][3], b.w);
            MMA_K16(l0, a[u][m][0], a[u][m][1], bl[0]); MMA_K16(l1, a[u][m][2], a[u][m][3], bl[1]);
            for (int i = 0; i < 4; i++) acc[m][n][i] += (fds[u][m][i >> 1] * dx[i & 1]) *
              (fsc0[u][m][i >> 1] * X24(c0[i], l0[i]) + fsc1[u][m][i >> 1] * X24(c1[i], l1[i]));"""
  else:
    term = "(fds[u][m][i >> 1] * dx[i & 1]) * X24(c[i], l[i])"
    if "mn" in mt_.scales: term += " - fmn[u][m][i >> 1] * xsum[i & 1]"
    mma = f"""int c[4] = {{0, 0, 0, 0}}, l[4] = {{0, 0, 0, 0}};
            MMA_K32(c, a[u][m], b.x, b.y); for (int i = 0; i < 4; i++) c[i] *= 256; MMA_K32(c, a[u][m], b.z, b.w);
            MMA_K32(l, a[u][m], bl[0], bl[1]);
            for (int i = 0; i < 4; i++) acc[m][n][i] += {term};"""
  store = f"""#pragma unroll
  for (int m = 0; m < {OM}; m++)
#pragma unroll
  for (int n = 0; n < {NTL}; n++)
#pragma unroll
  for (int i = 0; i < 4; i++) {{
    int tk = 8*n + 2*t + (i & 1), row = n0 + 16*m + g + 8*(i >> 1);
    if (tk >= mt || row >= N) continue;
    int ent = {ent.format(t="tk")};
    {f"float gv = acc[m][n][i], v = gv / (1.0f + exp(-gv)) * acc[m + {OM}][n][i];" if s.glu else "float v = acc[m][n][i];"}
    out[ent * N + row] = v{" + residual[ent * N + row]" if s.residual else ""};
  }}"""
  staged_decl = f"""
  uint* sw = (uint*)xs4; uint4* sw4 = xs4 + {NST * NXS};   // staged: x records [stage][..], then weights [stage][row][RW], scales [stage][row][SB / 2]
  const GLOBAL uint4* qs4 = (const GLOBAL uint4*)qs;""" if NST else ""
  loop = (f"""  {reg(mt_.regs, f"[{SB}][{MW}][2]")}
  for (int p = 0; p < {NST - 1}; p++) {{ if (p < {KS}) {issue("ks0 + p")} CP_ASYNC_COMMIT(); }}
  for (int ks = ks0; ks < ks0 + {KS}; ks++) {{
    CP_ASYNC_WAIT_PENDING({NST - 2});
    BARRIER();   // step ks's stage is in; every warp is done with step ks - 1's, which the next copies take
    if (ks + {NST - 1} < ks0 + {KS}) {issue(f"ks + {NST - 1}")}
    CP_ASYNC_COMMIT();
    const int st = ks % {NST}, xo = st * {NXS};
    uint a[{SB}][{MW}][4]; float {", ".join(f"f{n}[{SB}][{MW}][2]" for n in mt_.scales)};
{from_stage}
{frag}""" if NST else f"""  {reg(mt_.regs, f"[{SB}][{MW}][2]")}
  {load("ks0")}
  for (int ks = ks0; ks < ks0 + {KS}; ks++) {{
    uint a[{SB}][{MW}][4]; float {", ".join(f"f{n}[{SB}][{MW}][2]" for n in mt_.scales)};
{frag}
    CP_ASYNC_WAIT();
    BARRIER();   // step ks's x records are in; every warp is done with step ks - 1's buffer
    if (ks + 1 < ks0 + {KS}) {load("ks + 1")}   // step ks + 1's loads: in flight during step ks's math
    const int xo = (ks & 1) * {NX};""")
  body = f"""  const int T = {s.T}, N = {s.N}, NB = {nb};
  (void)T;
  int tid = LID_X, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  int n0 = GID_X * {TN // 2 if s.glu else TN} + warp * {16 * OM};   // the warp's first output row
  const int ks0 = {f"GID_{'Y' if s.experts else 'Z'} * {KS}" if s.split > 1 else "0"};   // the workgroup's first step of K
  {"DYN_SHARED(uint4, xs4);" if s.experts or NST else f"SHARED uint4 xs4[{2 * NX}];"}   // [step & 1][sub-step][token][5]: the tokens' x records of two steps
  const GLOBAL uint4* xq4 = (const GLOBAL uint4*)xq;{staged_decl}
  GRID_WAIT();
{listing}
  int wrow[{MW}][2];   // the first packed block of the lane's rows g and g + 8 of each row block
  for (int m = 0; m < {MW}; m++) for (int h = 0; h < 2; h++)   // with glu, row blocks OM.. are the up rows of blocks 0..
    wrow[m][h] = ({wrow0}min(n0 + 16*(m % {OM}) + 8*h + g, N - 1) + (m >= {OM} ? N : 0)) * NB;
  {mloop} {{
  int mt = min({TT}, cnt - m0);   // entries of this tile
  float acc[{MW}][{NTL}][4];
  for (int m = 0; m < {MW}; m++) for (int n = 0; n < {NTL}; n++) for (int i = 0; i < 4; i++) acc[m][n][i] = 0.0f;
{loop}
#pragma unroll
    for (int u = 0; u < {SB}; u++)
#pragma unroll
    for (int n = 0; n < {NTL}; n++) if (8*n < mt) {{   // column blocks past the entries skip
      uint4 b = xs4[{rec(f"u * {TT} + 8*n + g", "t")}];   // the h and m words of token g's record
      const uint* bl = (const uint*)&xs4[{rec(f"u * {TT} + 8*n + g", "5 + (t >> 1)")}] + 2*(t & 1);   // its l words
      const uint* s0 = (const uint*)&xs4[{rec(f"u * {TT} + 8*n + 2*t", 4)}], *s1 = (const uint*)&xs4[{rec(f"u * {TT} + 8*n + 2*t + 1", 4)}];   // tokens 2t, 2t + 1: words
      float dx[2] = {{AS_FLOAT(s0[0]), AS_FLOAT(s1[0])}};
      {"float xsum[2] = {dx[0] * (float)((int)s0[1] + (int)s0[2]), dx[1] * (float)((int)s1[1] + (int)s1[2])};" if "mn" in mt_.scales else ""}
#pragma unroll
      for (int m = 0; m < {MW}; m++) {{
            {mma}
      }}
    }}
  }}
  BARRIER();   // the next tile's first records go to buffer 0, which the last step may have read
{_split_store(s, OM, NTL, ent) if s.split > 1 else store}
  }}"""
  name = f"gemm_mma_{s.type.name.lower()}_{s.T}_{s.N}_{s.K}" + (f"_e{s.E}_j{s.J}" + ("_xs" if s.x_per_slot else "") if s.experts else "") + \
         (f"_batched{s.J}" if s.batched else "") + ("_residual" if s.residual else "") + ("_glu" if s.glu else "") + \
         (f"_split{s.split}" if s.split > 1 else "") + (f"_st{NST}" if NST else "")
  ON = TN // 2 if s.glu else TN   # output rows per workgroup
  grid = (-(-s.N // ON), s.split, s.E) if s.experts else (-(-s.N // ON), -(-s.T // TT), s.E if s.batched else s.split)
  smem = mma_shared_bytes(s, (TT, TN), SB, NST) - _experts_bytes(s) if NST or s.experts else 0   # (the listing's is static)
  helpers = _X24 + ("\nDEVFN int SWZ(int i) { return ((i & 1) << 2) | ((i >> 1) & 3); }" if NST else "")
  return SourceKernel(name, params, body, grid, (128, 1, 1), helpers, trigger=False, min_blocks=min_blocks or 3, smem=smem)

def _split_store(s: GemmShape, OM: int, NTL: int, ent: str) -> str:
  """A slice's sums into out (split, T, rows of W), or for experts (split, T * J entries, rows of W), W's row order (with
  glu, the up rows N on)."""
  NR = 2 * s.N if s.glu else s.N
  row0 = f"GID_Y * {s.T * s.J} + {ent.format(t='tk')}" if s.experts else "GID_Z * T + m0 + tk"
  return f"""#pragma unroll
  for (int m = 0; m < {2 * OM if s.glu else OM}; m++)
#pragma unroll
  for (int n = 0; n < {NTL}; n++)
#pragma unroll
  for (int i = 0; i < 4; i++) {{
    int tk = 8*n + 2*t + (i & 1), row = n0 + 16*(m % {OM}) + g + 8*(i >> 1);
    if (tk < mt && row < N) out[({row0}) * {NR} + row + (m >= {OM} ? N : 0)] = acc[m][n][i];
  }}"""

@cached
def kernel(s: GemmShape, device: str, norm_eps: float | None = None):
  """The custom_kernel body for shape `s` on `device`: the tensor-core kernel where it serves (its x_form quantizes x
  first, rms-normed with norm_eps: apps/dispatch.launch), else the CUDA-core one (Metal, CUDA before sm_80)."""
  if not mma_supports(s, device):
    assert norm_eps is None and not s.glu, s
    return program(build(s), device)
  fxn = program(build_mma(s), device)
  R = s.T * s.J if (s.x_per_slot or s.batched) else s.T
  fxn.x_form = (s.K // KB * R * XQ_WORDS, dtypes.uint32, program(build_xq(R, s.K, norm_eps, s.x_stride), device))
  if norm_eps is None and not s.x_stride:   # x from a split SwiGLU product's slices (S, rows, [gate; up]) where its rows are x's
    fxn.x_form_glu = lambda shape: _xq_glu(R, s.K, shape[0], device) if shape[-1] == 2 * s.K and prod(shape[1:-1]) == R else None
  if s.split > 1: fxn.split = (s.split, 2 * s.N if s.glu else s.N)   # out is the slices' sums: apps/dispatch.launch adds them up
  return fxn

@cached
def _xq_glu(R: int, K: int, S: int, device: str): return program(build_xq(R, K, glu=S), device)

# Tokens up to which every product takes the decode matvecs. Past them a product takes the tensor-core GEMM (with K split:
# split_k) where the device has one; a matvec dequantizes an expert's rows again for each token that chose it, the GEMM once
# for all of them (the routed down's mix then in tensor ops: apps/dispatch._matvec_shape). A batched step of 5-8 sequences runs the
# step of 8, where the split GEMM's step costs what it costs at 2 or 4 tokens and the matvecs' grows with the tokens
# (OPTIMIZATION_JOURNAL.md, H200: Youtu-LLM-2B's step of 8 sequences 4.60 -> 2.46 ms); at 4 the matvecs were as fast or faster.
FEW_TOKENS = 4
# Weights from which a linear product of 3-4 tokens takes the GEMM too (the output heads, the dense FFNs): its matvecs spend
# 3 DP4A a weight a token on the CUDA cores, where the GEMM's tensor cores read each weight once for all tokens. H100, a step
# of 4 sequences: Youtu-LLM-2B 2.61 -> 2.16 ms, DeepSeek-V2-Lite 3.98 -> 3.93, GLM-4.7-Flash 6.26 -> 5.97; with every product
# of 3-4 tokens on the GEMM DeepSeek-V2-Lite's step was 8% slower (its small attention and shared-expert products). From 10M
# rather than 12M: GLM-4.7-Flash's attn_output (10.5M) moves too, its step of 4 5.89 -> 5.70 ms (DeepSeek-V2-Lite's shared
# experts' gate_up, 11.5M, as fast either way).
LARGE = 10 << 20

def few_tokens(spec) -> bool:
  """The decode matvecs take the product: up to FEW_TOKENS tokens, but a linear product of LARGE weights from 3."""
  return spec.B <= FEW_TOKENS and not (spec.B >= 3 and spec.op == "linear" and (2 if spec.glu else 1) * spec.N * spec.K >= LARGE)

# Rows a head up to which a per-head (batched) product of up to matvec.MAX_ROWS sequences stays on the matvecs: v_b's 128
# values a head of 512 latents are few workgroups' tiles on the GEMM, each streaming the whole K (H100, a step of 8
# sequences: Youtu-LLM-2B +3.7%, DeepSeek-V2-Lite +1.5%; GLM-4.7-Flash's 256 a head -1.1% on the matvecs, OPTIMIZATION_JOURNAL.md)
FEW_HEAD_ROWS = 128

def provider(spec):
  """A kernel provider for apps/dispatch.register_kernel: linear (with or without a residual), routed-expert and per-slot
  (batched) products of more tokens than the decode matvecs take, on devices that compile CUDA or Metal source, and where
  the tensor-core kernel serves a linear or routed-expert product, its norm (in x's quantization; x shared by the slots)
  and SwiGLU (in the store) too; None for everything else (the layers then run a norm, SwiGLU or expert mix as separate
  ops around the plain product)."""
  refused = spec.mix or (spec.op != "linear" and spec.residual) or (spec.residual and spec.glu) or \
            (spec.op == "batched" and (spec.norm or spec.glu)) or (spec.norm and spec.x_per_slot)
  if spec.op not in ("linear", "experts", "batched") or refused or spec.x_row or spec.x_dtype != dtypes.float32 or not isinstance(spec.B, int): return None
  if few_tokens(spec) or spec.fmt.type not in TYPES or spec.fmt.block != BLOCK[spec.fmt.type][0] or not matvec.available(spec.device): return None
  s = GemmShape(spec.fmt.type, spec.B, spec.N, spec.K, *((spec.J, spec.E, spec.x_per_slot) if spec.op == "experts" else
                                                         (spec.J, spec.E, True, True) if spec.op == "batched" else ()),
                residual=spec.op == "linear" and spec.residual, glu=spec.glu, x_stride=spec.x_stride)
  mma = mma_supports(s, spec.device)
  if spec.x_stride and (not mma or spec.x_stride % 4): return None   # rows read in place by the tensor-core kernel's x quantization
  if spec.B <= matvec.MAX_ROWS and (not mma or spec.op == "experts" and spec.B * spec.J < SPLIT_EXPERT_PICKS or
                                    spec.op == "batched" and spec.N <= FEW_HEAD_ROWS): return None   # the matvecs'
  if mma: return kernel(split_k(s), spec.device, *([spec.eps] if spec.norm else []))   # (one cache entry per form)
  return kernel(s, spec.device) if not (spec.norm or spec.glu) and supports(s, language_of(spec.device)) else None
