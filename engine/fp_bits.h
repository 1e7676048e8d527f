// Bit-exact scalar conversions between fp32, bf16 and fp16, and round-half-even to int.
//
// These are the definitions (docs/numerics.md, "Conversions"): every conversion rounds to
// nearest, ties to even, independent of the FPU's rounding mode and flush settings.
// They are written in integer arithmetic so that host and device agree bit for bit.
#pragma once

#include <cstdint>
#include <climits>
#include <cstring>

#include "engine/hd.h"

namespace tandem::num {

TANDEM_HD uint32_t BitsOf(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

TANDEM_HD float FloatOf(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// bf16 -> fp32 is exact.
TANDEM_HD float Bf16ToF32(uint16_t b) { return FloatOf(uint32_t{b} << 16); }

// fp32 -> bf16, round to nearest even. NaN becomes the quiet NaN 0x7FC0 (sign dropped).
TANDEM_HD uint16_t F32ToBf16(float f) {
  uint32_t x = BitsOf(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// Smallest bf16 >= f, for finite f >= 0 (used for group scales: rounding up keeps every
// normalised value <= 1). +Inf maps to +Inf.
TANDEM_HD uint16_t Bf16CeilNonNeg(float f) {
  const uint32_t x = BitsOf(f);
  return static_cast<uint16_t>((x >> 16) + ((x & 0xFFFFu) != 0u ? 1u : 0u));
}

// fp16 -> fp32 is exact.
TANDEM_HD float F16ToF32(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1Fu) return FloatOf(sign | 0x7F800000u | (mant << 13));  // Inf / NaN
  if (exp != 0) return FloatOf(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return FloatOf(sign);  // signed zero
  // Subnormal half: normalise.
  uint32_t e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return FloatOf(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}

// fp32 -> fp16, round to nearest even, overflow to +-Inf, subnormals rounded correctly.
// NaN becomes the quiet NaN 0x7E00 (sign dropped).
TANDEM_HD uint16_t F32ToF16(float f) {
  const uint32_t x = BitsOf(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7E00u;
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 -> Inf
  if (a < 0x38800000u) {                                                 // below 2^-14
    const uint32_t e = a >> 23;
    if (e < 102u) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to zero
    const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14..24: value in units of 2^-24 is m >> shift
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t t = a - 0x38000000u;  // rebias 127 -> 15
  t += 0xFFFu + ((t >> 13) & 1u);
  return static_cast<uint16_t>(sign | (t >> 13));
}

// Round half to even to int32, for |x| < 2^23 (the callers' range), independent of the
// FPU rounding mode: floor is exact, and so is x - floor(x) in that range.
TANDEM_HD int32_t RoundHalfEven(float x) {
  // Outside the callers' range (NaN, |x| >= 2^31) the cast below would be undefined:
  // saturate instead (NaN -> 0). Results there are outside the bit-identity contract.
  if (!(x > -2147483520.0f && x < 2147483520.0f)) return x > 0 ? INT32_MAX : (x < 0 ? INT32_MIN : 0);
  // Truncation toward zero is exact for |x| < 2^31; adjust to floor.
  int32_t fl = static_cast<int32_t>(x);
  if (static_cast<float>(fl) > x) --fl;
  const float frac = x - static_cast<float>(fl);
  if (frac > 0.5f || (frac == 0.5f && (fl & 1))) ++fl;
  return fl;
}

}  // namespace tandem::num
