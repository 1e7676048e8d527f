// Quantized moments: 8-bit codes with one bf16 scale per group of kQuantGroup elements.
//
// Momentum (signed): scale s = bf16 ceiling of max(max|m|, FLT_MIN) over the group;
// a = |m| * (1/s); code = sign(m) * min(rhe(254 a / (1 + a)), 127), i.e. the softsign
// compander 2a/(1+a) scaled to 127. Decoding inverts the compander exactly in rationals:
// m = (q / (254 - |q|)) * s, the quotient rounded once to fp32.
//
// Variance (unsigned) stores u = sqrt(v): s = bf16 ceiling of max(max u, FLT_MIN);
// code = min(rhe(255 * (u * (1/s))), 255), raised to 1 when u > 0 (Note [No zero point]);
// u = (q / 255) * s, and v = u * u.
//
// Note [No zero point]: a non-zero v that decoded to 0 would make m / (sqrt(v) + eps)
// explode; rounding such an element up to the smallest code errs on the safe side.
// Note [Scale floor]: scales never go below FLT_MIN so that 1/s stays finite; magnitudes
// under about FLT_MIN/254 then quantize to zero (momentum) or to the smallest code
// (variance), far below anything that moves a weight.
// rhe is round-half-even; every operation is one correctly rounded fp32 operation, in
// the order written (docs/numerics.md).
#pragma once

#include <cfloat>
#include <cstdint>

#include "engine/fp_bits.h"
#include "tandem/types.h"

namespace tandem::num {

// The decoded scale of a group whose largest magnitude is amax (amax >= 0).
TANDEM_HD uint16_t GroupScaleBits(float amax) {
  return Bf16CeilNonNeg(amax > FLT_MIN ? amax : FLT_MIN);
}

// Momentum code -> normalised value in [-1, 1]: q / (254 - |q|), rounded once.
TANDEM_HD float MomentumCodeValue(int32_t q) {
  const int32_t aq = q < 0 ? -q : q;
  return static_cast<float>(q) / static_cast<float>(254 - aq);
}

TANDEM_HD int8_t EncodeMomentum(float m, float inv_scale) {
  const float a = (m < 0.0f ? -m : m) * inv_scale;
  const float t = (254.0f * a) / (1.0f + a);
  int32_t q = RoundHalfEven(t);
  if (q > 127) q = 127;
  return static_cast<int8_t>(m < 0.0f ? -q : q);
}

TANDEM_HD float DecodeMomentum(int8_t q, float scale) { return MomentumCodeValue(q) * scale; }

// Variance code -> normalised value in [0, 1]: q / 255, rounded once.
TANDEM_HD float VarianceCodeValue(int32_t q) {
  return static_cast<float>(q) / 255.0f;
}

// Encodes u = sqrt(v) >= 0.
TANDEM_HD uint8_t EncodeSqrtVariance(float u, float inv_scale) {
  int32_t q = RoundHalfEven((u * inv_scale) * 255.0f);
  if (q > 255) q = 255;
  if (q == 0 && u > 0.0f) q = 1;
  return static_cast<uint8_t>(q);
}

// Returns u = sqrt(v) as stored; the caller squares it.
TANDEM_HD float DecodeSqrtVariance(uint8_t q, float scale) {
  return VarianceCodeValue(q) * scale;
}

// Whole groups, for the reference and tests. len in [1, kQuantGroup].
void EncodeMomentumGroup(const float* m, int len, int8_t* codes, uint16_t* scale_bits);
void DecodeMomentumGroup(const int8_t* codes, uint16_t scale_bits, int len, float* m);
void EncodeSqrtVarianceGroup(const float* u, int len, uint8_t* codes, uint16_t* scale_bits);
void DecodeSqrtVarianceGroup(const uint8_t* codes, uint16_t scale_bits, int len, float* u);

}  // namespace tandem::num
