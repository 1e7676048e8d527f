// The state formats' conversions, one register of lanes at a time: bf16 rounding, the
// ecc corrections of the master, and the q8 codes of a register once its group's scale is
// known. Each is the integer or IEEE formula of engine/fp_bits.h, engine/master_codec.h or
// engine/q8_codec.h, lane by lane (Note [Same ops, same order], group_step.h). No memory
// access. Relies on kernel_args.h and the ISA's Ops (conversions, compander, masks).
#pragma once

#include <cfloat>
#include <cstdint>
#include <cstring>

#include "cpu_simd/kernel_args.h"

namespace tandem::cpu::TANDEM_ISA_NS {

// ---- bits (fp_bits.h) ----

// num::F32ToBf16: round to nearest even; NaN -> 0x7FC0. Result in [0, 0xFFFF].
template <class Ops>
TANDEM_SIMD_INLINE typename Ops::I F32ToBf16(typename Ops::F x) {
  using I = typename Ops::I;
  const I xi = BitCast<I>(x);
  const auto nan = (xi & I(0x7FFFFFFF)) > I(0x7F800000);
  const I r = ((xi + I(0x7FFF) + ((xi >> 16) & I(1))) >> 16) & I(0xFFFF);
  return xsimd::select(nan, I(0x7FC0), r);
}

template <class Ops>
TANDEM_SIMD_INLINE typename Ops::F FromBits(typename Ops::I x) {
  return BitCast<typename Ops::F>(x);
}

// ---- the master's ecc corrections (master_codec.h) ----

// DecodeEcc8 / DecodeEcc16, from the bf16 already in the high half (hi = b << 16).
template <class Ops>
TANDEM_SIMD_INLINE typename Ops::F DecodeEcc8(typename Ops::I hi, typename Ops::I ecc) {
  return FromBits<Ops>(hi + (ecc << 8));
}
template <class Ops>
TANDEM_SIMD_INLINE typename Ops::F DecodeEcc16(typename Ops::I hi, typename Ops::I ecc) {
  return FromBits<Ops>(hi + ecc);
}

// EccDelta: bits(x) - bits(b) << 16 (base = b << 16), 0 for NaN.
template <class Ops>
TANDEM_SIMD_INLINE typename Ops::I EccDelta(typename Ops::F x, typename Ops::I base) {
  using I = typename Ops::I;
  const I xi = BitCast<I>(x);
  const auto nan = (xi & I(0x7FFFFFFF)) > I(0x7F800000);
  return xsimd::select(nan, I(0), xi - base);
}

// EncodeEcc16's correction: the delta saturated to int16 (it is never below -32768).
template <class Ops>
TANDEM_SIMD_INLINE typename Ops::I Ecc16Of(typename Ops::I d) {
  using I = typename Ops::I;
  return xsimd::select(d > I(32767), I(32767), d);
}

// EncodeEcc8's correction: RoundHalfEvenDiv256, then saturate to int8.
// (d + 127 + (floor(d/256) & 1)) >> 8 carries into the quotient exactly when the remainder
// exceeds 128, or equals 128 with an odd floor: the same tie rule as F32ToBf16 (no
// overflow: |d| <= 2^15).
template <class Ops>
TANDEM_SIMD_INLINE typename Ops::I Ecc8Of(typename Ops::I d) {
  using I = typename Ops::I;
  I q = (d + I(0x7F) + ((d >> 8) & I(1))) >> 8;
  return xsimd::min(xsimd::max(q, I(-128)), I(127));
}

// ---- q8 group scales and codes (q8_codec.h) ----

// Scalar helpers for the per-group scale (q8_codec.h: GroupScaleBits).
TANDEM_SIMD_INLINE uint32_t ScalarBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
TANDEM_SIMD_INLINE float ScalarFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
TANDEM_SIMD_INLINE uint16_t GroupScaleBits(float amax) {
  const uint32_t x = ScalarBits(amax > FLT_MIN ? amax : FLT_MIN);
  return static_cast<uint16_t>((x >> 16) + ((x & 0xFFFFu) != 0u ? 1u : 0u));
}
TANDEM_SIMD_INLINE float Bf16Value(uint16_t b) { return ScalarFloat(uint32_t{b} << 16); }

// EncodeMomentum for Ops without vector scales (their own MomentumCode otherwise): the
// code of m at 1/scale inv, RoundHalfEven((254 a) / (1 + a)) with a = |m| * inv, clamped
// to 127, with m's sign.
template <class Ops>
TANDEM_SIMD_INLINE typename Ops::I EncodeMomentum(typename Ops::F m, typename Ops::F inv) {
  using F = typename Ops::F;
  using I = typename Ops::I;
  const auto neg = m < F(0.0f);
  const F a = xsimd::abs(m) * inv;
  I q = Ops::RoundedCompander(a);  // RoundHalfEven((254 a) / (1 + a))
  q = xsimd::min(q, I(127));
  return xsimd::select(Ops::ToIntMask(neg), -q, q);
}

// EncodeSqrtVariance for Ops without vector scales: RoundHalfEven(u * inv * 255), clamped
// to 255, and 1 where that rounds a positive u to 0.
template <class Ops>
TANDEM_SIMD_INLINE typename Ops::I EncodeSqrtVariance(typename Ops::F u, typename Ops::F inv) {
  using F = typename Ops::F;
  using I = typename Ops::I;
  I q = Ops::RoundToInt((u * inv) * F(255.0f));
  q = xsimd::min(q, I(255));
  return xsimd::select((q == I(0)) & Ops::ToIntMask(u > F(0.0f)), I(1), q);
}

}  // namespace tandem::cpu::TANDEM_ISA_NS
