"""Prefill products on packed GGUF weights: out[t, n] = W[n] . x[t] for a chunk of tokens (more than the decode matvecs
take), and the routed-expert product out[t, j, n] = W[sel[t, j]][n] . x[t] (or x[t, j]). Tiled the classic way for CUDA
cores: a workgroup of 256 threads owns 64 tokens x 64 rows of out; per step of 32 weights of K it dequantizes its 64 rows'
32 weights and copies its 64 tokens' 32 x values into shared memory, both k-major as float4s of 4 tokens / 4 rows, and
every thread accumulates a 4 x 4 tile of out from two float4 reads per k (16 FMA). The global loads of step k + 1 are
issued into registers before the math of step k (software pipelining: one wait for memory per step overlapped with the
math, instead of a load, a barrier and the math in series), and the warps whose tokens lie past the tile's entries skip
the math.
W is read once per 64 tokens, dequantized exactly (as gguf-py: d * (q - offset), or (d * sc) * q - (dmin * m) for the
K-quants, in fp32) and summed in fp32, so the result is the float product: the tests hold it to the fp32 bound against
gguf-py's dequantization.

apps/quantized.py asks it first for every product of more than 4 tokens (H100 A/Bs with `tools/ab_prefill.py`: against the
portable kernels prefill +44% on Youtu-LLM-2B, +8% on DeepSeek-V2-Lite; the loads one step ahead, the skip and the K-quants
+2.5% and +63% on top; OPTIMIZATION_JOURNAL.md).

Experts: a workgroup owns one expert and 64 rows; it first lists the (token, slot) entries of sel that chose its expert
(a prefix sum over sel in shared memory, in entry order), then runs the tiles above over that list, 64 entries at a time,
gathering x rows and scattering out rows. Each expert's weights are read once per chunk instead of once per token, and
workgroups of experts nobody chose end after the scan.

Buffers: out (T, N) | (T, J, N), x (T, K) | (T, J, K) with x_per_slot, [sel (T, J) int32], then the packed parts of W
(apps/quantized.py's layouts: Q4_0 / Q8_0 d, qs; Q4_K dm, scm, qs; Q5_K dm, scm, qh, qs; Q6_K ql, qh, sc, d).
"""
from __future__ import annotations
import functools
from dataclasses import dataclass
from tinygrad import dtypes
from apps.gguf import GGMLType, BLOCK
from apps.kernels import SourceKernel, Param, program, language_of, matvec

TILE = 64        # tokens and rows of out per workgroup (16 x 16 threads, each a 4 x 4 tile of out)
KB = 32          # weights of K per step of the loop (one packed block, or one sub-block of a K-quant's 256)
ROW4 = TILE // 4 + 1  # float4s per k in the shared tiles (one of padding: the k-major stores spread over banks)

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
_Q4_0 = GemmType((("d", dtypes.float16), ("qs", dtypes.uint32)), 4, 8, "uint rq[4]; half rd[4];",
  "rq[i] = qs[bi*4 + p]; rd[i] = d[bi];", """
      uint lo = rq[i] & 0x0F0F0F0Fu, hi = (rq[i] >> 4) & 0x0F0F0F0Fu;
      float dw = H2F(rd[i]);
      v[0] = BYTE_F(lo, 0); v[1] = BYTE_F(lo, 1); v[2] = BYTE_F(lo, 2); v[3] = BYTE_F(lo, 3);
      v[4] = BYTE_F(hi, 0); v[5] = BYTE_F(hi, 1); v[6] = BYTE_F(hi, 2); v[7] = BYTE_F(hi, 3);
      for (int b = 0; b < 8; b++) v[b] = dw * (v[b] - 8388616.0f);""", "(b < 4 ? 4*p + b : 16 + 4*p + b - 4)")
# Q8_0: 32 int8 weights, word p = weights 4p..4p+3
_Q8_0 = GemmType((("d", dtypes.float16), ("qs", dtypes.uint32)), 8, 4, "uint rq[4]; half rd[4];",
  "rq[i] = qs[bi*8 + p]; rd[i] = d[bi];", """
      uint u = rq[i] ^ 0x80808080u;   // int8 + 128
      float dw = H2F(rd[i]);
      for (int b = 0; b < 4; b++) v[b] = dw * (BYTE_F(u, b) - 8388736.0f);""", "4*p + b")
