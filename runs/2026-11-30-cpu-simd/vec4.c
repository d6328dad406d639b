typedef unsigned int u16v __attribute__((ext_vector_type(16)));
typedef float f16v __attribute__((ext_vector_type(16)));
typedef float f4v __attribute__((ext_vector_type(4)));
// the apps' layout qs[n][blk][j], d[n][blk] fp16; a row at a time, lanes = 4 blocks x 4 words (64 contiguous bytes of the row);
// x permuted once per product: xp[g][h][b][lane] = x[(4g + lane / 4) * 32 + 16h + 4 (lane % 4) + b]
void permute_x(float* restrict xp, const float* restrict x, int nb) {
  for (int g = 0; g < nb / 4; g++) for (int h = 0; h < 2; h++) for (int b = 0; b < 4; b++) for (int l = 0; l < 16; l++)
    xp[((g * 2 + h) * 4 + b) * 16 + l] = x[(4 * g + l / 4) * 32 + 16 * h + 4 * (l % 4) + b];
}
void vec4_kernel(float* restrict out, const float* restrict xp, const __fp16* restrict d, const unsigned int* restrict qs, int nb, int rows0, int rows1) {
  for (int n = rows0; n < rows1; n++) {
    const unsigned int* q = qs + (long)n * nb * 4;
    const __fp16* dn = d + (long)n * nb;
    f16v acc = 0;
    for (int g = 0; g < nb / 4; g++) {
      u16v w = *(const u16v*)(q + g * 16);
      const f16v* xv = (const f16v*)(xp + g * 128);
      f16v bacc = 0;
      for (int h = 0; h < 2; h++) for (int b = 0; b < 4; b++) {
        u16v v = ((w >> (unsigned)(8 * b + 4 * h)) & 15u) | 0x4B000000u;
        bacc += xv[h * 4 + b] * (__builtin_bit_cast(f16v, v) - 8388616.0f);
      }
      f4v d4 = {(float)dn[4 * g], (float)dn[4 * g + 1], (float)dn[4 * g + 2], (float)dn[4 * g + 3]};
      acc += bacc * __builtin_shufflevector(d4, d4, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    }
    float s = 0; for (int l = 0; l < 16; l++) s += acc[l];
    out[n] = s;
  }
}
