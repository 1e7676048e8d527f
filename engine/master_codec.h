// Master-weight formats bf16+ecc8 and bf16+ecc16: the bf16 weight plus a correction.
//
// Note [Correction in ulps of x]: the correction is the difference of the bit patterns
// d = bits(x) - (bits(bf16(x)) << 16), a signed count of fp32 ulps *of x's own binade*.
// Bit patterns of same-signed floats are ordered like their magnitudes, so d is exact even
// where rounding carried bf16(x) into the next binade (x just below a power of two), where
// a correction measured in ulps of the bf16 value would lose a bit. With round-to-nearest
// d lies in [-32768, 32768]: ecc16 stores it saturated to int16 (only d = +32768, an exact
// tie rounded down to an even bf16, is lost: 1 fp32 ulp, 1 value in 2^17), ecc8 stores
// round-half-even(d / 256) saturated to int8. docs/numerics.md has the full definition.
#pragma once

#include <cstdint>

#include "engine/fp_bits.h"
#include "tandem/types.h"

namespace tandem::num {

// d = bits(x) - bits(b) << 16 for b = F32ToBf16(x); 0 when x is NaN.
TANDEM_HD int32_t EccDelta(float x, uint16_t b) {
  if ((BitsOf(x) & 0x7FFFFFFFu) > 0x7F800000u) return 0;
  return static_cast<int32_t>(BitsOf(x) - (uint32_t{b} << 16));
}

TANDEM_HD void EncodeEcc16(float x, uint16_t* b, int16_t* ecc) {
  const uint16_t hi = F32ToBf16(x);
  int32_t d = EccDelta(x, hi);
  if (d > 32767) d = 32767;  // the one tie that does not fit; never below -32768
  *b = hi;
  *ecc = static_cast<int16_t>(d);
}

TANDEM_HD float DecodeEcc16(uint16_t b, int16_t ecc) {
  return FloatOf((uint32_t{b} << 16) + static_cast<uint32_t>(static_cast<int32_t>(ecc)));
}

// round-half-even(d / 256) for |d| <= 32768, in integers.
TANDEM_HD int32_t RoundHalfEvenDiv256(int32_t d) {
  const int32_t fl = d >> 8;  // arithmetic shift: floor division
  const int32_t rem = d & 0xFF;
  if (rem > 128 || (rem == 128 && (fl & 1))) return fl + 1;
  return fl;
}

TANDEM_HD void EncodeEcc8(float x, uint16_t* b, int8_t* ecc) {
  const uint16_t hi = F32ToBf16(x);
  int32_t q = RoundHalfEvenDiv256(EccDelta(x, hi));
  if (q > 127) q = 127;
  if (q < -128) q = -128;
  *b = hi;
  *ecc = static_cast<int8_t>(q);
}

TANDEM_HD float DecodeEcc8(uint16_t b, int8_t ecc) {
  return FloatOf((uint32_t{b} << 16) + static_cast<uint32_t>(static_cast<int32_t>(ecc) * 256));
}

// Element i of a master in format `f`, decoded to fp32; arrays the format does not use may
// be null.
TANDEM_HD float DecodeMaster(MasterFormat f, const float* f32, const uint16_t* bf16,
                             const int8_t* ecc8, const int16_t* ecc16, size_t i) {
  switch (f) {
    case MasterFormat::kF32: return f32[i];
    case MasterFormat::kBF16: return Bf16ToF32(bf16[i]);
    case MasterFormat::kBF16Ecc8: return DecodeEcc8(bf16[i], ecc8[i]);
    case MasterFormat::kBF16Ecc16: return DecodeEcc16(bf16[i], ecc16[i]);
  }
  return 0.0f;
}

}  // namespace tandem::num
