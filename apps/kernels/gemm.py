"""Prefill products on packed GGUF weights: out[t, n] = W[n] . x[t] for a chunk of tokens (more than the decode matvecs
take), the routed-expert product out[t, j, n] = W[sel[t, j]][n] . x[t] (or x[t, j]) and the per-slot product
out[t, j, n] = W[j][n] . x[t, j] (MLA's k_b and v_b). Tiled the classic way for CUDA cores: a workgroup owns a tile of
out (`GemmShape.tile`: tokens x rows, each thread 4 x 4 of it); per step of 32 weights of K it dequantizes its rows' 32
weights and copies its tokens' 32 x values into shared memory, both k-major as float4s of 4 rows / 4 tokens, and every
thread accumulates its 4 x 4 from two float4 reads per k (16 FMA). The global loads of step k + 1 are issued into
registers before the math of step k (one wait for memory per step, overlapped with the math), and the warps whose tokens
lie past the tile's entries skip the math.
W is dequantized exactly (as gguf-py: d * (q - offset), or (d * sc) * q - (dmin * m) for the K-quants, in fp32) and summed
in fp32, so the result is the float product: the tests hold it to the fp32 bound against gguf-py's dequantization.

apps/quantized.py asks it first for every product of more than 4 tokens (H100 A/Bs with `tools/ab_prefill.py`: against the
portable kernels prefill +44% on Youtu-LLM-2B, +8% on DeepSeek-V2-Lite; the loads one step ahead, the skip and the K-quants
+2.5% and +63% on top; OPTIMIZATION_JOURNAL.md).

Experts: a workgroup owns one expert and 128 rows; it first lists the (token, slot) entries of sel that chose its expert
(a prefix sum over sel in shared memory, in entry order), then runs tiles of 16 of those entries, gathering x rows and
scattering out rows. Each expert's weights are read once per chunk instead of once per token, and workgroups of experts
nobody chose end after the scan.

Buffers: out (T, N) | (T, J, N), x (T, K) | (T, J, K) with x_per_slot, [sel (T, J) int32], [residual (T, N)], then the packed parts of W
(apps/quantized.py's layouts: Q4_0 / Q8_0 d, qs; Q4_K dm, scm, qs; Q5_K dm, scm, qh, qs; Q6_K ql, qh, sc, d).
"""
from __future__ import annotations
import functools
from dataclasses import dataclass
from tinygrad import dtypes
from apps.gguf import GGMLType, BLOCK
from apps.kernels import SourceKernel, Param, program, language_of, matvec

KB = 32          # weights of K per step of the loop (one packed block, or one sub-block of a K-quant's 256)

@dataclass(frozen=True)
class GemmType:
  parts: tuple[tuple[str, object], ...]  # the packed parts (name, element type), in apps/quantized.py's order
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
  return KB * (tt // 4 + 1 + tn // 4 + 1) * 16 + (s.T * s.J * 4 + (tt // 4) * (tn // 4) * 4 if s.experts else 0)

def supports(s: GemmShape, language: str = "CUDA") -> bool:
  return s.type in TYPES and s.K % BLOCK[s.type][0] == 0 and s.T > 0 and s.N > 0 and s.J > 0 and \
         shared_bytes(s) <= matvec.SHARED_BYTES[language]

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
  nb, P = s.K // BLOCK[s.type][0], s.T * s.J
  params = (Param("out", dtypes.float32, True), Param("x", dtypes.float32), *([Param("sel", dtypes.int32)] if s.experts else []),
            *([Param("residual", dtypes.float32)] if s.residual else []), *(Param(n, dt, weight=True) for n, dt in gt.parts))
  if s.experts:
    # the entries (t*J + j) of sel that chose expert e, in order: lst[0 .. cnt); then tiles of TT of them
    listing = f"""  int e = GID_Z;
  SHARED int lst[{P}];
  SHARED int scan[{NT}];
  int cnt = 0;
  for (int base = 0; base < {P}; base += {NT}) {{
    int i = base + tid, f = 0;
    if (i < {P}) {{ int se = sel[i]; se = se < 0 ? 0 : (se >= {s.E} ? {s.E - 1} : se); f = se == e ? 1 : 0; }}
    scan[tid] = f;
    BARRIER();
    for (int o = 1; o < {NT}; o <<= 1) {{ int v = tid >= o ? scan[tid - o] : 0; BARRIER(); scan[tid] += v; BARRIER(); }}
    if (f) lst[cnt + scan[tid] - 1] = i;
    cnt += scan[{NT - 1}];
    BARRIER();
  }}"""
    xrow = "ent" if s.x_per_slot else f"ent / {s.J}"
    wrow0 = f"e * {s.N} + "
    ent = "lst[min(m0 + {t}, cnt - 1)]"
  elif s.batched:  # a dense product per slot: entry t*J + e of x and out, expert e's rows
    listing = "  const int cnt = T, e = GID_Z; (void)cnt;"
    xrow, wrow0, ent = "ent", f"e * {s.N} + ", f"(min(m0 + {{t}}, T - 1) * {s.J} + e)"
  else:
    listing = "  const int cnt = T; (void)cnt;"
    xrow, wrow0, ent = "ent", "", "min(m0 + {t}, T - 1)"
  mloop = f"for (int m0 = 0; m0 < cnt; m0 += {TT})" if s.experts else f"int m0 = GID_Y * {TT};"
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
  return SourceKernel(name, params, body, grid, (TN // 4, TT // 4, 1))

@functools.lru_cache(maxsize=None)
def kernel(s: GemmShape, device: str):
  """The custom_kernel body for shape `s` on `device` (a CUDA or Metal device)."""
  return program(build(s), device)

def provider(spec):
  """A kernel provider for apps/quantized.register_kernel: linear (with or without a residual), routed-expert and per-slot
  (batched) products of more tokens than the decode matvecs take, on devices that compile CUDA or Metal source; None for
  everything else (the layers then run a norm, SwiGLU or expert mix as separate ops around the plain product)."""
  # of the fusions, only a linear product's residual: it goes in the store
  fused = spec.norm or spec.glu or spec.mix or spec.x_stride or (spec.residual and spec.op != "linear")
  if spec.op not in ("linear", "experts", "batched") or fused or spec.x_dtype != dtypes.float32 or not isinstance(spec.B, int): return None
  if spec.B <= 4 or spec.fmt.type not in TYPES or spec.fmt.block != BLOCK[spec.fmt.type][0] or not matvec.available(spec.device): return None
  s = GemmShape(spec.fmt.type, spec.B, spec.N, spec.K, *((spec.J, spec.E, spec.x_per_slot) if spec.op == "experts" else
                                                         (spec.J, spec.E, True, True) if spec.op == "batched" else ()),
                residual=spec.op == "linear" and spec.residual)
  return kernel(s, spec.device) if supports(s, language_of(spec.device)) else None
