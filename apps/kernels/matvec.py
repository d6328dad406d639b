"""Decode matvecs on packed GGUF weights: out = W @ x for a few tokens, with the norm before and the residual / SwiGLU /
expert mix after folded into the same kernel (each a kernel launch less per use, ~1-3 us each on the H100).

Layout of the work: a warp owns R output rows and walks a row's packed blocks with its 32 lanes (lane i takes chunks
i, i+32, ...: consecutive lanes read consecutive 16-byte words, so every load is coalesced and wide); the lane keeps the
chunk's x in registers and uses it for all R rows (x is fp32: reading it once per row would cost several times the weight
bytes in L1 traffic); WARPS warps per workgroup; the R partial sums are reduced across the warp with shuffles. Grid:
(row groups, J slots, B tokens). Dequantization is the portable kernels' (apps/quantized.py): same formulas, fp32.

What a kernel computes (buffers in this order: out, x, [sel], [mix], [norm_w], [residual], *packed parts):
  linear   out[b, n] = W[n] . xn[b]                       xn = x, or rms_norm(x) * norm_w with `norm`
  experts  out[b, j, n] = W[sel[b, j]][n] . xn[b] (x (B, K)) or . x[b, j] (x (B, J, K))
  batched  out[b, e, n] = W[e][n] . x[b, e]
  glu      the W rows are [gate; up] (2F): out[..., f] = silu(gate_f . x) * (up_f . x)
  mix      (experts) out[b, n] = sum_j mix[b, j] * (W[sel[b, j]][n] . x[b, j])
  residual out += residual (same shape as out)
"""
from __future__ import annotations
import functools
from dataclasses import dataclass
from tinygrad import dtypes
from apps.gguf import GGMLType
from apps.kernels import SourceKernel, Param, program, language_of

# ---- per type: packed parts (name, element type), weights per lane step (CH), weights per packed block, and the dialect
# code of one lane step: `s` += sum over the chunk of w * xr[i]; `bi` is the packed block index, `c` the chunk in the block.
# xr[] holds the chunk's x (CH floats); xs is their sum (for the types with an offset or a min).
@dataclass(frozen=True)
class TypeCode:
  parts: tuple[tuple[str, object], ...]
  ch: int
  block: int
  step: str
  xrun: str = "c*CH + 16*r"   # offset in the block of the chunk's r-th run of 16 x values (xr[16r..16r+15])

_Q4_0 = TypeCode((("d", dtypes.float16), ("qs", dtypes.uint32)), 32, 32, """
    uint4 q = ((const GLOBAL uint4*)qs)[bi];
    uint w[4] = {q.x, q.y, q.z, q.w};
    float t = 0.0f;
    for (int i = 0; i < 4; i++) for (int b = 0; b < 4; b++)
      t += (float)((w[i] >> (8*b)) & 15u) * xr[4*i + b] + (float)((w[i] >> (8*b + 4)) & 15u) * xr[16 + 4*i + b];
    s += H2F(d[bi]) * (t - 8.0f * xs);""")

_Q8_0 = TypeCode((("d", dtypes.float16), ("qs", dtypes.uint32)), 32, 32, """
    const GLOBAL uint4* q4 = (const GLOBAL uint4*)qs + 2*bi;
    uint4 qa = q4[0], qb = q4[1];
    uint w[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
    float t = 0.0f;
    for (int i = 0; i < 8; i++) for (int b = 0; b < 4; b++) t += (float)(((int)(w[i] << (24 - 8*b))) >> 24) * xr[4*i + b];
    s += H2F(d[bi]) * t;""")

