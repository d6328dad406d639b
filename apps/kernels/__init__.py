"""Hand-written GPU kernels inside tinygrad's graphs: one description, rendered as CUDA or Metal source.

A `SourceKernel` is the body of a kernel in a small C dialect shared by CUDA and MSL (the macros below), its parameters in
the order tinygrad passes buffers (the custom_kernel sources: outputs first), and its launch dims. `program()` turns it
into the body of a `Tensor.custom_kernel`: a PROGRAM UOp carrying the rendered SOURCE, which tinygrad compiles with the
device's own compiler (NVRTC, nvcc or Metal) and TinyJit captures and batches into CUDA/Metal graphs like any generated
kernel. The PROGRAM's ProgramInfo names which buffers it writes (`outs`) and reads (`ins`): graphs order kernels by those
sets, so a kernel that declared none would let its readers run before it finishes. `side_by_side()` makes one launch of
several kernels (workgroup ranges), for kernels of one input that would otherwise be two nodes of a chain.

The dialect (macros defined per backend by the prelude):
  KPARAM ... (signature)   rendered from `params`; the body sees each parameter by its name
  GID_X, GID_Y, GID_Z      workgroup (block) index; LID_X, LID_Y, LID_Z thread index in it
  GLOBAL                   address-space qualifier of a pointer into a buffer (`device` in MSL, nothing in CUDA)
  SHARED                   declares workgroup memory (`__shared__` / `threadgroup`); BARRIER() synchronizes it
  DYN_SHARED(type, name)   (CUDA) declares `type name[]` in the workgroup memory a launch gets (SourceKernel.smem bytes, at
                           most max_smem(device)): past the 48 KB a static declaration may take
  WARP_SUM(v), WARP_MAX(v) sum / max of a float over the 32 lanes of a warp/simdgroup (every lane gets it)
  SHFL_XOR(v, o)           v of lane (this lane ^ o) in the warp (float or int)
  SHFL(v, l)               v of lane l in the warp
  EXP2(x)                  2^x of a float
  FLOAT4(a, b, c, d)       a float4 value (for one wide store)
  DEVFN                    qualifies a helper function; H2F(h) half -> float; F2H(f) float -> half (to nearest even);
                           AS_FLOAT(u) uint bits -> float;
                           AS_UINT(f) float bits -> uint; H2F_BITS(u) the fp16 in the low 16 bits of uint u -> float
  BYTE_F(u, b)             2^23 + (byte b of uint u) as a float, exactly (b a constant 0..3): subtract 8388608.0f (plus
                           any offset of the quant) for the byte's value; a byte permute, no int-to-float conversion
  DP4A(a, b, c)            c + the dot product of the four signed bytes of int a with those of int b (one instruction on
                           CUDA sm_61+; four multiplies on Metal)
  FMAX(a, b), FABS(a)      float max and absolute value; ROUNDF(a) rounds half away from zero (C's roundf, as ggml does)
  uint4/float4 vector types exist in both languages (members .x .y .z .w); the body constructs them only with FLOAT4 and
  UINT4.
  GRID_WAIT()              waits until the kernels this one depends on have finished and their writes are visible
  MMA_K32(c, a, b0, b1)    CUDA sm_80+ only (no Metal twin): int c[4] += A . B on the tensor cores, one warp-wide
                           mma.sync m16n8k32 of signed bytes: A 16 x 32 in a[4], B 32 x 8 in b0, b1, C 16 x 8 in c[4], the
                           fragment layouts of the PTX ISA (lane = 4 g + t: a[0] row g, k 4t..4t+3; a[1] row g + 8; a[2],
                           a[3] the same at k + 16; b0 k 4t..4t+3 of column g, b1 k + 16; c[i] row g + 8 (i >> 1), column
                           2t + (i & 1)); MMA_K16(c, a0, a1, b0) the m16n8k16 one (A 16 x 16 in a0, a1; B 16 x 8 in b0)
  MMA_TF32(c, a, b0, b1)   CUDA sm_80+ only: float c[4] += A . B, one mma.sync m16n8k8 of tf32 (fp32 registers, the low 13
                           mantissa bits ignored): A 16 x 8 in float a[4] (a[0] row g, k t; a[1] row g + 8; a[2], a[3] the
                           same at k t + 4), B 8 x 8 in b0 (k t, column g) and b1 (k t + 4), C as above (fp32). With
                           hi = x rounded to tf32 and lo = x - hi, three products (hi hi, hi lo, lo hi) are fp32-accurate
  MMA_F16(c, a, b0, b1)    CUDA sm_80+ only: float c[4] += A . B, one mma.sync m16n8k16 of fp16 (fp32 sums): A 16 x 16 in
                           unsigned a[4] of fp16 pairs (a[0] row g, k 2t, 2t + 1; a[1] row g + 8; a[2], a[3] the same at k +
                           8), B 16 x 8 in b0 (k 2t, 2t + 1 of column g) and b1 (k + 8), C as above: C's two n8 tiles of a
                           product are the A fragment of the next one's k16 step. PACK_H2(lo, hi) two floats as an fp16 pair
                           (to nearest even, lo in the low half); LDSM_X4_T(r, p) ldmatrix .x4 .trans: four 8 x 8 fp16
                           matrices of shared memory, row i of matrix m at lane 8m + i's p (16 bytes), into unsigned r[4]
                           transposed (r[m]: rows 2t, 2t + 1 of column g: a B fragment of rows that are keys)
  CP_ASYNC16(dst, src)     CUDA sm_80+ only: starts copying 16 bytes from global src to shared dst (cp.async, no registers);
                           CP_ASYNC_WAIT() waits for all of the thread's copies (BARRIER() after it: for the workgroup's);
                           CP_ASYNC_COMMIT() closes a group of the thread's copies, CP_ASYNC_WAIT_PENDING(n) waits until at
                           most the n latest groups are in flight (n a literal); CP_ASYNC_N(dst, src, n) copies n = 4 or 8
                           bytes (through L1), both aligned to n

Programmatic dependent launch (CUDA sm_90+; no-ops elsewhere): a kernel whose source executes GRID_WAIT() gets
programmatic edges in the CUDA graph (patches/0004), and render() makes its first statement GRID_TRIGGER()
(griddepcontrol.launch_dependents) unless the kernel says `trigger=False` or the model runs without the trigger
(`Fusions.trigger`, program(trigger=False)): once every workgroup of a kernel has started,
the next kernel launches, and its workgroups run up to their GRID_WAIT() (their launch, their loads of weights) while this
one computes. (Measured: decode 3-6% faster per token with the trigger, the prefill kernels not faster:
OPTIMIZATION_JOURNAL.md.) The
contract, which test/emulator.py checks: every workgroup executes GRID_WAIT() before it touches any buffer but its `weight`
parameters (read-only for the whole step: packed weights, norm vectors) and before it writes anything.
"""
from __future__ import annotations
import functools, importlib, math, re
from dataclasses import dataclass, field, fields, replace
from types import ModuleType
from typing import Callable, Sequence
from tinygrad import Device, Tensor, dtypes
from tinygrad.dtype import DType, AddrSpace
from tinygrad.uop.ops import UOp, Ops, ProgramInfo, KernelInfo
from tinygrad.helpers import to_function_name