# Q4_K / Q5_K: sub-block s of 32 = the low (s even) or high nibbles of qs bytes 32 (s >> 1) .. + 31, scale and min = byte s
# of scm's first and last two words; Q5_K's fifth bit of weight l is bit s of qh byte l
_QK_LOAD = "rq[i] = qs[bi*32 + 8*(s >> 1) + p]; rsc[i] = scm[bi*4 + (s >> 2)]; rmn[i] = scm[bi*4 + 2 + (s >> 2)]; rd[i] = dm[2*bi]; rdm[i] = dm[2*bi + 1];"
_QK_DEQUANT = """
      uint q = (rq[i] >> (4*(s & 1))) & 0x0F0F0F0Fu;HIGH
      float dsc = H2F(rd[i]) * (float)((rsc[i] >> (8*(s & 3))) & 255u), mn = H2F(rdm[i]) * (float)((rmn[i] >> (8*(s & 3))) & 255u);
      for (int b = 0; b < 4; b++) v[b] = dsc * (BYTE_F(q, b) - 8388608.0f) - mn;"""
_Q4_K = GemmType((("dm", dtypes.float16), ("scm", dtypes.uint32), ("qs", dtypes.uint32)), 8, 4,
  "uint rq[4], rsc[4], rmn[4]; half rd[4], rdm[4];", _QK_LOAD, _QK_DEQUANT.replace("HIGH", ""), "4*p + b")
_Q5_K = GemmType((("dm", dtypes.float16), ("scm", dtypes.uint32), ("qh", dtypes.uint32), ("qs", dtypes.uint32)), 8, 4,
  "uint rq[4], rsc[4], rmn[4], rh[4]; half rd[4], rdm[4];", _QK_LOAD + " rh[i] = qh[bi*8 + p];",
  _QK_DEQUANT.replace("HIGH", "\n      q |= ((rh[i] >> s) & 0x01010101u) << 4;"), "4*p + b")
# Q6_K: sub-block s = 4 h + g: low 4 bits = nibble g >> 1 of ql bytes 64 h + 32 (g & 1) + l, high 2 bits = bits 2g, 2g + 1 of
# qh byte 32 h + l; the int8 scale of weights l = 16 r .. is sc byte 2 s + r; weight = (d * scale) * (q - 32)
_Q6_K = GemmType((("ql", dtypes.uint32), ("qh", dtypes.uint32), ("sc", dtypes.uint32), ("d", dtypes.float16)), 8, 4,
  "uint rl[4], rh[4], rs[4]; half rd[4];",
  "rl[i] = ql[bi*32 + 16*(s >> 2) + 8*(s & 1) + p]; rh[i] = qh[bi*16 + 8*(s >> 2) + p]; rs[i] = sc[bi*4 + ((2*s + (p >> 2)) >> 2)]; rd[i] = d[bi];", """
      uint q = ((rl[i] >> (4*((s & 3) >> 1))) & 0x0F0F0F0Fu) | (((rh[i] >> (2*(s & 3))) & 0x03030303u) << 4);
      float ds = H2F(rd[i]) * (float)((int)(rs[i] << (24 - 8*((2*s + (p >> 2)) & 3))) >> 24);
      for (int b = 0; b < 4; b++) v[b] = ds * (BYTE_F(q, b) - 8388640.0f);""", "4*p + b")

TYPES: dict[GGMLType, GemmType] = {GGMLType.Q4_0: _Q4_0, GGMLType.Q8_0: _Q8_0, GGMLType.Q4_K: _Q4_K, GGMLType.Q5_K: _Q5_K,
                                   GGMLType.Q6_K: _Q6_K}

SCAN = 256       # sel entries a workgroup scans per step (one per thread)

@dataclass(frozen=True)
class GemmShape:
  type: GGMLType
  T: int                    # tokens (rows of x and out)
  N: int                    # rows of W (columns of out); per expert for experts
  K: int
  J: int = 1                # experts: slots per token
  E: int = 0                # experts: experts in W (0: a plain linear product)
  x_per_slot: bool = False  # experts: x (T, J, K), one row per slot

  @property
  def experts(self) -> bool: return self.E > 0