# K-quants: a lane step is 64 weights (chunk c of 4 per 256-weight block); c = 2*c1 + c0, sub-blocks 2c and 2c+1 of 32
_QK_STEP = """
    int c1 = c >> 1, c0 = c & 1;
    const GLOBAL uint4* q4 = (const GLOBAL uint4*)qs + bi*8 + c1*4 + c0*2;
    uint4 qa = q4[0], qb = q4[1];
    uint w[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
    HIGH_LOAD
    uint sc = scm[bi*4 + c1], mn = scm[bi*4 + c1 + 2];
    float dd = H2F(dm[2*bi]), dmin = H2F(dm[2*bi + 1]);
    for (int h = 0; h < 2; h++) {
      float t = 0.0f, u = 0.0f;
      for (int i = 0; i < 8; i++) for (int b = 0; b < 4; b++) {
        uint qv = (w[i] >> (8*b + 4*h)) & 15u;
        HIGH_BITS
        float xv = xr[32*h + 4*i + b];
        t += (float)qv * xv; u += xv;
      }
      int sh = 16*c0 + 8*h;
      s += dd * (float)((sc >> sh) & 255u) * t - dmin * (float)((mn >> sh) & 255u) * u;
    }"""
_Q4_K = TypeCode((("dm", dtypes.float16), ("scm", dtypes.uint32), ("qs", dtypes.uint32)), 64, 256,
                 _QK_STEP.replace("HIGH_LOAD", "").replace("HIGH_BITS", ""))
_Q5_K = TypeCode((("dm", dtypes.float16), ("scm", dtypes.uint32), ("qh", dtypes.uint32), ("qs", dtypes.uint32)), 64, 256,
                 _QK_STEP.replace("HIGH_LOAD", "const GLOBAL uint4* h4 = (const GLOBAL uint4*)qh + bi*2;\n    uint4 ha = h4[0], hb = h4[1];\n"
                                  "    uint hw[8] = {ha.x, ha.y, ha.z, ha.w, hb.x, hb.y, hb.z, hb.w};")
                         .replace("HIGH_BITS", "qv |= ((hw[i] >> (8*b + 2*c + h)) & 1u) << 4;"))

# Q6_K: chunk c = (half i = c >> 1, lh = c & 1): 4 runs of 16 weights at i*128 + s4*32 + lh*16 (s4 = 2*s4h + s4l)
_Q6_K = TypeCode((("ql", dtypes.uint32), ("qh", dtypes.uint32), ("sc", dtypes.uint32), ("d", dtypes.float16)), 64, 256, """
    int i = c >> 1, lh = c & 1;
    const GLOBAL uint4* l4 = (const GLOBAL uint4*)ql + bi*8 + i*4 + lh;
    uint4 la = l4[0], lb = l4[2];
    uint4 hq = ((const GLOBAL uint4*)qh)[bi*4 + i*2 + lh];
    uint lw0[4] = {la.x, la.y, la.z, la.w}, lw1[4] = {lb.x, lb.y, lb.z, lb.w}, hw[4] = {hq.x, hq.y, hq.z, hq.w};
    uint scw[2] = {sc[bi*4 + i*2], sc[bi*4 + i*2 + 1]};
    float dd = H2F(d[bi]);
    for (int s4h = 0; s4h < 2; s4h++) for (int s4l = 0; s4l < 2; s4l++) {
      float t = 0.0f;
      for (int lw = 0; lw < 4; lw++) for (int b = 0; b < 4; b++) {
        uint lo = ((s4l ? lw1[lw] : lw0[lw]) >> (8*b + 4*s4h)) & 15u;
        uint hi = (hw[lw] >> (8*b + 4*s4h + 2*s4l)) & 3u;
        t += ((float)(lo | (hi << 4)) - 32.0f) * xr[32*s4h + 16*s4l + 4*lw + b];
      }
      int scale = ((int)(scw[s4h] << (24 - 16*s4l - 8*lh))) >> 24;
      s += dd * (float)scale * t;
    }""", xrun="(c >> 1)*128 + (c & 1)*16 + 32*r")

