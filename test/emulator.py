"""A CPU emulator of the hand-written kernels' dialect (apps/kernels): the rendered CUDA or Metal source of a kernel is
compiled with g++ against small shims of each language and run with every GPU thread a fiber: warp shuffles and simd
reductions are barriers of the warp's 32 fibers, BARRIER() one of the workgroup; UBSan checks misaligned float4 and
local-array bounds; NaN guards around every buffer catch writes outside it and reads of what was never written.
`emulate(kernel, language, buffers, work_dir)` runs it twice (first warp ahead, last warp ahead), which must agree."""
import shutil, subprocess
from pathlib import Path
import numpy as np
import pytest
from tinygrad import dtypes
from apps.kernels import render, SourceKernel, _CTYPE, _uses_pdl

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
template <class T> static T emu_shfl(T v, int l) { return emu_shfl_xor(v, (emu_thread() % 32) ^ (l & 31)); }
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
static long emu_cp_bytes;  // bytes the workgroups' cp.async copies moved (CUDA), printed at the end
// programmatic dependent launch (apps/kernels: GRID_WAIT()): before a workgroup runs, every buffer but the `weight`
// parameters is saved and overwritten with poison (NaN bits for floats, 0x7f7f7f7f for ints); the first GRID_WAIT() of the
// workgroup checks the poison is intact (nothing written before the wait) and puts the real contents back. A read before
// the wait sees poison (a wrong result or a fault), and a workgroup that never waits fails.
static int emu_np, emu_pdl, emu_waited;
static char** emu_data; static long* emu_bytes; static const unsigned char* emu_poison;  // 0: not poisoned (a weight)
static std::vector<std::vector<char>> emu_saved;
static void emu_pdl_begin() {
  emu_waited = 0;
  if (!emu_pdl) return;
  emu_saved.resize(emu_np);
  for (int i = 0; i < emu_np; i++) if (emu_poison[i]) {
    emu_saved[i].assign(emu_data[i], emu_data[i] + emu_bytes[i]); memset(emu_data[i], emu_poison[i], emu_bytes[i]);
  }
}
static void emu_grid_wait() {
  if (!emu_pdl || emu_waited) return;
  emu_waited = 1;
  for (int i = 0; i < emu_np; i++) if (emu_poison[i]) {
    for (long k = 0; k < emu_bytes[i]; k++)
      if ((unsigned char)emu_data[i][k] != emu_poison[i]) { fprintf(stderr, "buffer %d written before GRID_WAIT()\n", i); exit(4); }
    memcpy(emu_data[i], emu_saved[i].data(), emu_bytes[i]);
  }
}
static void emu_pdl_end() {
  if (emu_pdl && !emu_waited) { fprintf(stderr, "a workgroup ended without GRID_WAIT()\n"); exit(5); }
}
#define GRID_WAIT() emu_grid_wait()
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
#define __launch_bounds__(...)
#define __shared__ EMU_SHARED
// dynamic workgroup memory (the prelude defines it unless defined): the most a workgroup may have on sm_90, 227 KB
#define DYN_SHARED(type, name) EMU_SHARED __attribute__((aligned(16))) type name[232448 / sizeof(type)]
#define __restrict__ __restrict
#define __syncthreads() emu_barrier()
#define blockIdx emu_gid
#define threadIdx (emu_f[emu_cur].lid)
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
static inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
static inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; i++) c += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
  return c;
}
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int o) { return emu_shfl_xor(v, o); }
template <class T> static inline T __shfl_sync(unsigned, T v, int l) { return emu_shfl(v, l); }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
// integer mma.sync (MMA_K32 / MMA_K16): the warp's fragments meet in one exchange; every lane then computes its four
// outputs from the PTX ISA's fragment layouts (k = 32: A(r, k) in lane 4 (r % 8) + (k % 16) / 4, register (r >= 8) +
// 2 (k >= 16), byte k % 4; B(k, n) in lane 4 n + (k % 16) / 4, register k >= 16; k = 16: the first halves alone)
static std::vector<unsigned> emu_mma_in;
static void emu_mma(int* c, const unsigned* a, const unsigned* b, int K) {
  int t = emu_thread(), w = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
  if (emu_mma_in.size() < 6 * (size_t)(emu_local.x * emu_local.y * emu_local.z)) emu_mma_in.resize(6 * emu_local.x * emu_local.y * emu_local.z);
  unsigned* mine = &emu_mma_in[6 * t];
  for (int i = 0; i < 4; i++) mine[i] = i < K / 8 ? a[i] : 0u;
  mine[4] = b[0]; mine[5] = K == 32 ? b[1] : 0u;
  emu_wait(emu_warp[w]);
  const unsigned* in = &emu_mma_in[6 * 32 * w];
  auto byte = [](unsigned v, int i) { return (int)(signed char)(v >> (8 * i)); };
  for (int i = 0; i < 4; i++) {
    int r = g + 8 * (i >> 1), n = 2 * q + (i & 1), s = 0;
    for (int k = 0; k < K; k++) {
      int la = 4 * (r % 8) + (k % 16) / 4, lb = 4 * n + (k % 16) / 4;
      s += byte(in[6 * la + (r >= 8) + 2 * (k >= 16)], k % 4) * byte(in[6 * lb + 4 + (k >= 16)], k % 4);
    }
    c[i] += s;
  }
  emu_wait(emu_warp[w]);
}
// tf32 mma.sync (MMA_TF32, m16n8k8): A(r, k) in lane 4 (r % 8) + k % 4, register (r >= 8) + 2 (k >= 4); B(k, n) in lane
// 4 n + k % 4, register k >= 4; the inputs' low 13 mantissa bits are dropped as the tensor cores do (the products of two
// tf32 are exact in fp32), the sums in fp32
static inline float emu_tf32_bits(unsigned u) { u &= 0xffffe000u; float f; memcpy(&f, &u, 4); return f; }
static void emu_mma_tf32(float* c, const float* a, float b0, float b1) {
  int t = emu_thread(), w = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
  if (emu_mma_in.size() < 6 * (size_t)(emu_local.x * emu_local.y * emu_local.z)) emu_mma_in.resize(6 * emu_local.x * emu_local.y * emu_local.z);
  unsigned* mine = &emu_mma_in[6 * t];
  memcpy(mine, a, 16); memcpy(mine + 4, &b0, 4); memcpy(mine + 5, &b1, 4);
  emu_wait(emu_warp[w]);
  const unsigned* in = &emu_mma_in[6 * 32 * w];
  for (int i = 0; i < 4; i++) {
    int r = g + 8 * (i >> 1), n = 2 * q + (i & 1);
    float s = 0.0f;
    for (int k = 0; k < 8; k++)
      s += emu_tf32_bits(in[6 * (4 * (r % 8) + k % 4) + (r >= 8) + 2 * (k >= 4)]) * emu_tf32_bits(in[6 * (4 * n + k % 4) + 4 + (k >= 4)]);
    c[i] += s;
  }
  emu_wait(emu_warp[w]);
}
#define MMA_TF32(c, a, b0, b1) emu_mma_tf32((c), (a), (b0), (b1))
// fp16 mma.sync (MMA_F16, m16n8k16): A(r, k) in lane 4 (r % 8) + (k % 8) / 2, register (r >= 8) + 2 (k >= 8), half k % 2;
// B(k, n) in lane 4 n + (k % 8) / 2, register k >= 8, half k % 2; the products of two fp16 exact in fp32, the sums in fp32
static inline float emu_h(unsigned u, int hi) { unsigned short s = hi ? u >> 16 : u & 0xffffu; _Float16 h; memcpy(&h, &s, 2); return (float)h; }
static inline unsigned PACK_H2(float lo, float hi) {
  _Float16 a = (_Float16)lo, b = (_Float16)hi; unsigned short x, y; memcpy(&x, &a, 2); memcpy(&y, &b, 2);
  return x | ((unsigned)y << 16);
}
static void emu_mma_f16(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  int t = emu_thread(), w = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
  if (emu_mma_in.size() < 6 * (size_t)(emu_local.x * emu_local.y * emu_local.z)) emu_mma_in.resize(6 * emu_local.x * emu_local.y * emu_local.z);
  unsigned* mine = &emu_mma_in[6 * t];
  memcpy(mine, a, 16); mine[4] = b0; mine[5] = b1;
  emu_wait(emu_warp[w]);
  const unsigned* in = &emu_mma_in[6 * 32 * w];
  for (int i = 0; i < 4; i++) {
    int r = g + 8 * (i >> 1), n = 2 * q + (i & 1);
    float s = 0.0f;
    for (int k = 0; k < 16; k++)
      s += emu_h(in[6 * (4 * (r % 8) + (k % 8) / 2) + (r >= 8) + 2 * (k >= 8)], k % 2) * emu_h(in[6 * (4 * n + (k % 8) / 2) + 4 + (k >= 8)], k % 2);
    c[i] += s;
  }
  emu_wait(emu_warp[w]);
}
#define MMA_F16(c, a, b0, b1) emu_mma_f16((c), (a), (b0), (b1))
// ldmatrix .x4 .trans: every lane posts its row's address; lane 4 g + t then takes rows 2t, 2t + 1 of column g of each
// matrix m (its rows the addresses of lanes 8m .. 8m + 7)
static std::vector<const unsigned short*> emu_ldsm_in;
static void emu_ldsm_x4_t(unsigned* r, const void* p) {
  int t = emu_thread(), w = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
  if (emu_ldsm_in.size() < (size_t)(emu_local.x * emu_local.y * emu_local.z)) emu_ldsm_in.resize(emu_local.x * emu_local.y * emu_local.z);
  emu_ldsm_in[t] = (const unsigned short*)p;
  emu_wait(emu_warp[w]);
  const unsigned short* const* in = &emu_ldsm_in[32 * w];
  for (int m = 0; m < 4; m++) r[m] = in[8 * m + 2 * q][g] | ((unsigned)in[8 * m + 2 * q + 1][g] << 16);
  emu_wait(emu_warp[w]);
}
#define LDSM_X4_T(r, p) emu_ldsm_x4_t((r), (p))
// cp.async: the copy done at once is one order the GPU may run it in; the wait has nothing left to do
#define CP_ASYNC16(dst, src) (emu_cp_bytes += 16, *(dst) = *(src))
#define CP_ASYNC_WAIT()
#define CP_ASYNC_COMMIT()
#define CP_ASYNC_WAIT_PENDING(n)
#define CP_ASYNC_N(dst, src, n) do { if (((size_t)(dst) | (size_t)(src)) % (n)) { fprintf(stderr, "cp.async of %d bytes misaligned\n", n); abort(); } \
                                     emu_cp_bytes += n; memcpy((void*)(dst), (const void*)(src), n); } while (0)
