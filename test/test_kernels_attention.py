"""apps/kernels/mla_attention.py: the MLA decode attention kernels and their portable reference.

- the reference (tinygrad ops, any device) vs a float64 numpy implementation of the formula, cache row included;
- the rendered CUDA and Metal sources EXECUTED on the CPU by a small emulator of the dialect (each GPU thread a fiber,
  warp shuffles / simd reductions and workgroup barriers as fiber barriers, UBSan for misaligned float4 and local-array
  bounds, NaN guards around every buffer and in the cache rows the kernel may not read), vs float64 numpy;
- CUDA render + nvcc compile + TinyJit replay (DEV=NULL:NVCC:sm_90) for the three models' shapes, when nvcc is there;
- on a CUDA / Metal device (the H100): the kernels vs the reference, single calls and a TinyJit decode loop.
"""
import math, shutil, subprocess
from pathlib import Path
import numpy as np
import pytest
from nvcc import needs_nvcc, run_nvcc_script
from tinygrad import Tensor, TinyJit, Device, UOp, dtypes
from apps.kernels import render, language_of, SourceKernel, _CTYPE
from apps.kernels.mla_attention import (AttentionShape, attend_kernel, combine_kernel, mla_decode_attention,
                                        mla_decode_attention_reference, SPLITS, MIN_CHUNK)

REPO = Path(__file__).resolve().parent.parent
SMALL = AttentionShape(n_head=4, kv_lora=64, qk_nope=32, qk_rope=16)
ODD = AttentionShape(n_head=6, kv_lora=72, qk_nope=8, qk_rope=12)     # lanes past kv_lora / qk_rope, 2 heads per warp, 3 warps
GLM = AttentionShape(n_head=20, kv_lora=512, qk_nope=192, qk_rope=64)
DSV2 = AttentionShape(n_head=16, kv_lora=512, qk_nope=128, qk_rope=64)  # Youtu-LLM-2B has the same attention shape
TINY = AttentionShape(n_head=4, kv_lora=256, qk_nope=96, qk_rope=32)    # the -tiny presets

# ---------------------------------------------------------------- data and the float64 formula

def make_case(s: AttentionShape, pos: int, max_context: int, seed: int = 0, theta: float = 10000.0) -> dict:
  """Random inputs; cache rows < pos random, rows >= pos NaN (nothing may read them: the new row is computed, not read)."""
  rng = np.random.default_rng(seed)
  ang = np.arange(max_context)[:, None] * (1.0 / theta ** (np.arange(0, s.qk_rope, 2) / s.qk_rope))[None, :]
  cache = np.full((max_context, s.kv_lora + s.qk_rope), np.nan, np.float32)
  cache[:pos] = rng.standard_normal((pos, s.kv_lora + s.qk_rope))
  return dict(q_lat=rng.standard_normal((s.n_head, s.kv_lora)).astype(np.float32),
              q_raw=rng.standard_normal((s.n_head, s.qk_nope + s.qk_rope)).astype(np.float32),
              kv_raw=(rng.standard_normal(s.kv_lora + s.qk_rope) * 3).astype(np.float32),
              kv_norm_w=(1 + 0.3 * rng.standard_normal(s.kv_lora)).astype(np.float32), cache=cache,
              rope_cos=np.cos(ang).astype(np.float32), rope_sin=np.sin(ang).astype(np.float32), pos=np.array([pos], np.int32),
              scale=1 / math.sqrt(s.qk_nope + s.qk_rope), eps=1e-6)

def numpy_attention(s: AttentionShape, c: dict) -> tuple[np.ndarray, np.ndarray]:
  """(out (H, kv_lora), new cache row) in float64, straight from the formula."""
  f = lambda k: c[k].astype(np.float64)
  p = int(c["pos"][0])
  cos, sin = f("rope_cos")[p], f("rope_sin")[p]
  def rope(x):  # interleaved pairs (x0, x1) rotated; the rotated even lanes, then the odd ones
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return np.concatenate([x0 * cos - x1 * sin, x1 * cos + x0 * sin], axis=-1)
  kv = f("kv_raw")
  c_kv = kv[:s.kv_lora] / np.sqrt(np.mean(kv[:s.kv_lora] ** 2) + c["eps"]) * f("kv_norm_w")
  row = np.concatenate([c_kv, rope(kv[s.kv_lora:])])
  keys = np.concatenate([f("cache")[:p], row[None]])
  q = np.concatenate([f("q_lat"), rope(f("q_raw")[:, s.qk_nope:])], axis=-1)
  sc = q @ keys.T * c["scale"]
  pr = np.exp(sc - sc.max(-1, keepdims=True))
  return (pr / pr.sum(-1, keepdims=True)) @ keys[:, :s.kv_lora], row