@dataclass(frozen=True)
class Fusions:
  """Which fusions the model makes: each one a switch, all on by default (what the apps run). The model takes them
  (`Transformer.from_gguf(path, fusions=Fusions(...))`) and each is read where its decision is made; `tools.ab fusions`
  turns some off for its variant A to measure what each one is worth.
    stack_q       a direct attn_q (q_lora_rank 0) and attn_kv_a_mqa stacked into one weight [q; kv_a] at load, one matvec
                  (apps/mla.py; [q_a; kv_a] is stacked either way)
    side_by_side  calls of one input in one launch where the decode matvecs can (the shared and the routed experts'
                  gate_up: apps/dispatch.run)
    sum           calls' results of one shape summed in one kernel (the routed and the shared experts' down: run_sum)
    trigger       GRID_TRIGGER() first in the hand-written kernels that wait on their grid (`program`; without it their
                  dependents launch as their workgroups exit)
    slices        a kernel reads the unsliced output of the kernel before it where a symbolic chunk length sliced that, not
                  a copy padded back to the bound (`to_bound`, prefill)"""
  stack_q: bool = True
  side_by_side: bool = True
  sum: bool = True
  trigger: bool = True
  slices: bool = True

  def without(self, *names: str) -> Fusions:
    """These fusions off (ValueError naming the fusions for a name that is none)."""
    if unknown := set(names) - set(FUSIONS): raise ValueError(f"no fusion {', '.join(sorted(unknown))}: fusions are {', '.join(FUSIONS)}")
    return replace(self, **{n: False for n in names})