#define MMA_K32(c, a, b0, b1) do { unsigned b_[2] = {(unsigned)(b0), (unsigned)(b1)}; emu_mma((c), (const unsigned*)(a), b_, 32); } while (0)
#define MMA_K16(c, a0, a1, b0) do { unsigned a_[2] = {(unsigned)(a0), (unsigned)(a1)}, b_[2] = {(unsigned)(b0), 0u}; emu_mma((c), a_, b_, 16); } while (0)
typedef _Float16 half;
static inline float __half2float(half h) { return (float)h; }
static inline half __float2half_rn(float f) { return (half)f; }
static inline half __ushort_as_half(unsigned short s) { half h; memcpy(&h, &s, 2); return h; }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long v = ((unsigned long long)y << 32) | x; unsigned r = 0;
  for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
static inline int min(int a, int b) { return a < b ? a : b; }
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
template <class T> static inline T simd_shuffle(T v, unsigned short l) { return emu_shfl(v, l); }
static inline float exp2(float x) { return __builtin_exp2f(x); }
static inline float sqrt(float x) { return __builtin_sqrtf(x); }
static inline float exp(float x) { return __builtin_expf(x); }
static inline float round(float x) { return __builtin_roundf(x); }
static inline float fabs(float x) { return __builtin_fabsf(x); }
static inline float fmax(float a, float b) { return __builtin_fmaxf(a, b); }
static inline int min(int a, int b) { return a < b ? a : b; }
typedef unsigned int uint; typedef unsigned char uchar; typedef unsigned short ushort; typedef _Float16 half;
struct uint3 { uint x, y, z; };
struct alignas(16) float4 { float x, y, z, w; float4() = default; float4(float a, float b, float c, float d) : x(a), y(b), z(c), w(d) {} };
struct alignas(16) uint4 { uint x, y, z, w; uint4() = default; uint4(uint a, uint b, uint c, uint d) : x(a), y(b), z(c), w(d) {} };
template <class T, class U> static inline T as_type(U u) { T t; memcpy(&t, &u, sizeof(T)); return t; }
}
#define exp2f exp2f_is_not_metal
#define sqrtf sqrtf_is_not_metal
#define fmaxf fmaxf_is_not_metal
#define fabsf fabsf_is_not_metal
#define roundf roundf_is_not_metal
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
  static const unsigned char poison[NP + 1] = {POISON};
  char* data_[NP]; long bytes_[NP];
  for (int i = 0; i < NP; i++) { data_[i] = mem[i] + GUARD; bytes_[i] = size[i] - 2*GUARD; }
  emu_np = NP; emu_pdl = USES_PDL; emu_data = data_; emu_bytes = bytes_; emu_poison = poison;
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
    emu_pdl_begin();
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
    emu_pdl_end();
  }
  for (int i = 0; i < NP; i++) {
    char fn[4096]; snprintf(fn, sizeof fn, "%s/b%d.bin", argv[1], i);
    FILE* f = fopen(fn, "wb"); fwrite(mem[i], 1, size[i], f); fclose(f);
  }
  printf("%ld\n", emu_cp_bytes);
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
  poison = [0 if p.weight else 0xff if p.dtype in (dtypes.float32, dtypes.float16) else 0x7f for p in k.params]
  main = _MAIN.replace("KERNEL_CALL", call).replace("NPARAMS", str(len(k.params))).replace("GUARD", str(GUARD)) \
              .replace("POISON", ", ".join(map(str, poison + [0]))).replace("USES_PDL", str(int(_uses_pdl(k))))
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

def emulate(k: SourceKernel, language: str, bufs: list[np.ndarray], work: Path) -> int:
  """Run kernel k's rendered `language` source on the CPU over the numpy buffers (params in order; written ones updated
  in place), twice: first warp ahead and last warp ahead, which must agree bit for bit. Returns the bytes its cp.async
  copies moved."""
  assert k.threads % 32 == 0 and len(bufs) == len(k.params)
  exe = _compile(k, language, work)
  guard = lambda b: np.full(GUARD // b.itemsize, np.nan if b.dtype.kind == 'f' else 0x7f7f7f7f, b.dtype)
  results, copied = [], set()
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
    copied.add(int(r.stdout.split()[-1]))
  for i, (b, p) in enumerate(zip(bufs, k.params)):
    assert results[0][i].tobytes() == results[1][i].tobytes(), f"{k.name}: {p.name} depends on the order warps run in (a missing barrier?)"
    if p.written: b.reshape(-1)[:] = results[0][i]
  assert len(copied) == 1, f"{k.name}: its cp.async bytes depend on the order warps run in"
  return copied.pop()