_F32 = TypeCode((("w", dtypes.float32),), 8, 8, """
    const GLOBAL float4* w4 = (const GLOBAL float4*)w + 2*bi;
    float4 wa = w4[0], wb = w4[1];
    s += wa.x*xr[0] + wa.y*xr[1] + wa.z*xr[2] + wa.w*xr[3] + wb.x*xr[4] + wb.y*xr[5] + wb.z*xr[6] + wb.w*xr[7];""")

_F16 = TypeCode((("w", dtypes.float16),), 8, 8, """
    for (int i = 0; i < 8; i++) s += H2F(w[8*bi + i]) * xr[i];""")

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

WARPS = 4

def rows_per_warp(s: MatvecShape) -> int:
  """Rows per warp: as many as keep >= 2 workgroups per SM on an H100 (132 SMs), up to 4 (x reuse from registers)."""
  slots = 1 if s.mix else s.J
  for r in (4, 2):
    if -(-s.N // (r * WARPS)) * slots * s.B >= 264: return r
  return 1

def build(s: MatvecShape) -> SourceKernel:
  tc = TYPES[s.type]
  assert s.K % tc.block == 0 and tc.block % tc.ch == 0, (s, tc)
  R, slots = rows_per_warp(s), (1 if s.mix else s.J)
  nb, cpb = s.K // tc.block, tc.block // tc.ch
  steps = nb * cpb
  params = [Param("out", dtypes.float32, True), Param("x", dtypes.float32)]
  if s.op == "experts": params.append(Param("sel", dtypes.int32))
  if s.mix: params.append(Param("mix", dtypes.float32))
  if s.norm: params.append(Param("norm_w", dtypes.float32))
  if s.residual: params.append(Param("residual", dtypes.float32))
  params += [Param(n, dt) for n, dt in tc.parts]
  rows_w = 2 * s.N if s.glu else s.N            # rows of one expert's W
  nacc = 2 * R if s.glu else R
  # W row of accumulator a: output row n = row0 + (a % R); glu: a >= R is the up row F + n
  wrow = "(a < R ? n : N + n)" if s.glu else "n"
  slot_loop = "for (int j = 0; j < J; j++)" if s.mix else "int j = GID_Y;"
  expert = {"experts": f"int e = sel[b*J + j]; e = e < 0 ? 0 : (e >= {s.E} ? {s.E - 1} : e);", "batched": "int e = j;",
            "linear": "int e = 0;"}[s.op]
  xoff = "(b*J + j)*K" if s.x_per_slot else "b*K"
  norm_pre = ""
  if s.norm:
    norm_pre = """
  // rms norm of x: each warp sums the squares itself (x is a few KB, read from L1/L2), no workgroup barrier needed
  // float4 loads, unrolled: the K/128 loads of a lane are independent, so they wait for memory once, not K/128 times
  float ss = 0.0f;
  const GLOBAL float4* xn4 = (const GLOBAL float4*)(x + XOFF);
  #pragma unroll
  for (int k = lane; k < K / 4; k += 32) { float4 v = xn4[k]; ss += v.x*v.x + v.y*v.y + v.z*v.z + v.w*v.w; }
  float rs = 1.0f / sqrt(WARP_SUM(ss) / (float)K + EPS);""".replace("XOFF", xoff if not s.mix else "b*K")
  run = min(16, tc.ch)  # x is read in runs of 16 floats (4 float4 loads): a chunk's weights may not be contiguous in the row
  xrun = tc.xrun.replace("CH", str(tc.ch)).replace("16*r", f"{run}*r")
  load_x = f"""
      float xr[{tc.ch}]; float xs = 0.0f;
      for (int r = 0; r < {tc.ch // run}; r++) {{
        int ko = ib*{tc.block} + {xrun};
        const GLOBAL float4* x4 = (const GLOBAL float4*)(x + xo + ko);
        for (int i = 0; i < {run // 4}; i++) {{ float4 v = x4[i]; xr[{run}*r+4*i] = v.x; xr[{run}*r+4*i+1] = v.y; xr[{run}*r+4*i+2] = v.z; xr[{run}*r+4*i+3] = v.w; }}"""
  if s.norm: load_x += f"""
        const GLOBAL float4* g4 = (const GLOBAL float4*)(norm_w + ko);
        for (int i = 0; i < {run // 4}; i++) {{ float4 v = g4[i]; xr[{run}*r+4*i] *= v.x; xr[{run}*r+4*i+1] *= v.y; xr[{run}*r+4*i+2] *= v.z; xr[{run}*r+4*i+3] *= v.w; }}"""
  load_x += "\n      }"
  load_x += f"\n      for (int i = 0; i < {tc.ch}; i++) xs += xr[i];"
  step = tc.step.replace("\n", "\n    ")
  final = "float v = acc[r]"
  if s.norm: final += " * rs"
  if s.glu: final = "float g = acc[r]" + (" * rs" if s.norm else "") + ", u = acc[R + r]" + (" * rs" if s.norm else "") + \
                    ";\n      float v = g / (1.0f + exp(-g)) * u"
  out_idx = "b*N + n" if s.mix or s.op == "linear" else "(b*J + j)*N + n"
  if s.residual: final += f";\n      v += residual[{out_idx}]"
  body = f"""  const int R = {R}, N = {s.N}, K = {s.K}, J = {s.J}, NB = {nb};
  const float EPS = EPS_VALUE;
  int lane = LID_X, warp = LID_Y, b = GID_Z;
  int row0 = (GID_X * {WARPS} + warp) * R;{norm_pre}
  float acc[{nacc}];
  for (int a = 0; a < {nacc}; a++) acc[a] = 0.0f;
  {slot_loop} {{
    {expert}
    int xo = {xoff};
    float wj = {"mix[b*J + j]" if s.mix else "1.0f"};
    for (int st = lane; st < {steps}; st += 32) {{
      int ib = st / {cpb}, c = st - ib * {cpb};{load_x}
      for (int a = 0; a < {nacc}; a++) {{
        int n = row0 + (a % R);
        if (n >= N) continue;
        int bi = (e * {rows_w} + {wrow}) * NB + ib;
        float s = 0.0f;
        {{{step}
        }}
        acc[a] += wj * s;
      }}
    }}
  }}
  for (int r = 0; r < R; r++) {{
    int n = row0 + r;
    {"" if not s.glu else "acc[R + r] = WARP_SUM(acc[R + r]);"}
    acc[r] = WARP_SUM(acc[r]);
    if (lane == 0 && n < N) {{
      {final};
      out[{out_idx}] = v;
    }}
  }}"""
  name = f"mv_{s.type.name.lower()}_{s.op}_{s.B}_{s.J}_{s.N}_{s.K}" + "".join(f"_{f}" for f in ("norm", "residual", "glu", "mix") if getattr(s, f))
  return SourceKernel(name, tuple(params), body, (-(-s.N // (R * WARPS)), slots, s.B), (32, WARPS, 1))

def _with_eps(k: SourceKernel, eps: float) -> SourceKernel:
  from dataclasses import replace
  return replace(k, body=k.body.replace("EPS_VALUE", f"{float(eps)!r}f" if "e" not in repr(float(eps)) else f"{float(eps):.9e}f"))

def supports(s: MatvecShape) -> bool:
  if s.type not in TYPES or s.B > 4: return False
  tc = TYPES[s.type]
  if s.K % tc.block or s.K % 4: return False
  if s.mix and s.op != "experts": return False
  if s.norm and s.x_per_slot: return False
  return True

@functools.lru_cache(maxsize=None)
def kernel(s: MatvecShape, eps: float, device: str):
  """The custom_kernel body for shape `s` on `device` (a CUDA or Metal device)."""
  return program(_with_eps(build(s), eps), device)

def available(device: str) -> bool: return language_of(device) is not None