def rel_err(a, b) -> float: return float(np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max())

def check_cache(s: AttentionShape, c: dict, cache: np.ndarray, row: np.ndarray, rtol: float = 2e-6):
  p = int(c["pos"][0])
  np.testing.assert_array_equal(cache[:p], c["cache"][:p])              # rows before pos untouched
  assert np.isnan(cache[p + 1:]).all()                                     # rows after pos untouched
  np.testing.assert_allclose(cache[p], row, rtol=rtol, atol=rtol * np.abs(row).max())

KW = lambda s, c: dict(n_head=s.n_head, kv_lora=s.kv_lora, qk_nope=s.qk_nope, qk_rope=s.qk_rope, scale=c["scale"], eps=c["eps"])
INPUTS = ("q_lat", "q_raw", "kv_raw", "kv_norm_w", "cache", "rope_cos", "rope_sin", "pos")

# ---------------------------------------------------------------- the reference on the default device

@pytest.mark.parametrize("pos", [0, 1, 37, 200])
def test_reference_matches_numpy(pos):
  c = make_case(SMALL, pos, 256, seed=pos)
  t = {k: Tensor(c[k]) for k in INPUTS}
  out = mla_decode_attention_reference(*[t[k] for k in INPUTS], **KW(SMALL, c)).numpy()
  ref, row = numpy_attention(SMALL, c)
  assert out.shape == (SMALL.n_head, SMALL.kv_lora) and rel_err(out, ref) < 1e-5
  check_cache(SMALL, c, t["cache"].numpy(), row)

def test_reference_symbolic_pos():
  """With a bound symbolic position (as in the model's decode) the reference reads the same rows."""
  c = make_case(SMALL, 5, 64, seed=1)
  t = {k: Tensor(c[k]) for k in INPUTS}
  v = UOp.variable("start_pos", 0, 63).bind(5)
  out = mla_decode_attention_reference(*[t[k] for k in INPUTS[:-1]], v, **KW(SMALL, c)).numpy()
  ref, row = numpy_attention(SMALL, c)
  assert rel_err(out, ref) < 1e-5
  check_cache(SMALL, c, t["cache"].numpy(), row)

# ---------------------------------------------------------------- a CPU emulator of the kernel dialect

_EMU_H = r"""#pragma once
#include <ucontext.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
// The GPU threads of one workgroup are fibers on one OS thread. A fiber runs until it waits at a barrier (warp shuffles and
// simd reductions are barriers of the warp's 32 fibers, BARRIER() one of the workgroup) or ends; the scheduler then resumes
// the first fiber, in a fixed priority order, that can go on: the first warp runs as far ahead of the others as the
// barriers allow (with the reverse order, the last one does), so a missing barrier shows as a different result.
struct EmuDim3 { unsigned x, y, z; };
struct EmuBar { int n, count, gen; };
struct EmuFiber { ucontext_t ctx; EmuDim3 lid; bool done; EmuBar* bar; int gen; };
static ucontext_t emu_sched;
static EmuFiber* emu_f;
static int emu_cur;
static EmuDim3 emu_gid, emu_local;
static EmuBar emu_wg;
static std::vector<EmuBar> emu_warp;
static std::vector<unsigned> emu_lanes;  // one 32-bit value per thread, for the exchanges
static void emu_wait(EmuBar& b) {
  if (++b.count == b.n) { b.count = 0; b.gen++; return; }
  EmuFiber& f = emu_f[emu_cur];
  f.bar = &b; f.gen = b.gen;
  swapcontext(&f.ctx, &emu_sched);  // resumed once the barrier's generation moved on
  f.bar = nullptr;
}
static int emu_thread() { EmuDim3 l = emu_f[emu_cur].lid; return (int)(l.x + emu_local.x * (l.y + emu_local.y * l.z)); }
template <class T> static T emu_shfl_xor(T v, int o) {
  static_assert(sizeof(T) == 4, "32-bit shuffles only");
  int t = emu_thread(), w = t / 32, lane = t % 32;
  memcpy(&emu_lanes[32*w + lane], &v, 4); emu_wait(emu_warp[w]);
  T r; memcpy(&r, &emu_lanes[32*w + (lane ^ o)], 4); emu_wait(emu_warp[w]);
  return r;
}
static float emu_reduce(float v, bool is_max) {
  int t = emu_thread(), w = t / 32, lane = t % 32;
  memcpy(&emu_lanes[32*w + lane], &v, 4); emu_wait(emu_warp[w]);
  float r, x;
  memcpy(&r, &emu_lanes[32*w], 4);
  for (int i = 1; i < 32; i++) { memcpy(&x, &emu_lanes[32*w + i], 4); r = is_max ? (x > r ? x : r) : r + x; }
  emu_wait(emu_warp[w]);
  return r;
}
static void emu_barrier() { emu_wait(emu_wg); }
// workgroup memory lives in one section, filled with NaN bits before every workgroup (uninitialized on a GPU)
#define EMU_SHARED static __attribute__((section("emu_shared")))
extern "C" char __start_emu_shared[] __attribute__((weak)), __stop_emu_shared[] __attribute__((weak));
"""