FUSIONS = tuple(f.name for f in fields(Fusions))

def _checked_out(name: str):
  return field(default_factory=lambda: importlib.import_module(f"apps.kernels.{name}"))

@dataclass(frozen=True)
class KernelModules:
  """Which module builds each family of hand-written kernels: by default the checked-out apps.kernels.<family>; another
  version of one loaded from a file is `tools.ab kernel`'s variant A. gemm None: no prefill GEMM, the portable kernels
  serve those products (`tools.ab prefill`'s variant `portable`). The model takes them (`Transformer(kernel_modules=...)`);
  the seam (apps/dispatch.py: matvec, gemm) and the blocks (apps/mla.py: mla_attention, router) build from them, and the
  kernel caches key on them."""
  matvec: ModuleType = _checked_out("matvec")
  gemm: ModuleType | None = _checked_out("gemm")
  mla_attention: ModuleType = _checked_out("mla_attention")
  router: ModuleType = _checked_out("router")

KERNEL_FAMILIES = tuple(f.name for f in fields(KernelModules))

@dataclass(frozen=True)
class Param:
  name: str
  dtype: DType      # element type of the buffer
  written: bool = False
  weight: bool = False  # never written during a step: may be read before GRID_WAIT()
  read: bool = False    # written and read too (a cache the kernel appends a row to and attends over): among the program's ins

@dataclass(frozen=True)
class SourceKernel:
  name: str
  params: tuple[Param, ...]
  body: str                       # dialect statements of the kernel body
  global_size: tuple[int, int, int]
  local_size: tuple[int, int, int]
  helpers: str = ""               # dialect helper functions, placed before the kernel
  trigger: bool = True            # a kernel that waits: GRID_TRIGGER() first (decode's one-wave kernels; the prefill GEMMs
                                  # and attention, many waves, without: the H100 A/B measured them no faster, or slower)
  min_blocks: int = 1             # CUDA: workgroups per SM the compiler must fit (registers capped at 64K / (threads x this))
  smem: int = 0                   # CUDA: bytes of dynamic workgroup memory (DYN_SHARED) a launch gets (patches/0074)

  @property
  def function_name(self) -> str: return to_function_name(self.name)
  @property
  def threads(self) -> int: return math.prod(self.local_size)

_CTYPE = {dtypes.float32: "float", dtypes.float16: "half", dtypes.uint32: "uint", dtypes.int32: "int", dtypes.uint8: "uchar",
          dtypes.int8: "char", dtypes.uint16: "ushort"}

_CUDA_PRELUDE = """#include <cuda_fp16.h>
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
typedef unsigned int uint; typedef unsigned char uchar; typedef unsigned short ushort;
#define GID_X blockIdx.x
#define GID_Y blockIdx.y
#define GID_Z blockIdx.z
#define LID_X threadIdx.x
#define LID_Y threadIdx.y
#define LID_Z threadIdx.z
#define GLOBAL
#define SHARED __shared__
#ifndef DYN_SHARED
#define DYN_SHARED(type, name) extern __shared__ __align__(16) type name[]
#endif
#define BARRIER() __syncthreads()
#define DEVFN static __device__ __forceinline__
#define H2F(h) __half2float(h)
#define F2H(f) __float2half_rn(f)
#define AS_FLOAT(u) __uint_as_float(u)
#define AS_UINT(f) __float_as_uint(f)
#define H2F_BITS(u) __half2float(__ushort_as_half((ushort)((u) & 0xFFFFu)))
static __device__ __forceinline__ float WARP_SUM(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
static __device__ __forceinline__ float WARP_MAX(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
#define EXP2(x) exp2f(x)
#define FLOAT4(a, b, c, d) make_float4(a, b, c, d)
#define SHFL_XOR(v, o) __shfl_xor_sync(0xffffffffu, v, o)
#define SHFL(v, l) __shfl_sync(0xffffffffu, v, l)
#define BYTE_F(u, b) __uint_as_float(__byte_perm((u), 0x4B000000u, 0x7650u | (b)))
#define UINT4(a, b, c, d) make_uint4(a, b, c, d)
#define DP4A(a, b, c) __dp4a((int)(a), (int)(b), (int)(c))
#define FMAX(a, b) fmaxf(a, b)
#define FABS(a) fabsf(a)
#define ROUNDF(a) roundf(a)"""

