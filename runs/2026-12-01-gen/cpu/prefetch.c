/* The CPU's Q4_0 product (apps/kernels/cpu.py) of 12288 x 2048 streaming its weights from memory: 80 copies (1.1 GB, past
   any cache), each called once in turn, on 1 or 2 threads (the rows split as the CPU device splits them). Built and run by
   prefetch.sh against the kernel as the tree renders it and the same without its prefetch. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <pthread.h>
void k(float* restrict out, const float* restrict x, const __fp16* restrict d, const unsigned int* restrict qs, const int core_id);
#define COPIES 80
float *out, *x; __fp16* d[COPIES]; unsigned* qs[COPIES];
typedef struct { int core; int it; } arg_t;
void* work(void* a) { arg_t* p = a; k(out, x, d[p->it], qs[p->it], p->core); return 0; }
int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  out = aligned_alloc(64, 12288*4); x = aligned_alloc(64, 2048*4);
  for (int i = 0; i < 2048; i++) x[i] = i * 0.001f;
  for (int c = 0; c < COPIES; c++) {
    d[c] = aligned_alloc(64, 12288L*64*2); qs[c] = aligned_alloc(64, 12288L*256*4);
    for (long i = 0; i < 12288L*64; i++) d[c][i] = 0.01f;
    for (long i = 0; i < 12288L*256; i++) qs[c][i] = i * 2654435761u;
  }
  struct timespec a, b;
  for (int r = 0; r < 3; r++) {
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int it = 0; it < COPIES; it++) {
      if (threads == 1) { k(out, x, d[it], qs[it], 0); k(out, x, d[it], qs[it], 1); }
      else { pthread_t t; arg_t a1 = {1, it}, a0 = {0, it}; pthread_create(&t, 0, work, &a1); work(&a0); pthread_join(t, 0); }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double us = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e3 / COPIES;
    printf("%d threads: %.1f us per 12288x2048 call from DRAM, %.2f GB/s\n", threads, us, 12288 * (1024 + 128) / us / 1e3);
  }
  return out[5] > 1e30;
}