def shared_bytes(s: GemmShape) -> int: return 2 * KB * ROW4 * 16 + (s.T * s.J * 4 + SCAN * 4 if s.experts else 0)

def supports(s: GemmShape, language: str = "CUDA") -> bool:
  return s.type in TYPES and s.K % BLOCK[s.type][0] == 0 and s.T > 0 and s.N > 0 and s.J > 0 and \
         shared_bytes(s) <= matvec.SHARED_BYTES[language]

def build(s: GemmShape) -> SourceKernel:
  gt = TYPES[s.type]
  assert supports(s), s
  spb = BLOCK[s.type][0] // KB        # steps per packed block
  nb, P = s.K // BLOCK[s.type][0], s.T * s.J
  w_items = (TILE // 4) * gt.words   # (row group of 4, item) pairs of the W tile; the x tile has (TILE // 4) * (KB // 4) = 128
  params = (Param("out", dtypes.float32, True), Param("x", dtypes.float32), *([Param("sel", dtypes.int32)] if s.experts else []),
            *(Param(n, dt, weight=True) for n, dt in gt.parts))
  if s.experts:
    # the entries (t*J + j) of sel that chose expert e, in order: lst[0 .. cnt); then tiles of 64 of them
    listing = f"""  int e = GID_Z;
  SHARED int lst[{P}];
  SHARED int scan[{SCAN}];
  int cnt = 0;
  for (int base = 0; base < {P}; base += {SCAN}) {{
    int i = base + tid, f = 0;
    if (i < {P}) {{ int se = sel[i]; se = se < 0 ? 0 : (se >= {s.E} ? {s.E - 1} : se); f = se == e ? 1 : 0; }}
    scan[tid] = f;
    BARRIER();
    for (int o = 1; o < {SCAN}; o <<= 1) {{ int v = tid >= o ? scan[tid - o] : 0; BARRIER(); scan[tid] += v; BARRIER(); }}
    if (f) lst[cnt + scan[tid] - 1] = i;
    cnt += scan[{SCAN - 1}];
    BARRIER();
  }}"""
    xrow = "ent" if s.x_per_slot else f"ent / {s.J}"
    wrow0 = f"e * {s.N} + "
    ent = "lst[min(m0 + {t}, cnt - 1)]"
  else:
    listing = "  const int cnt = T; (void)cnt;"
    xrow, wrow0, ent = "ent", "", "min(m0 + {t}, T - 1)"
  mloop = f"for (int m0 = 0; m0 < cnt; m0 += {TILE})" if s.experts else f"int m0 = GID_Y * {TILE};"
  # a thread's part of a step: x (threads 0..127: entry group g of 4 entries, k group c of 4 values; 8 consecutive threads
  # read 128 contiguous bytes of a row) or W (threads 128..: row group g of 4 rows, item p of their 32 weights)
  def load(step: str) -> str:
    return f"""{{
      const int kl = {step};
      if (xl) {{
        if (4*g < mt) for (int i = 0; i < 4; i++) a[i] = *(const GLOBAL float4*)(x + xr[i] * K + kl * {KB} + 4*c);
      }} else if (wl) {{
        int s = kl % {spb}; (void)s;
        for (int i = 0; i < 4; i++) {{ int bi = wr[i] + kl / {spb}; {gt.load} }}
      }}
    }}"""
  store = f"""if (xl) {{
        xs4[(4*c + 0) * {ROW4} + g] = FLOAT4(a[0].x, a[1].x, a[2].x, a[3].x);
        xs4[(4*c + 1) * {ROW4} + g] = FLOAT4(a[0].y, a[1].y, a[2].y, a[3].y);
        xs4[(4*c + 2) * {ROW4} + g] = FLOAT4(a[0].z, a[1].z, a[2].z, a[3].z);
        xs4[(4*c + 3) * {ROW4} + g] = FLOAT4(a[0].w, a[1].w, a[2].w, a[3].w);
      }} else if (wl) {{
        int s = ks % {spb}; (void)s;
        float r[4][{gt.per_word}];
        for (int i = 0; i < 4; i++) {{
          float v[{gt.per_word}];{gt.dequant}
          for (int b = 0; b < {gt.per_word}; b++) r[i][b] = v[b];
        }}
        for (int b = 0; b < {gt.per_word}; b++) ws4[({gt.koffs}) * {ROW4} + g] = FLOAT4(r[0][b], r[1][b], r[2][b], r[3][b]);
      }}"""
  body = f"""  const int T = {s.T}, N = {s.N}, K = {s.K}, NB = {nb}, NS = {s.K // KB};
  (void)T;
  int tx = LID_X, ty = LID_Y, tid = ty * 16 + tx;
  int n0 = GID_X * {TILE};
  SHARED float4 xs4[{KB * ROW4}];   // [k][token group]: x[4g .. 4g + 3 of the tile][k0 + k]
  SHARED float4 ws4[{KB * ROW4}];   // [k][row group]: W[n0 + 4g .. 4g + 3][k0 + k]
  GRID_WAIT();
{listing}
  int xl = tid < 128, wl = tid >= 128 && tid < {128 + w_items};
  int g = xl ? tid / 8 : (tid - 128) / {gt.words}, c = tid % 8, p = (tid - 128) % {gt.words};
  (void)p;
  int wr[4];   // W rows: the first packed block of each of the thread's 4 rows
  for (int i = 0; i < 4; i++) wr[i] = ({wrow0}min(n0 + 4*g + i, N - 1)) * NB;
  {mloop} {{
  int mt = min({TILE}, cnt - m0);   // entries of this tile
  int xr[4];   // x rows of the thread's 4 entries
  for (int i = 0; i < 4; i++) {{ int ent = {ent.format(t="4*g + i")}; xr[i] = {xrow}; }}
  float acc[4][4];
  for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
  float4 a[4];
  for (int i = 0; i < 4; i++) a[i] = FLOAT4(0.0f, 0.0f, 0.0f, 0.0f);
  {gt.regs}
  {load("0")}
  for (int ks = 0; ks < NS; ks++) {{
      {store}
    BARRIER();
    if (ks + 1 < NS) {load("ks + 1")}   // step ks + 1's loads: in flight during step ks's math
    // warps whose two token groups lie past the tile's entries skip the math: an expert's tile is mostly empty (a
    // 128-token chunk gives each of 64 experts ~12 of its 768 (token, slot) entries)
    if (4*ty < mt) for (int k = 0; k < {KB}; k++) {{
      float4 av4 = xs4[k * {ROW4} + ty], w = ws4[k * {ROW4} + tx];
      float av[4] = {{av4.x, av4.y, av4.z, av4.w}}, wv[4] = {{w.x, w.y, w.z, w.w}};
      for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) acc[i][j] += av[i] * wv[j];
    }}
    BARRIER();
  }}
  for (int i = 0; i < 4; i++) {{
    if (4*ty + i >= mt) continue;
    int ent = {ent.format(t="4*ty + i")};
    for (int j = 0; j < 4; j++) if (n0 + 4*tx + j < N) out[ent * N + n0 + 4*tx + j] = acc[i][j];
  }}
  }}"""
  name = f"gemm_{s.type.name.lower()}_{s.T}_{s.N}_{s.K}" + (f"_e{s.E}_j{s.J}" + ("_xs" if s.x_per_slot else "") if s.experts else "")
  grid = (-(-s.N // TILE), 1, s.E) if s.experts else (-(-s.N // TILE), -(-s.T // TILE), 1)
  return SourceKernel(name, params, body, grid, (16, 16, 1))

@functools.lru_cache(maxsize=None)
def kernel(s: GemmShape, device: str):
  """The custom_kernel body for shape `s` on `device` (a CUDA or Metal device)."""
  return program(build(s), device)

def provider(spec):
  """A kernel provider for apps/quantized.register_kernel: plain linear and routed-expert products of more tokens than the
  decode matvecs take, on devices that compile CUDA or Metal source; None for everything else."""
  if spec.op not in ("linear", "experts") or spec.fused or spec.x_dtype != dtypes.float32 or not isinstance(spec.B, int): return None
  if spec.B <= 4 or spec.fmt.type not in TYPES or spec.fmt.block != BLOCK[spec.fmt.type][0] or not matvec.available(spec.device): return None
  s = GemmShape(spec.fmt.type, spec.B, spec.N, spec.K, *((spec.J, spec.E, spec.x_per_slot) if spec.op == "experts" else ()))
  return kernel(s, spec.device) if supports(s, language_of(spec.device)) else None