_METAL_PRELUDE = """#include <metal_stdlib>
using namespace metal;
#define GID_X gid.x
#define GID_Y gid.y
#define GID_Z gid.z
#define LID_X lid.x
#define LID_Y lid.y
#define LID_Z lid.z
#define GLOBAL device
#define SHARED threadgroup
#define BARRIER() threadgroup_barrier(mem_flags::mem_threadgroup)
#define DEVFN static inline
#define H2F(h) float(h)
#define F2H(f) half(f)
#define AS_FLOAT(u) as_type<float>(u)
#define AS_UINT(f) as_type<uint>(f)
#define H2F_BITS(u) float(as_type<half>((ushort)((u) & 0xFFFFu)))
#define WARP_SUM(v) simd_sum(v)
#define WARP_MAX(v) simd_max(v)
#define EXP2(x) exp2(x)
#define FLOAT4(a, b, c, d) float4(a, b, c, d)
#define SHFL_XOR(v, o) simd_shuffle_xor(v, (ushort)(o))
#define SHFL(v, l) simd_shuffle(v, (ushort)(l))
#define BYTE_F(u, b) as_type<float>((((u) >> (8*(b))) & 0xFFu) | 0x4B000000u)
#define UINT4(a, b, c, d) uint4(a, b, c, d)
static inline int DP4A(int a, int b, int c) {
  for (int i = 0; i < 32; i += 8) c += ((a << (24 - i)) >> 24) * ((b << (24 - i)) >> 24);
  return c;
}
#define FMAX(a, b) fmax(a, b)
#define FABS(a) fabs(a)
#define ROUNDF(a) round(a)"""

# griddepcontrol (PTX ISA 7.8, sm_90): defined only in sources that use it, so "griddepcontrol.wait" in a source means the
# kernel waits (the CUDA graph patch keys programmatic edges on that); a harness may define the two macros first
_CUDA_PDL = """#ifndef GRID_WAIT
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define GRID_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#else
#define GRID_WAIT()
#endif
#endif
#ifndef GRID_TRIGGER
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define GRID_TRIGGER() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#else
#define GRID_TRIGGER()
#endif
#endif"""
# integer mma.sync (PTX ISA 7.0, sm_80+): defined only in sources that use it; a harness may define the macros first
_CUDA_MMA = """#ifndef MMA_K32
#define MMA_K32(c, a, b0, b1) asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \\
  : "+r"((c)[0]), "+r"((c)[1]), "+r"((c)[2]), "+r"((c)[3]) : "r"((a)[0]), "r"((a)[1]), "r"((a)[2]), "r"((a)[3]), "r"(b0), "r"(b1))
#define MMA_K16(c, a0, a1, b0) asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};" \\
  : "+r"((c)[0]), "+r"((c)[1]), "+r"((c)[2]), "+r"((c)[3]) : "r"(a0), "r"(a1), "r"(b0))
#define CP_ASYNC16(dst, src) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src) : "memory")
#define CP_ASYNC_WAIT() asm volatile("cp.async.commit_group;\\n cp.async.wait_group 0;" ::: "memory")
#define CP_ASYNC_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define CP_ASYNC_WAIT_PENDING(n) asm volatile("cp.async.wait_group " #n ";" ::: "memory")
#define CP_ASYNC_N(dst, src, n) asm volatile("cp.async.ca.shared.global [%0], [%1], " #n ";" :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src) : "memory")
#endif
#ifndef MMA_F16
#define MMA_F16(c, a, b0, b1) asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \\
  : "+f"((c)[0]), "+f"((c)[1]), "+f"((c)[2]), "+f"((c)[3]) : "r"((a)[0]), "r"((a)[1]), "r"((a)[2]), "r"((a)[3]), "r"(b0), "r"(b1))
#define LDSM_X4_T(r, p) asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" \\
  : "=r"((r)[0]), "=r"((r)[1]), "=r"((r)[2]), "=r"((r)[3]) : "r"((unsigned)__cvta_generic_to_shared(p)))
static __device__ __forceinline__ unsigned PACK_H2(float lo, float hi) { unsigned r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
#endif
#ifndef MMA_TF32
#define MMA_TF32(c, a, b0, b1) asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \\
  : "+f"((c)[0]), "+f"((c)[1]), "+f"((c)[2]), "+f"((c)[3]) : "r"(__float_as_uint((a)[0])), "r"(__float_as_uint((a)[1])), \\
    "r"(__float_as_uint((a)[2])), "r"(__float_as_uint((a)[3])), "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)))
#endif"""
_METAL_PDL = """#ifndef GRID_WAIT
#define GRID_WAIT()
#endif
#ifndef GRID_TRIGGER
#define GRID_TRIGGER()
#endif"""
# the first statement of every kernel that waits on its grid: its dependents may launch now (programmatic dependent launch)
TRIGGER = "  GRID_TRIGGER();  // the next kernel may launch now: its loads before GRID_WAIT() overlap this one\n"