_CUDA_SHIM = r"""#pragma once
#include <math.h>
#include "emu.h"
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ EMU_SHARED
#define __restrict__ __restrict
#define __syncthreads() emu_barrier()
#define blockIdx emu_gid
#define threadIdx (emu_f[emu_cur].lid)
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
static inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int o) { return emu_shfl_xor(v, o); }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
typedef _Float16 half;
static inline float __half2float(half h) { return (float)h; }
"""

# Metal's names only: a CUDA-ism in the Metal source (exp2f, fmaxf, make_float4, __shfl...) fails to compile here
_METAL_SHIM = r"""#pragma once
#include "emu.h"
#define kernel
#define device
#define threadgroup EMU_SHARED
namespace metal {
enum class mem_flags { mem_none, mem_threadgroup, mem_device };
static inline void threadgroup_barrier(mem_flags) { emu_barrier(); }
static inline float simd_sum(float v) { return emu_reduce(v, false); }
static inline float simd_max(float v) { return emu_reduce(v, true); }
template <class T> static inline T simd_shuffle_xor(T v, unsigned short o) { return emu_shfl_xor(v, o); }
static inline float exp2(float x) { return __builtin_exp2f(x); }
static inline float sqrt(float x) { return __builtin_sqrtf(x); }
typedef unsigned int uint; typedef unsigned char uchar; typedef unsigned short ushort; typedef _Float16 half;
struct uint3 { uint x, y, z; };
struct alignas(16) float4 { float x, y, z, w; float4() = default; float4(float a, float b, float c, float d) : x(a), y(b), z(c), w(d) {} };
struct alignas(16) uint4 { uint x, y, z, w; };
template <class T, class U> static inline T as_type(U u) { T t; memcpy(&t, &u, sizeof(T)); return t; }
}
#define exp2f exp2f_is_not_metal
#define sqrtf sqrtf_is_not_metal
#define fmaxf fmaxf_is_not_metal
"""

