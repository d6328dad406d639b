# The Q4_0 12,288 x 2,048 matvec written in C as tinygrad renders it for the CPU (words as uint4, the float bit trick), with R
# rows and L accumulators a row, compiled by clang -O2 -march=native and timed on one thread: python3 lanes_c.py (in a scratch dir)
import sys, subprocess
def gen(R, L):
  o=["""#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define N 12288
#define K 2048
#define NB (K/32)
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
typedef float float4 __attribute__((aligned(16),vector_size(16)));
typedef unsigned int uint4 __attribute__((aligned(16),vector_size(16)));
__attribute__((noinline)) void mv(float* restrict out, const float* restrict x, const __fp16* restrict d, const unsigned int* restrict qs) {
  for (int n0 = 0; n0 < N; n0 += %d) {""" % R]
  for r in range(R):
    for l in range(L): o.append(f"    float a{r}_{l} = 0.0f;")
  o.append("    for (int b = 0; b < NB; b++) {")
  for j in range(8): o.append(f"      float4 x{j} = *((float4*)(x + b*32 + {4*j}));")
  for r in range(R):
    o.append(f"      uint4 q{r} = *((uint4*)(qs + ((size_t)(n0+{r})*NB + b)*4)); float s{r} = (float)d[(size_t)(n0+{r})*NB + b];")
    terms={l:[] for l in range(L)}
    for k in range(32):
      h, w, byte = k//16, (k%16)//4, k%4
      sh = byte*8 + h*4
      # lane: k's position mod L in the (w, h, byte) unroll order tinygrad uses: byte fastest, then h, then w
      order = w*8 + h*4 + byte
      terms[order % L].append(f"x{k//4}[{k%4}]*s{r}*(__builtin_bit_cast(float, (unsigned int)(((q{r}[{w}]>>{sh}u)&15u)|1258291200u))+-8388616.0f)")
    for l in range(L): o.append(f"      a{r}_{l} = a{r}_{l} + " + " + ".join(terms[l]) + ";")
  o.append("    }")
  for r in range(R): o.append(f"    out[n0+{r}] = " + "+".join(f"a{r}_{l}" for l in range(L)) + ";")
  o.append("  }\n}")
  o.append("""int main(){
  float* x = aligned_alloc(64, K*4); __fp16* d = malloc(N*NB*2); unsigned int* qs = aligned_alloc(64,(size_t)N*NB*16); float* out = malloc(N*4);
  for (int i=0;i<K;i++) x[i]=(float)rand()/(float)RAND_MAX-0.5f;
  for (size_t i=0;i<(size_t)N*NB;i++) d[i]=(__fp16)0.01f;
  for (size_t i=0;i<(size_t)N*NB*4;i++) qs[i]=rand();
  for (int it=0; it<2; it++) mv(out,x,d,qs);
  double t0=now(); for (int it=0; it<5; it++) mv(out,x,d,qs); double dt=(now()-t0)/5;
  printf("%.2f ms\\n", dt*1e3);
}""")
  return "\n".join(o)
for R in (1,2,4,8):
  for L in (1,4,8,32):
    open("v.c","w").write(gen(R,L))
    subprocess.run(["clang","-O2","-march=native","-o","v","v.c"],check=True)
    out=subprocess.run(["./v"],capture_output=True,text=True).stdout.strip()
    print(f"rows {R} lanes {L}: {out}", flush=True)