LANGUAGES = ("CUDA", "METAL")

_SHARED_DECL = re.compile(r"^[ \t]*SHARED[ \t]+(\w+)[ \t]+([^;]+);[ \t]*$", re.M)

def _declarators(decls: str) -> list[str]:
  """`a[4], b[2][8]` -> ['a[4]', 'b[2][8]'] (commas inside brackets kept)."""
  out, depth, cur = [], 0, ""
  for ch in decls:
    depth += (ch == "[") - (ch == "]")
    if ch == "," and depth == 0: out.append(cur.strip()); cur = ""
    else: cur += ch
  return out + [cur.strip()]

def side_by_side(name: str, kernels: Sequence[SourceKernel]) -> SourceKernel:
  """One launch running several kernels side by side: workgroups [o_i, o_i + n_i) of a 1D grid run kernel i (its own grid
  of n_i workgroups, flattened x-major), with its own parameters (renamed k<i>_<name>), its workgroup memory (declared at
  the kernel's scope, which is where MSL allows it) and its GRID_WAIT(). For kernels that read the same input and would
  otherwise be two nodes of a chain (a routed and a shared expert): one launch, one dependency edge, and the workgroups
  of both in flight together. The kernels must share one workgroup shape, and all wait on their grid or none does (the
  contract of programmatic dependent launch holds per workgroup)."""
  if len({k.local_size for k in kernels}) != 1: raise ValueError(f"{name}: the kernels have different workgroup shapes")
  if len({_uses_pdl(k) for k in kernels}) != 1: raise ValueError(f"{name}: some kernels wait on their grid and some do not")
  params: list[Param] = []
  shared: list[str] = []
  parts: list[str] = []
  off = 0
  for i, k in enumerate(kernels):
    pre, body, names = f"k{i}_", k.body, []
    for m in _SHARED_DECL.finditer(body):
      for d in _declarators(m.group(2)):
        names.append(re.match(r"\w+", d).group(0))
        shared.append(f"  SHARED {m.group(1)} {pre}{d};")
    body = _SHARED_DECL.sub("", body)
    for n in names: body = re.sub(rf"\b{n}\b", pre + n, body)
    gx, gy, gz = k.global_size
    for g, v in (("GID_X", "gx"), ("GID_Y", "gy"), ("GID_Z", "gz")): body = re.sub(rf"\b{g}\b", pre + v, body)
    alias = " ".join(f"{'' if p.written else 'const '}GLOBAL {_CTYPE[p.dtype]}* {p.name} = {pre}{p.name};" for p in k.params)
    params += [replace(p, name=pre + p.name) for p in k.params]
    n = gx * gy * gz
    parts.append(f"""  if (wg >= {off} && wg < {off + n}) {{  // {k.name}
    const int {pre}w = wg - {off}, {pre}gx = {pre}w % {gx}, {pre}gy = ({pre}w / {gx}) % {gy}, {pre}gz = {pre}w / {gx * gy};
    (void){pre}gx; (void){pre}gy; (void){pre}gz;
    {alias}
{body}
  }}""")
    off += n
  helpers = "\n".join(dict.fromkeys(k.helpers for k in kernels if k.helpers))
  body = "\n".join(shared) + "\n  const int wg = GID_X;\n" + "\n".join(parts)
  return SourceKernel(name, tuple(params), body, (off, 1, 1), kernels[0].local_size, helpers, all(k.trigger for k in kernels))

