typedef unsigned int u16v __attribute__((ext_vector_type(16)));
typedef float f16v __attribute__((ext_vector_type(16)));
typedef int i16v __attribute__((ext_vector_type(16)));
// rows interleaved by 16: qs[(n/16)][blk][j][16], d[(n/16)][blk][16] (fp32 here), x[K]; out[N]
void vec_kernel(float* restrict out, const float* restrict x, const float* restrict d, const unsigned int* restrict qs, int nb, int groups) {
  for (int g = 0; g < groups; g++) {
    f16v acc = 0;
    for (int blk = 0; blk < nb; blk++) {
      const unsigned int* q = qs + ((long)g * nb + blk) * 64;
      f16v bacc = 0;
      for (int j = 0; j < 4; j++) {
        u16v w = *(const u16v*)(q + j * 16);
        for (int h = 0; h < 2; h++) for (int b = 0; b < 4; b++) {
          u16v v = ((w >> (unsigned)(8 * b + 4 * h)) & 15u) | 0x4B000000u;
          f16v f = __builtin_bit_cast(f16v, v) - 8388616.0f;
          bacc += x[blk * 32 + 16 * h + 4 * j + b] * f;
        }
      }
      acc += bacc * *(const f16v*)(d + ((long)g * nb + blk) * 16);
    }
    *(f16v*)(out + g * 16) = acc;
  }
}