_MAIN = r"""
static void** emu_args;
static void emu_entry() { KERNEL_CALL; emu_f[emu_cur].done = true; }
int main(int argc, char** argv) {
  // argv[1]: folder of b<i>.bin, the buffers with GUARD bytes before and after, written back in place; argv[2]: f | r (order)
  const int NP = NPARAMS, GX = GRID_X, GY = GRID_Y, GZ = GRID_Z, LX = LOCAL_X, LY = LOCAL_Y, LZ = LOCAL_Z, NT = LX*LY*LZ;
  const bool rev = argv[2][0] == 'r';
  void* args[NP]; char* mem[NP]; long size[NP];
  for (int i = 0; i < NP; i++) {
    char fn[4096]; snprintf(fn, sizeof fn, "%s/b%d.bin", argv[1], i);
    FILE* f = fopen(fn, "rb"); fseek(f, 0, SEEK_END); size[i] = ftell(f); fseek(f, 0, SEEK_SET);
    mem[i] = (char*)aligned_alloc(64, (size[i] + 63) / 64 * 64);
    if (fread(mem[i], 1, size[i], f) != (size_t)size[i]) return 3;
    fclose(f); args[i] = mem[i] + GUARD;
  }
  emu_args = args; emu_local = {(unsigned)LX, (unsigned)LY, (unsigned)LZ};
  std::vector<EmuFiber> fib(NT); emu_f = fib.data();
  const size_t STACK = 1 << 18;
  std::vector<char> stacks((size_t)NT * STACK);
  for (int z = 0; z < GZ; z++) for (int y = 0; y < GY; y++) for (int x = 0; x < GX; x++) {
    emu_gid = {(unsigned)x, (unsigned)y, (unsigned)z}; emu_wg = {NT, 0, 0};
    emu_warp.assign(NT / 32, EmuBar{32, 0, 0}); emu_lanes.assign(NT, 0u);
    if (__start_emu_shared) memset(__start_emu_shared, 0xff, __stop_emu_shared - __start_emu_shared);
    for (int t = 0; t < NT; t++) {
      fib[t].lid = {(unsigned)(t % LX), (unsigned)(t / LX % LY), (unsigned)(t / (LX*LY))}; fib[t].done = false; fib[t].bar = nullptr;
      getcontext(&fib[t].ctx);
      fib[t].ctx.uc_stack.ss_sp = &stacks[t * STACK]; fib[t].ctx.uc_stack.ss_size = STACK; fib[t].ctx.uc_link = &emu_sched;
      makecontext(&fib[t].ctx, emu_entry, 0);
    }
    for (;;) {
      int pick = -1, left = 0;
      for (int k = 0; k < NT; k++) {
        int t = rev ? NT - 1 - k : k;
        if (fib[t].done) continue;
        left++;
        if (pick < 0 && (!fib[t].bar || fib[t].bar->gen != fib[t].gen)) pick = t;
      }
      if (!left) break;
      if (pick < 0) { fprintf(stderr, "deadlock in workgroup %d %d %d\n", x, y, z); return 2; }
      emu_cur = pick; swapcontext(&emu_sched, &fib[pick].ctx);
    }
  }
  for (int i = 0; i < NP; i++) {
    char fn[4096]; snprintf(fn, sizeof fn, "%s/b%d.bin", argv[1], i);
    FILE* f = fopen(fn, "wb"); fwrite(mem[i], 1, size[i], f); fclose(f);
  }
  return 0;
}
"""
_EXES: dict[str, Path] = {}  # compiled emulations of a source, for the session
GUARD = 64  # bytes of NaN (or 0x7f7f7f7f) around every buffer: the emulator fails on a write there, a read there gives NaN

