#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
void gen_kernel(float* restrict, float* restrict, __fp16* restrict, unsigned int* restrict, const int);
void vec2_kernel(float* restrict, const float* restrict, const __fp16* restrict, const unsigned int* restrict, int, int, int);
void vec3_kernel(float* restrict, const float* restrict, const __fp16* restrict, const unsigned int* restrict, int, int, int);
void permute_x(float* restrict, const float* restrict, int);
void vec4_kernel(float* restrict, const float* restrict, const __fp16* restrict, const unsigned int* restrict, int, int, int);
void vec_kernel(float* restrict, const float* restrict, const float* restrict, const unsigned int* restrict, int, int);
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main() {
  int N = 2048, K = 6144, nb = K / 32, C = 24;   // C copies: 170 MB, past the caches
  float* x = aligned_alloc(64, K * 4); for (int i = 0; i < K; i++) x[i] = (rand() % 1000) / 500.0f - 1;
  unsigned int** qs = malloc(C * sizeof(void*)); __fp16** dh = malloc(C * sizeof(void*)); float** df = malloc(C * sizeof(void*));
  unsigned int** qi = malloc(C * sizeof(void*));
  for (int c = 0; c < C; c++) {
    qs[c] = aligned_alloc(64, (size_t)N * nb * 16); qi[c] = aligned_alloc(64, (size_t)N * nb * 16);
    dh[c] = aligned_alloc(64, (size_t)N * nb * 2); df[c] = aligned_alloc(64, (size_t)N * nb * 4);
    for (size_t i = 0; i < (size_t)N * nb * 4; i++) qs[c][i] = rand() * 2654435761u;
    for (size_t i = 0; i < (size_t)N * nb; i++) { dh[c][i] = (__fp16)((rand() % 100) / 1000.0f); }
    for (int n = 0; n < N; n++) for (int b = 0; b < nb; b++) {   // interleave: [n/16][b][j][n%16]
      for (int j = 0; j < 4; j++) qi[c][(((size_t)(n / 16) * nb + b) * 4 + j) * 16 + n % 16] = qs[c][((size_t)n * nb + b) * 4 + j];
      df[c][((size_t)(n / 16) * nb + b) * 16 + n % 16] = (float)dh[c][(size_t)n * nb + b];
    }
  }
  float* o1 = aligned_alloc(64, N * 4); float* o2 = aligned_alloc(64, N * 4);
  gen_kernel(o1, x, dh[0], qs[0], 0); gen_kernel(o1, x, dh[0], qs[0], 1);
  vec_kernel(o2, x, df[0], qi[0], nb, N / 16);
  float* o3 = aligned_alloc(64, N * 4); vec2_kernel(o3, x, dh[0], qs[0], nb, 0, N);
  { double m3 = 0; for (int n = 0; n < N; n++) { double e = o1[n] - o3[n]; if (e < 0) e = -e; if (e > m3) m3 = e; } printf("vec2 max diff %g\n", m3); }
  float* o4 = aligned_alloc(64, N * 4); vec3_kernel(o4, x, dh[0], qs[0], nb, 0, N);
  { double m4 = 0; for (int n = 0; n < N; n++) { double e = o1[n] - o4[n]; if (e < 0) e = -e; if (e > m4) m4 = e; } printf("vec3 max diff %g\n", m4); }
  float* xp = aligned_alloc(64, K * 4); float* o5 = aligned_alloc(64, N * 4);
  permute_x(xp, x, nb); vec4_kernel(o5, xp, dh[0], qs[0], nb, 0, N);
  { double m5 = 0; for (int n = 0; n < N; n++) { double e = o1[n] - o5[n]; if (e < 0) e = -e; if (e > m5) m5 = e; } printf("vec4 max diff %g\n", m5); }
  double md = 0; for (int n = 0; n < N; n++) { double e = o1[n] - o2[n]; if (e < 0) e = -e; if (e > md) md = e; }
  printf("max diff %g (o1[0] %g o2[0] %g)\n", md, o1[0], o2[0]);
  for (int r = 0; r < 3; r++) {
    double t0 = now(); for (int c = 0; c < C; c++) { gen_kernel(o1, x, dh[c], qs[c], 0); gen_kernel(o1, x, dh[c], qs[c], 1); }
    double t1 = now(); for (int c = 0; c < C; c++) vec_kernel(o2, x, df[c], qi[c], nb, N / 16);
    double t2 = now(); for (int c = 0; c < C; c++) vec2_kernel(o3, x, dh[c], qs[c], nb, 0, N);
    double t3 = now(); for (int c = 0; c < C; c++) vec3_kernel(o4, x, dh[c], qs[c], nb, 0, N);
    double t4 = now(); for (int c = 0; c < C; c++) { permute_x(xp, x, nb); vec4_kernel(o5, xp, dh[c], qs[c], nb, 0, N); }
    double t5 = now(); printf("vec4 %.3f ms (%.1f GB/s)  ", (t5 - t4) / C * 1e3, (double)N * nb * 18 / ((t5 - t4) / C) / 1e9); printf("vec3 %.3f ms (%.1f GB/s)  ", (t4 - t3) / C * 1e3, (double)N * nb * 18 / ((t4 - t3) / C) / 1e9); printf("vec2 %.3f ms (%.1f GB/s)  ", (t3 - t2) / C * 1e3, (double)N * nb * 18 / ((t3 - t2) / C) / 1e9);
    double bytes = (double)N * nb * 18;
    printf("gen %.3f ms (%.1f GB/s)   vec %.3f ms (%.1f GB/s)   one thread\n", (t1 - t0) / C * 1e3, bytes / ((t1 - t0) / C) / 1e9, (t2 - t1) / C * 1e3, bytes / ((t2 - t1) / C) / 1e9);
  }
}
