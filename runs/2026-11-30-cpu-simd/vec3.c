typedef unsigned int u16v __attribute__((ext_vector_type(16)));
typedef int i16v __attribute__((ext_vector_type(16)));
typedef float f16v __attribute__((ext_vector_type(16)));
typedef unsigned short h16v __attribute__((ext_vector_type(16)));
// the apps' layout qs[n][blk][j], d[n][blk] fp16: a lane a row, 16 rows' words gathered (row stride nb * 4 words)
void vec3_kernel(float* restrict out, const float* restrict x, const __fp16* restrict d, const unsigned int* restrict qs, int nb, int rows0, int rows1) {
  i16v lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  for (int n = rows0; n < rows1; n += 16) {
    f16v acc = 0;
    i16v wofs = lane * (nb * 4), dofs = lane * nb;
    const unsigned int* q0 = qs + (long)n * nb * 4;
    const __fp16* d0 = d + (long)n * nb;
    for (int blk = 0; blk < nb; blk++) {
      f16v bacc = 0;
      for (int j = 0; j < 4; j++) {
        u16v w;
        for (int r = 0; r < 16; r++) w[r] = q0[wofs[r] + blk * 4 + j];
        for (int h = 0; h < 2; h++) for (int b = 0; b < 4; b++) {
          u16v v = ((w >> (unsigned)(8 * b + 4 * h)) & 15u) | 0x4B000000u;
          bacc += x[blk * 32 + 16 * h + 4 * j + b] * (__builtin_bit_cast(f16v, v) - 8388616.0f);
        }
      }
      f16v dv;
      for (int r = 0; r < 16; r++) dv[r] = (float)d0[dofs[r] + blk];
      acc += bacc * dv;
    }
    *(f16v*)(out + n) = acc;
  }
}