def _sliced_from(t, Tmax: int):
  """t (T, ...) as the (Tmax, ...) tensor it is the first T rows of (reshapes of its trailing axes aside), or None: a
  kernel's output sliced back to a symbolic chunk length T and fed to the next kernel needs no padded copy."""
  u, T = t.uop, t.shape[0]
  while u.op is Ops.RESHAPE and u.src[0].shape and u.src[0].shape[0] is T: u = u.src[0]
  if u.op is not Ops.SHRINK: return None
  src, bounds = u.src[0], u.marg
  same = lambda a, b: a is b or (isinstance(a, int) and isinstance(b, int) and a == b)   # no symbolic comparisons
  if not (same(src.shape[0], Tmax) and same(bounds[0][0], 0) and same(bounds[0][1], T) and
          all(same(lo, 0) and same(hi, n) for (lo, hi), n in zip(bounds[1:], src.shape[1:]))): return None
  return Tensor(src).reshape(Tmax, *t.shape[1:])

def to_bound(*ts, slices: bool = True):
  """Tensors whose first axis is a chunk length T, as tensors of T's bound Tmax where T is symbolic (a prefill chunk of
  variable length: kernels take concrete shapes): (the tensors, T, Tmax). Callers slice their results back to T. The rows
  past T are zeros, or whatever a kernel left in the rows past T of the tensor t was sliced from (they are not read back;
  slices=False, Fusions.slices off: zeros, every tensor padded by a copy)."""
  T = ts[0].shape[0]
  if isinstance(T, int): return ts, T, T
  Tmax = int(T.vmax)
  return tuple(u if slices and (u := _sliced_from(t, Tmax)) is not None else t.pad(((0, Tmax - T),) + ((0, 0),) * (t.ndim - 1))
               for t in ts), T, Tmax

def _uses_pdl(k: SourceKernel) -> bool: return "GRID_WAIT" in k.body
def uses_mma(k: SourceKernel) -> bool: return "MMA_" in k.body or "CP_ASYNC" in k.body

def has_mma(device: str) -> bool:
  """The device compiles the CUDA-only tensor-core macros (MMA_*, CP_ASYNC16): a CUDA device of sm_80 or newer."""
  return _sm(device) >= 80

def _sm(device: str) -> int:
  """The CUDA architecture's number (sm_90: 90), 0 for any other device."""
  arch = getattr(Device[device].renderer.target, "arch", "") or ""
  return int(arch[3:]) if language_of(device) == "CUDA" and arch.startswith("sm_") and arch[3:].isdigit() else 0

def max_smem(device: str) -> int:
  """Bytes of workgroup memory one launch may have on `device` (CUDA: the opt-in limit of its architecture; static and
  dynamic together), the most a SourceKernel's smem may ask."""
  sm = _sm(device)
  return 232448 if sm >= 90 else 166912 if sm in (80, 87) else 101376 if sm >= 86 else 49152

def language_of(device: str) -> str | None:
  """The source language the device's renderer compiles (None: no hand-written kernels there)."""
  from tinygrad.renderer.cstyle import CUDARenderer, MetalRenderer
  ren = Device[device].renderer
  return "CUDA" if isinstance(ren, CUDARenderer) else "METAL" if isinstance(ren, MetalRenderer) else None

def render(k: SourceKernel, language: str) -> str:
  """The complete source of `k` in `language` (CUDA or METAL)."""
  def ctype(p: Param) -> str: return ("" if p.written else "const ") + _CTYPE[p.dtype]
  if language == "CUDA":
    # a kernel that waits on its grid gets no __restrict__: its loads are then ordinary ones, which ptxas keeps in program
    # order around GRID_WAIT() (read-only `ld.global.nc` loads it moves across: weights after it, or x before it)
    restrict = lambda p: "" if _uses_pdl(k) else " __restrict__"
    sig = ", ".join(f"{ctype(p)}*{restrict(p)} {p.name}" for p in k.params)
    bounds = f"{k.threads}" + (f", {k.min_blocks}" if k.min_blocks > 1 else "")
    head = f'extern "C" __global__ void __launch_bounds__({bounds}) {k.function_name}({sig})'
    prelude = _CUDA_PRELUDE + ("\n" + _CUDA_PDL if _uses_pdl(k) else "") + ("\n" + _CUDA_MMA if uses_mma(k) else "")
  elif language == "METAL":
    sig = ", ".join([f"{'' if p.written else 'const '}device {_CTYPE[p.dtype]}* {p.name}" for p in k.params] +
                    ["uint3 gid [[threadgroup_position_in_grid]]", "uint3 lid [[thread_position_in_threadgroup]]"])
    head = f"kernel void {k.function_name}({sig})"
    if uses_mma(k): raise ValueError(f"{k.name}: MMA_K32 / MMA_K16 / MMA_TF32 / CP_ASYNC16 have no Metal rendering")
    prelude = _METAL_PRELUDE + ("\n" + _METAL_PDL if _uses_pdl(k) else "")
  else: raise ValueError(f"no source language {language!r} (have {', '.join(LANGUAGES)})")
  return f"{prelude}\n{k.helpers}\n{head} {{\n{TRIGGER if _uses_pdl(k) and k.trigger else ''}{k.body}\n}}\n"

