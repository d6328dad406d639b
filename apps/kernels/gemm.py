"""Prefill products on packed GGUF weights: out[t, n] = W[n] . x[t] for a chunk of tokens (more than the decode matvecs
take), and the routed-expert product out[t, j, n] = W[sel[t, j]][n] . x[t] (or x[t, j]). Tiled the classic way for CUDA
cores: a workgroup of 256 threads owns 64 tokens x 64 rows of out; per packed block
of K (32 weights) it dequantizes its 64 rows' block and copies its 64 tokens' 32 x values into shared memory, both k-major
as float4s of 4 tokens / 4 rows, and every thread accumulates a 4 x 4 tile of out from two float4 reads per k (16 FMA).
W is read once per 64 tokens, dequantized exactly (d * (q - offset) in fp32) and summed in fp32, so the result is the
float product: the tests hold it to the fp32 bound against gguf-py's dequantization.

apps/quantized.py asks it first for every product of more than 4 tokens (H100 A/B against the portable kernels,
`tools/ab_prefill.py`: prefill +44% on Youtu-LLM-2B, +8% on DeepSeek-V2-Lite; OPTIMIZATION_JOURNAL.md).

Experts: a workgroup owns one expert and 64 rows; it first lists the (token, slot) entries of sel that chose its expert
(a prefix sum over sel in shared memory, in entry order), then runs the tiles above over that list, 64 entries at a time,
gathering x rows and scattering out rows. Each expert's weights are read once per chunk instead of once per token, and
workgroups of experts nobody chose end after the scan.

Buffers: out (T, N) | (T, J, N), x (T, K) | (T, J, K) with x_per_slot, [sel (T, J) int32], then the packed parts of W
(Q4_0 / Q8_0: d, qs).
"""
from __future__ import annotations
import functools
from dataclasses import dataclass
from tinygrad import dtypes
from apps.gguf import GGMLType
from apps.kernels import SourceKernel, Param, program, language_of, matvec

TILE = 64        # tokens and rows of out per workgroup (16 x 16 threads, each a 4 x 4 tile of out)
KB = 32          # weights per packed block: one k step of the loop
ROW4 = TILE // 4 + 1  # float4s per k in the shared tiles (one of padding: the k-major stores spread over banks)

@dataclass(frozen=True)
class GemmType:
  words: int     # uint32 words of qs per block
  dequant: str   # sets v[0..7] or v[0..3] (the weights of word `q`, at k offsets koff(b)) from `q`, `dw`
  koffs: str     # k offset in the block of value b of word p (C expression in p, b)
  per_word: int  # values per word

# Q4_0: byte j of the block holds weight j (low nibble) and weight j + 16 (high); word p = bytes 4p..4p+3
_Q4_0 = GemmType(4, """
      uint lo = q & 0x0F0F0F0Fu, hi = (q >> 4) & 0x0F0F0F0Fu;
      v[0] = BYTE_F(lo, 0); v[1] = BYTE_F(lo, 1); v[2] = BYTE_F(lo, 2); v[3] = BYTE_F(lo, 3);
      v[4] = BYTE_F(hi, 0); v[5] = BYTE_F(hi, 1); v[6] = BYTE_F(hi, 2); v[7] = BYTE_F(hi, 3);
      for (int b = 0; b < 8; b++) v[b] = dw * (v[b] - 8388616.0f);""", "(b < 4 ? 4*p + b : 16 + 4*p + b - 4)", 8)
# Q8_0: 32 int8 weights, word p = weights 4p..4p+3
_Q8_0 = GemmType(8, """
      uint u = q ^ 0x80808080u;   // int8 + 128
      v[0] = BYTE_F(u, 0); v[1] = BYTE_F(u, 1); v[2] = BYTE_F(u, 2); v[3] = BYTE_F(u, 3);
      for (int b = 0; b < 4; b++) v[b] = dw * (v[b] - 8388736.0f);""", "4*p + b", 4)

TYPES: dict[GGMLType, GemmType] = {GGMLType.Q4_0: _Q4_0, GGMLType.Q8_0: _Q8_0}

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
  return s.type in TYPES and s.K % KB == 0 and s.T > 0 and s.N > 0 and s.J > 0 and shared_bytes(s) <= matvec.SHARED_BYTES[language]

