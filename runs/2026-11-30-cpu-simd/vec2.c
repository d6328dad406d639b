typedef unsigned int u16v __attribute__((ext_vector_type(16)));
typedef unsigned int u4v __attribute__((ext_vector_type(4)));
typedef float f16v __attribute__((ext_vector_type(16)));
typedef float f4v __attribute__((ext_vector_type(4)));
// the apps' layout: qs[n][blk][j] (4 words), d[n][blk] fp16; lanes = 4 rows x 4 words (lane 4r + j)
void vec2_kernel(float* restrict out, const float* restrict x, const __fp16* restrict d, const unsigned int* restrict qs, int nb, int rows0, int rows1) {
  for (int n = rows0; n < rows1; n += 4) {
    f16v acc = 0;
    for (int blk = 0; blk < nb; blk++) {
      u4v r0 = *(const u4v*)(qs + ((long)(n + 0) * nb + blk) * 4), r1 = *(const u4v*)(qs + ((long)(n + 1) * nb + blk) * 4);
      u4v r2 = *(const u4v*)(qs + ((long)(n + 2) * nb + blk) * 4), r3 = *(const u4v*)(qs + ((long)(n + 3) * nb + blk) * 4);
      u16v w = __builtin_shufflevector(__builtin_shufflevector(r0, r1, 0, 1, 2, 3, 4, 5, 6, 7), __builtin_shufflevector(r2, r3, 0, 1, 2, 3, 4, 5, 6, 7),
                                       0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
      const float* xb = x + blk * 32;
      f16v bacc = 0;
      for (int h = 0; h < 2; h++) for (int b = 0; b < 4; b++) {
        f4v xj = {xb[16 * h + b], xb[16 * h + 4 + b], xb[16 * h + 8 + b], xb[16 * h + 12 + b]};   // word j's weight 16h + 4j + b
        f16v xv = __builtin_shufflevector(xj, xj, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
        u16v v = ((w >> (unsigned)(8 * b + 4 * h)) & 15u) | 0x4B000000u;
        bacc += xv * (__builtin_bit_cast(f16v, v) - 8388616.0f);
      }
      f4v dv = {(float)d[(long)(n + 0) * nb + blk], (float)d[(long)(n + 1) * nb + blk], (float)d[(long)(n + 2) * nb + blk], (float)d[(long)(n + 3) * nb + blk]};
      acc += bacc * __builtin_shufflevector(dv, dv, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    }
    for (int r = 0; r < 4; r++) out[n + r] = acc[4 * r] + acc[4 * r + 1] + acc[4 * r + 2] + acc[4 * r + 3];
  }
}
