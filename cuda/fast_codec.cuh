// Device-side exact shortcuts for the codecs of engine/q8_codec.h and master_codec.h.
//
// Note [Exact fast paths]: the kernels must produce the bits of the engine's scalar
// source (engine/q8_codec.h, engine/master_codec.h). These helpers compute the very same
// results with fewer instructions, and fall back to the engine's own function wherever
// the shortcut's argument does not hold. The parity tests (tests/cuda) compare every byte
// against tandem::ReferenceStep.
//  * Decoding: q -> q / (254 - |q|) and q -> q / 255 take 256 values each; the kernel
//    tabulates them once per block in shared memory with the engine's functions
//    (DecodeTables), so a decode is a table read and the engine's multiply.
//  * num::RoundHalfEven(x) for |x| < 2^23 is exactly the hardware conversion cvt.rni
//    (round to nearest, ties to even); other x (and NaN) go to the engine's function.
//  * EncodeMomentum needs rhe(t), t = fl(fl(254 a) / fl(1 + a)). The shortcut takes
//    t' = fl(num * rcp.approx(den)); rcp.approx errs by at most 1 ulp, so for den in
//    [1, 1e30] (t < 254) |t' - t| < 2^-13. rhe only changes at half-integers, so when t'
//    lies more than 2^-12 from the nearest half-integer, rhe(t') = rhe(t); otherwise
//    (and for a >= 1e30, NaN or Inf) the exact IEEE division runs, as in the engine.
//  * EncodeEcc8's round-half-even(d / 256) is (d + 127 + ((d >> 8) & 1)) >> 8: with
//    d = 256 f + r (0 <= r < 256) this is f + 1 exactly when r + 127 + (f & 1) >= 256,
//    i.e. r > 128, or r = 128 and f odd, which is num::RoundHalfEvenDiv256.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/master_codec.h"
#include "engine/q8_codec.h"

namespace tandem::gpu::detail {

// Decode tables indexed by the raw code byte.
struct DecodeTables {
  float momentum[256];  // num::MomentumCodeValue(int8_t(code))
  float variance[256];  // num::VarianceCodeValue(code)
};

// Fills the tables; blockDim.x must be 256 (step_kernel.cuh's kBlockThreads). The caller
// synchronizes the block before reading.
__device__ __forceinline__ void FillDecodeTables(DecodeTables& t) {
  const int c = static_cast<int>(threadIdx.x);
  t.momentum[c] = num::MomentumCodeValue(static_cast<int8_t>(c));
  t.variance[c] = num::VarianceCodeValue(c);
}

__device__ __forceinline__ int32_t RoundHalfEvenFast(float x) {
  return fabsf(x) < 8388608.0f ? __float2int_rn(x) : num::RoundHalfEven(x);
}

// num::EncodeMomentum, bit for bit.
__device__ __forceinline__ uint8_t EncodeMomentumFast(float m, float inv_scale) {
  const float a = fabsf(m) * inv_scale;  // fabsf: -0 -> +0 changes no code
  const float num_ = 254.0f * a;
  const float den = 1.0f + a;
  float rcp;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(rcp) : "f"(den));
  const float approx = num_ * rcp;
  const float frac = approx - floorf(approx);
  int32_t q;
  if (a < 1e30f && fabsf(frac - 0.5f) > 0.000244140625f)  // 2^-12
    q = __float2int_rn(approx);
  else
    q = num::RoundHalfEven(num_ / den);
  if (q > 127) q = 127;
  return static_cast<uint8_t>(static_cast<int8_t>(m < 0.0f ? -q : q));
}

// num::EncodeSqrtVariance, bit for bit.
__device__ __forceinline__ uint8_t EncodeSqrtVarianceFast(float u, float inv_scale) {
  int32_t q = RoundHalfEvenFast((u * inv_scale) * 255.0f);
  if (q > 255) q = 255;
  if (q == 0 && u > 0.0f) q = 1;
  return static_cast<uint8_t>(q);
}

// num::EncodeEcc8, bit for bit.
__device__ __forceinline__ void EncodeEcc8Fast(float x, uint16_t* b, int8_t* ecc) {
  const uint16_t hi = num::F32ToBf16(x);
  const int32_t d = num::EccDelta(x, hi);
  int32_t q = (d + 127 + ((d >> 8) & 1)) >> 8;  // num::RoundHalfEvenDiv256(d)
  if (q > 127) q = 127;
  if (q < -128) q = -128;
  *b = hi;
  *ecc = static_cast<int8_t>(q);
}

}  // namespace tandem::gpu::detail
