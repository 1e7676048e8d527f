#include "engine/q8_codec.h"

namespace tandem::num {

void EncodeMomentumGroup(const float* m, int len, int8_t* codes, uint16_t* scale_bits) {
  float amax = 0.0f;
  for (int i = 0; i < len; ++i) {
    const float a = m[i] < 0.0f ? -m[i] : m[i];
    amax = a > amax ? a : amax;
  }
  const uint16_t sb = GroupScaleBits(amax);
  const float inv = 1.0f / Bf16ToF32(sb);
  for (int i = 0; i < len; ++i) codes[i] = EncodeMomentum(m[i], inv);
  *scale_bits = sb;
}

void DecodeMomentumGroup(const int8_t* codes, uint16_t scale_bits, int len, float* m) {
  const float s = Bf16ToF32(scale_bits);
  for (int i = 0; i < len; ++i) m[i] = DecodeMomentum(codes[i], s);
}

void EncodeSqrtVarianceGroup(const float* u, int len, uint8_t* codes, uint16_t* scale_bits) {
  float amax = 0.0f;
  for (int i = 0; i < len; ++i) amax = u[i] > amax ? u[i] : amax;
  const uint16_t sb = GroupScaleBits(amax);
  const float inv = 1.0f / Bf16ToF32(sb);
  for (int i = 0; i < len; ++i) codes[i] = EncodeSqrtVariance(u[i], inv);
  *scale_bits = sb;
}

void DecodeSqrtVarianceGroup(const uint8_t* codes, uint16_t scale_bits, int len, float* u) {
  const float s = Bf16ToF32(scale_bits);
  for (int i = 0; i < len; ++i) u[i] = DecodeSqrtVariance(codes[i], s);
}

}  // namespace tandem::num