def _param(u: UOp) -> UOp:
  while u.op is not Ops.PARAM: u = u.src[0]
  return u

_rewrite: Callable[[SourceKernel], SourceKernel] | None = None
_caches: list = []

def cached(f):
  """functools.lru_cache for the functions that build programs from source kernels: set_rewrite() empties them all."""
  c = functools.lru_cache(maxsize=None)(f)
  _caches.append(c)
  return c

def set_rewrite(fn: Callable[[SourceKernel], SourceKernel] | None) -> None:
  """Every source kernel built into a program from now on goes through fn first (None: as written), e.g. a measurement's
  hollowed bodies (tools.kernel_costs); the programs already built are dropped, so the next capture builds them again."""
  global _rewrite
  _rewrite = fn
  for c in _caches: c.cache_clear()

def program(k: SourceKernel, device: str, trigger: bool = True):
  """A custom_kernel body that runs `k` on `device`: called with the placeholders of the custom_kernel sources (in the
  order of k.params), it returns the PROGRAM, with the launch dims and which buffers it writes and reads. trigger=False
  (Fusions.trigger off): no GRID_TRIGGER() even where k would start with one."""
  language = language_of(device)
  if language is None: raise ValueError(f"{k.name}: device {device} compiles no hand-written source")
  if _rewrite is not None: k = _rewrite(k)
  if k.smem > max_smem(device): raise ValueError(f"{k.name}: {k.smem} bytes of workgroup memory, more than a launch on {device} may have")
  return source_program(k.name, k.params, render(k if trigger else replace(k, trigger=False), language), k.global_size, k.local_size, device,
                        smem=k.smem)

def source_program(name: str, params: Sequence[Param], source: str, global_size: tuple[int, int, int], local_size: tuple[int, int, int],
                   device: str, core_id: int = 0, smem: int = 0):
  """The custom_kernel body of a complete `source` whose function `name` takes the buffers `params` in order (then, with
  core_id > 0, the CPU runtime's thread index in 0..core_id-1, the thread count being global_size[0]); smem: bytes of
  dynamic workgroup memory a launch gets."""
  def fxn(*placeholders: UOp) -> UOp:
    if len(placeholders) != len(params): raise ValueError(f"{name}: {len(placeholders)} buffers for {len(params)} parameters")
    ps = [_param(p) for p in placeholders]
    for p, spec in zip(ps, params):
      if p.dtype != spec.dtype: raise ValueError(f"{name}: parameter {spec.name} is {spec.dtype}, got a {p.dtype} buffer")
    slots = [p.arg.slot for p in ps]
    var = (UOp.param(len(ps), dtypes.int, vmin_vmax=(0, core_id - 1), name="core_id", addrspace=AddrSpace.ALU),) if core_id else ()
    sink = UOp.sink(*ps, arg=KernelInfo(name=name))
    info = ProgramInfo(name, global_size, local_size, var, tuple(sorted(slots)),
                       outs=tuple(sorted(s for s, q in zip(slots, params) if q.written)),
                       ins=tuple(sorted(s for s, q in zip(slots, params) if not q.written or q.read)), target=Device[device].renderer.target,
                       smem=smem)
    return UOp(Ops.PROGRAM, src=(sink, UOp(Ops.LINEAR, src=(*ps, sink)), UOp(Ops.SOURCE, arg=source)), arg=info)
  return fxn