def _compile(k: SourceKernel, language: str, work: Path) -> Path:
  if shutil.which("g++") is None: pytest.skip("g++ is not installed")
  work.mkdir(parents=True, exist_ok=True)
  (work / "emu.h").write_text(_EMU_H)
  (work / "cuda_fp16.h").write_text(_CUDA_SHIM)
  (work / "metal_stdlib").write_text(_METAL_SHIM)
  cast = lambda i, p: f"({'' if p.written else 'const '}{_CTYPE[p.dtype]}*)emu_args[{i}]"
  args = [cast(i, p) for i, p in enumerate(k.params)]
  if language == "METAL": args += ["metal::uint3{emu_gid.x, emu_gid.y, emu_gid.z}", "metal::uint3{lid_.x, lid_.y, lid_.z}"]
  call = f"EmuDim3 lid_ = emu_f[emu_cur].lid; (void)lid_; {k.function_name}({', '.join(args)})"
  main = _MAIN.replace("KERNEL_CALL", call).replace("NPARAMS", str(len(k.params))).replace("GUARD", str(GUARD))
  for n, v in zip(("GRID_X", "GRID_Y", "GRID_Z", "LOCAL_X", "LOCAL_Y", "LOCAL_Z"), (*k.global_size, *k.local_size)): main = main.replace(n, str(v))
  code = render(k, language) + main
  if (exe := _EXES.get(code)) is None:
    src = work / f"{k.function_name}_{language}.cpp"
    src.write_text(code)
    exe = src.with_suffix("")
    r = subprocess.run(["g++", "-std=c++17", "-O1", "-w", "-fsanitize=alignment,bounds", "-fno-sanitize-recover=all", f"-I{work}",
                        "-o", str(exe), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, f"{language} source does not compile:\n{r.stderr[-4000:]}"
    _EXES[code] = exe
  return exe

def emulate(k: SourceKernel, language: str, bufs: list[np.ndarray], work: Path) -> None:
  """Run kernel k's rendered `language` source on the CPU over the numpy buffers (params in order; written ones updated
  in place), twice: first warp ahead and last warp ahead, which must agree bit for bit."""
  assert k.threads % 32 == 0 and len(bufs) == len(k.params)
  exe = _compile(k, language, work)
  guard = lambda b: np.full(GUARD // b.itemsize, np.nan if b.dtype == np.float32 else 0x7f7f7f7f, b.dtype)
  results = []
  for order in ("f", "r"):
    data = work / f"bufs_{order}"
    data.mkdir(exist_ok=True)
    for i, b in enumerate(bufs): np.concatenate([guard(b), b.reshape(-1), guard(b)]).tofile(data / f"b{i}.bin")
    r = subprocess.run([str(exe), str(data), order], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{k.name} ({language}) failed: {r.stderr[-3000:]}"
    got = []
    for i, (b, p) in enumerate(zip(bufs, k.params)):
      full = np.fromfile(data / f"b{i}.bin", dtype=b.dtype)
      g = GUARD // b.itemsize
      assert full[:g].tobytes() == guard(b).tobytes() and full[-g:].tobytes() == guard(b).tobytes(), f"{k.name}: write outside {p.name}"
      if not p.written: assert full[g:-g].tobytes() == b.tobytes(), f"{k.name}: wrote into read-only {p.name}"
      got.append(full[g:-g])
    results.append(got)
  for i, (b, p) in enumerate(zip(bufs, k.params)):
    assert results[0][i].tobytes() == results[1][i].tobytes(), f"{k.name}: {p.name} depends on the order warps run in (a missing barrier?)"
    if p.written: b.reshape(-1)[:] = results[0][i]

def emulate_attention(s: AttentionShape, c: dict, language: str, work: Path) -> tuple[np.ndarray, np.ndarray]:
  """Both kernels on the emulator: (out, cache after). Partials start as NaN: reading one that was not written shows."""
  attend, combine = attend_kernel(s, c["scale"], c["eps"]), combine_kernel(s)
  part = np.full((SPLITS, s.n_head, s.kv_lora), np.nan, np.float32)
  ml = np.full((SPLITS, s.n_head, 2), np.nan, np.float32)
  cache = c["cache"].copy()
  emulate(attend, language, [part, ml, cache] + [c[k] for k in INPUTS[:4]] + [c["rope_cos"], c["rope_sin"], c["pos"]], work)
  out = np.full((s.n_head, s.kv_lora), np.nan, np.float32)
  emulate(combine, language, [out, part, ml, c["pos"]], work)
  return out, cache

# pos: a single token, one partial split, several splits of MIN_CHUNK, chunks of more than MIN_CHUNK (ceil(n / SPLITS)),
# chunks of more than one shared-memory stage (stage_rows rows)
@pytest.mark.parametrize("shape,pos", [(SMALL, 0), (SMALL, 1), (SMALL, 37), (SMALL, 200), (ODD, 5), (ODD, 200), (SMALL, 1500), (ODD, 3000)],
                         ids=lambda v: f"h{v.n_head}_kv{v.kv_lora}_r{v.qk_rope}" if isinstance(v, AttentionShape) else str(v))
def test_kernels_emulated_cuda(shape, pos, tmp_path):
  assert MIN_CHUNK * SPLITS < 1500 and ODD.stage_rows * SPLITS < 3000
  c = make_case(shape, pos, 4096, seed=pos + 1)
  out, cache = emulate_attention(shape, c, "CUDA", tmp_path)
  ref, row = numpy_attention(shape, c)
  assert rel_err(out, ref) < 1e-5
  check_cache(shape, c, cache, row)

# glm-2001: 16-token chunks over two stages of 14 and 2 rows, and a split with one cached row (a masked tile)
@pytest.mark.parametrize("shape,pos", [(GLM, 101), (GLM, 2001), (DSV2, 9), (TINY, 40)], ids=["glm", "glm-2001", "dsv2", "tiny"])
def test_kernels_emulated_model_shapes(shape, pos, tmp_path):
  c = make_case(shape, pos, 2048, seed=7)
  out, cache = emulate_attention(shape, c, "CUDA", tmp_path)
  ref, row = numpy_attention(shape, c)
  assert rel_err(out, ref) < 1e-5
  check_cache(shape, c, cache, row)

def test_kernels_emulated_metal(tmp_path):
  """The Metal source (Metal's names only, simd reductions) computes the same."""
  for s, pos in ((ODD, 30), (GLM, 20)):
    c = make_case(s, pos, 64, seed=3)
    out, cache = emulate_attention(s, c, "METAL", tmp_path / s.__repr__().replace(" ", ""))
    ref, row = numpy_attention(s, c)
    assert rel_err(out, ref) < 1e-5
    check_cache(s, c, cache, row)

def test_kernels_emulated_decode_sequence(tmp_path):
  """Token after token into one cache (as a replayed capture does): every step reads the rows the earlier steps wrote."""
  s, n = SMALL, 12
  c = make_case(s, 0, 32, seed=11)
  rng = np.random.default_rng(12)
  cache_np = c["cache"].copy()
  for p in range(n):
    c.update(pos=np.array([p], np.int32), cache=cache_np, q_lat=rng.standard_normal(c["q_lat"].shape).astype(np.float32),
             kv_raw=rng.standard_normal(c["kv_raw"].shape).astype(np.float32))
    out, cache_np = emulate_attention(s, c, "CUDA", tmp_path)
    ref, row = numpy_attention(s, c)
    assert rel_err(out, ref) < 1e-5, p
    check_cache(s, c, cache_np, row)

# ---------------------------------------------------------------- Metal source; CUDA render + compile

def test_metal_render():
  for s in (SMALL, ODD, TINY, DSV2, GLM):
    for k in (attend_kernel(s, 0.1, 1e-6), combine_kernel(s)):
      src = render(k, "METAL")
      assert f"kernel void {k.function_name}(" in src and "simd_sum" in src
      assert not any(w in src for w in ("__shfl", "__syncthreads", "make_float4", "exp2f", "__shared__")), k.name

CUDA_SCRIPT = r"""
import apps
from tinygrad import Tensor, TinyJit, dtypes, GlobalCounters
from apps.kernels.mla_attention import mla_decode_attention
for H, nope, KV, R in ((16, 128, 512, 64), (20, 192, 512, 64), (4, 96, 256, 32)):
  MC = 4096
  cache = Tensor.zeros(MC, KV + R).contiguous().realize()
  cos, sin, w = Tensor.empty(MC, R // 2).realize(), Tensor.empty(MC, R // 2).realize(), Tensor.empty(KV).realize()
  @TinyJit
  def step(q_lat, q_raw, kv_raw, pos):
    return mla_decode_attention(q_lat, q_raw, kv_raw, w, cache, cos, sin, pos, n_head=H, kv_lora=KV, qk_nope=nope, qk_rope=R,
                                scale=0.07, eps=1e-6).realize()
  for i in range(3):
    args = [Tensor.empty(H, KV).realize(), Tensor.empty(H, nope + R).realize(), Tensor.empty(KV + R).realize(),
            Tensor([i], dtype=dtypes.int32).realize()]
    GlobalCounters.reset()
    out = step(*args)
    assert out.shape == (H, KV)
    if i == 0: print("KERNELS", GlobalCounters.kernel_count)
"""

@needs_nvcc
def test_cuda_compile_and_jit():
  """Rendered, compiled with nvcc for sm_90, and run inside a TinyJit (capture + replay) for the three models' shapes; each
  call is exactly the two kernels (the cache is written in place: no copy of it)."""
  out = run_nvcc_script(CUDA_SCRIPT)
  assert [int(l.split()[1]) for l in out.splitlines() if l.startswith("KERNELS")] == [2, 2, 2]

def test_bad_input_is_a_clear_error():
  with pytest.raises(ValueError, match="multiples of 4"): attend_kernel(AttentionShape(4, 66, 8, 16), 0.1, 1e-6)
  c = make_case(SMALL, 3, 16)
  t = {k: Tensor(c[k]) for k in INPUTS}
  with pytest.raises(ValueError, match=r"q_raw has shape \(4, 48\), expected \(4, 24\)"):
    mla_decode_attention(*[t[k] for k in INPUTS], **{**KW(SMALL, c), "qk_nope": 8})
  with pytest.raises(ValueError, match="pos is dtypes.float, expected dtypes.int"):
    mla_decode_attention(*[t[k] for k in INPUTS[:-1]], Tensor([3.0]), **KW(SMALL, c))
  if language_of(Device.DEFAULT) is None:
    with pytest.raises(ValueError, match="compiles no hand-written kernels"): mla_decode_attention(*[t[k] for k in INPUTS], **KW(SMALL, c))

# ---------------------------------------------------------------- on a GPU (the H100): kernel vs reference

GPU = Device.DEFAULT.split(":")[0] in ("CUDA", "NV", "METAL")
START_POS = lambda max_context: UOp.variable("start_pos", 0, max_context - 1)  # the reference compiled once for every position

@pytest.mark.skipif(not GPU, reason="needs a CUDA or Metal device")
@pytest.mark.parametrize("shape", [DSV2, GLM, TINY], ids=["h16", "h20", "tiny"])
def test_gpu_kernels_match_reference(shape):
  for pos in (0, 1, 100, 1000, 4095):
    c = make_case(shape, pos, 4096, seed=pos)
    c["cache"][pos + 1:] = 0.0  # NaN rows are for the emulator; here a wrong read would show as a mismatch instead
    tk, tr = {k: Tensor(c[k]) for k in INPUTS}, {k: Tensor(c[k]) for k in INPUTS}
    out = mla_decode_attention(*[tk[k] for k in INPUTS], **KW(shape, c)).numpy()
    ref = mla_decode_attention_reference(*[tr[k] for k in INPUTS[:-1]], START_POS(4096).bind(pos), **KW(shape, c)).numpy()
    ref64, row = numpy_attention(shape, c)
    assert rel_err(out, ref.astype(np.float64)) < 1e-5, pos
    assert rel_err(out, ref64) < 1e-5, pos
    cache, cache_ref = tk["cache"].numpy(), tr["cache"].numpy()
    np.testing.assert_array_equal(np.delete(cache, pos, 0), np.delete(c["cache"], pos, 0))
    np.testing.assert_allclose(cache[pos], cache_ref[pos], rtol=2e-6, atol=2e-6 * np.abs(row).max())

@pytest.mark.skipif(not GPU, reason="needs a CUDA or Metal device")
def test_gpu_jit_decode_loop():
  """A TinyJit'd step replayed token after token (graph replays) vs the reference on its own cache."""
  s, n, mc = GLM, 40, 256
  c = make_case(s, 0, mc, seed=5)
  cache_k, cache_r = Tensor(np.zeros_like(c["cache"])).realize(), Tensor(np.zeros_like(c["cache"])).realize()
  fixed = {k: Tensor(c[k]).realize() for k in ("kv_norm_w", "rope_cos", "rope_sin")}
  @TinyJit
  def step(q_lat, q_raw, kv_raw, pos):
    return mla_decode_attention(q_lat, q_raw, kv_raw, fixed["kv_norm_w"], cache_k, fixed["rope_cos"], fixed["rope_sin"], pos,
                                **KW(s, c)).realize()
  rng = np.random.default_rng(6)
  for p in range(n):
    q_lat = rng.standard_normal((s.n_head, s.kv_lora)).astype(np.float32)
    q_raw = rng.standard_normal((s.n_head, s.qk_nope + s.qk_rope)).astype(np.float32)
    kv_raw = (rng.standard_normal(s.kv_lora + s.qk_rope) * 3).astype(np.float32)
    out = step(Tensor(q_lat), Tensor(q_raw), Tensor(kv_raw), Tensor([p], dtype=dtypes.int32)).numpy()
    ref = mla_decode_attention_reference(Tensor(q_lat), Tensor(q_raw), Tensor(kv_raw), fixed["kv_norm_w"], cache_r, fixed["rope_cos"],
                                         fixed["rope_sin"], START_POS(mc).bind(p), **KW(s, c)).numpy()
    assert rel_err(out, ref.astype(np.float64)) < 1e-5, p
  np.testing.assert_allclose(cache_k.numpy()[:n], cache_r.numpy()[:n], rtol=2e-6, atol=1e-5)
  assert not cache_k.numpy()[n:].any()