def build(s: GemmShape) -> SourceKernel:
  gt = TYPES[s.type]
  assert supports(s), s
  nb, P = s.K // KB, s.T * s.J
  w_items = (TILE // 4) * gt.words   # (row group of 4, word) pairs of the W tile; the x tile has (TILE // 4) * (KB // 4) = 128
  params = (Param("out", dtypes.float32, True), Param("x", dtypes.float32), *([Param("sel", dtypes.int32)] if s.experts else []),
            Param("d", dtypes.float16, weight=True), Param("qs", dtypes.uint32, weight=True))
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
  body = f"""  const int T = {s.T}, N = {s.N}, K = {s.K}, NB = {nb};
  (void)T;
  int tx = LID_X, ty = LID_Y, tid = ty * 16 + tx;
  int n0 = GID_X * {TILE};
  SHARED float4 xs4[{KB * ROW4}];   // [k][token group]: x[4g .. 4g + 3 of the tile][k0 + k]
  SHARED float4 ws4[{KB * ROW4}];   // [k][row group]: W[n0 + 4g .. 4g + 3][k0 + k]
  GRID_WAIT();
{listing}
  {mloop} {{
  int mt = min({TILE}, cnt - m0);   // entries of this tile
  float acc[4][4];
  for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
  for (int kb = 0; kb < NB; kb++) {{
    if (tid < 128) {{
      // x: entry group g (4 entries), k group c (4 values): 8 consecutive threads read 128 contiguous bytes of a row
      int g = tid / 8, c = tid % 8;
      float4 a[4];
      for (int i = 0; i < 4; i++) {{
        int ent = {ent.format(t="4*g + i")};
        a[i] = *(const GLOBAL float4*)(x + {xrow} * K + kb * {KB} + 4*c);
      }}
      xs4[(4*c + 0) * {ROW4} + g] = FLOAT4(a[0].x, a[1].x, a[2].x, a[3].x);
      xs4[(4*c + 1) * {ROW4} + g] = FLOAT4(a[0].y, a[1].y, a[2].y, a[3].y);
      xs4[(4*c + 2) * {ROW4} + g] = FLOAT4(a[0].z, a[1].z, a[2].z, a[3].z);
      xs4[(4*c + 3) * {ROW4} + g] = FLOAT4(a[0].w, a[1].w, a[2].w, a[3].w);
    }} else if (tid < {128 + w_items}) {{
      // W: row group g (4 rows), word p of their blocks: {gt.per_word} values per row, dequantized
      int g = (tid - 128) / {gt.words}, p = (tid - 128) % {gt.words};
      float r[4][{gt.per_word}];
      for (int i = 0; i < 4; i++) {{
        int bi = ({wrow0}min(n0 + 4*g + i, N - 1)) * NB + kb;
        uint q = qs[bi * {gt.words} + p];
        float dw = H2F(d[bi]);
        float v[{gt.per_word}];{gt.dequant}
        for (int b = 0; b < {gt.per_word}; b++) r[i][b] = v[b];
      }}
      for (int b = 0; b < {gt.per_word}; b++) ws4[({gt.koffs}) * {ROW4} + g] = FLOAT4(r[0][b], r[1][b], r[2][b], r[3][b]);
    }}
    BARRIER();
    for (int k = 0; k < {KB}; k++) {{
      float4 a = xs4[k * {ROW4} + ty], w = ws4[k * {ROW4} + tx];
      float av[4] = {{a.x, a.y, a.z, a.w}}, wv[4] = {{w.x, w.y, w.z, w.w}};
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
  if spec.B <= 4 or spec.fmt.type not in TYPES or spec.fmt.block != KB or not matvec.available(spec.device): return None
  s = GemmShape(spec.fmt.type, spec.B, spec.N, spec.K, *((spec.J, spec.E, spec.x_per_slot) if spec.op == "experts" else ()))
  return kernel(s, spec.device) if supports(s, language_of(spec.device)) else None
