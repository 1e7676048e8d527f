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

#include <cfloat>
#include <cstdint>

#include "engine/master_codec.h"
#include "engine/q8_codec.h"
#include "engine/step_scalars.h"
#include "engine/update_math.h"

namespace tandem::gpu::detail {

// Decode tables indexed by the raw code byte.
struct DecodeTables {
  float momentum[256];  // num::MomentumCodeValue(int8_t(code))
  float variance[256];  // num::VarianceCodeValue(code)
};

// Fills the tables (any block size; step_kernel.cuh uses kBlockThreads). The caller
// synchronizes the block before reading.
__device__ __forceinline__ void FillDecodeTables(DecodeTables& t) {
  for (int c = static_cast<int>(threadIdx.x); c < 256; c += static_cast<int>(blockDim.x)) {
    t.momentum[c] = num::MomentumCodeValue(static_cast<int8_t>(c));
    t.variance[c] = num::VarianceCodeValue(c);
  }
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

// ---- Packed shortcuts for full tiles (FastTile in tiles.cuh). ----
//
// Note [Batched fallbacks]: the functions below compute a whole tile's codes with
// straight-line arithmetic that is exact inside a domain, and report through `ok` (a
// flag the caller accumulates over the tile) whether every input was inside it. Outside
// (NaN or infinite state, ties the approximate reciprocal cannot settle, a normalised
// variance above 255) the caller recomputes the tile's codes with the per-element exact
// functions above, so no element pays for a branch around a rare case.
//  * Rounding by the magic constant: for 0 <= x <= 255, fl(x + 2^23) = 2^23 + rhe(x)
//    (the sum lies in [2^23, 2^24), where the fp32 spacing is 1, and round-to-nearest-
//    even on the sum is round-half-even on x because 2^23 is even); its low byte is rhe(x).
//    For |x| <= 127, fl(x + 1.5 * 2^23) = 1.5 * 2^23 + rhe(x) (the sum lies in
//    [2^23, 2^24) again and rhe is odd-symmetric), whose low byte is the two's-complement
//    byte of rhe(x). Both subtractions back are exact (Sterbenz).
//  * fp32 -> bf16 by cvt.rn.bf16x2.f32 (two per instruction) is round-to-nearest-even on
//    the value, which for every non-NaN input (subnormals, overflow to Inf included) is
//    num::F32ToBf16's integer rounding; NaN gives 0x7FFF there instead of 0x7FC0, so a
//    NaN sends the tile to the fallback. tests/cuda/fast_codec_test.cc checks all 2^32
//    inputs on the device.

// prmt.b32 (default mode): byte i of the result is byte sel_i (nibble i of `sel`) of the
// 8-byte value {b, a}; a nibble with bit 3 set gives the sign of that byte replicated.
__device__ __forceinline__ uint32_t Prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// {bf16(hi) << 16 | bf16(lo)}, round to nearest even (see above for NaN).
__device__ __forceinline__ uint32_t PackBf16x2(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// Bits of num::DecodeEcc8(b, e) for element k (0..7) of a tile: b is the low (k even) or
// high (k odd) half of `bf16_pair`, e is byte k % 4 of `ecc_word`. The prmt builds
// int32(e) * 256 = {0, e, sign(e), sign(e)} in one instruction.
template <int k>
__device__ __forceinline__ float DecodeEcc8Packed(uint32_t bf16_pair, uint32_t ecc_word) {
  constexpr uint32_t b = k % 4;
  constexpr uint32_t sel = 0x4u | (b << 4) | ((8u | b) << 8) | ((8u | b) << 12);
  const uint32_t hi = k % 2 == 0 ? bf16_pair << 16 : bf16_pair & 0xFFFF0000u;
  return num::FloatOf(hi + Prmt(ecc_word, 0u, sel));
}

// num::GroupScaleBits(amax) for amax >= +0, not NaN: fmaxf equals the reference's
// select there, and (x + 0xFFFF) >> 16 is Bf16CeilNonNeg's (x >> 16) + (low half != 0)
// for every x <= 0x7F800000.
__device__ __forceinline__ uint16_t GroupScaleBitsFast(float amax) {
  return static_cast<uint16_t>((num::BitsOf(fmaxf(amax, FLT_MIN)) + 0xFFFFu) >> 16);
}

// The ecc8 rounding word of one element: byte 0 of the result is num::EncodeEcc8's code
// for x whose bf16 is `hi_bits` (= bf16 << 16). d = bits(x) - hi_bits lies in [-32768,
// 32768], so it converts to fp32 exactly, d / 256 is exact, and adding 1.5 * 2^23 rounds
// it half to even once (the sum lies in [2^23, 2^24), where the spacing is 1): the low
// byte of the sum is the two's-complement byte of num::RoundHalfEvenDiv256(d). Clamping d
// to 127 * 256 first is the reference's clamp to 127 (every d >= 127 * 256 has
// rhe(d / 256) >= 127); its clamp at -128 never acts (d >= -32768). Three instructions
// (I2FP, FMNMX, FFMA) where the integer form (d + 127 + ((d >> 8) & 1)) >> 8 with its
// clamp took five.
__device__ __forceinline__ uint32_t Ecc8Word(float x, uint32_t hi_bits) {
  const float d = static_cast<float>(static_cast<int32_t>(num::BitsOf(x) - hi_bits));
  return num::BitsOf(__fmaf_rn(fminf(d, 32512.0f), 0.00390625f, 12582912.0f));
}

// The low byte of each of the 8 words y, in order, as the 8 bytes of c[0..1]: two prmt
// per pair of words and one to join the pairs.
__device__ __forceinline__ void PackLowBytes(const uint32_t (&y)[8], uint32_t (&c)[2]) {
#pragma unroll
  for (int j = 0; j < 2; ++j)
    c[j] = Prmt(Prmt(y[4 * j], y[4 * j + 1], 0x40u), Prmt(y[4 * j + 2], y[4 * j + 3], 0x40u),
                0x5410u);
}

// num::EncodeEcc8 of 8 elements: the bf16 halves in b[4] (pairs), the codes in e[2].
// `ok` becomes false if any x is NaN (Note [Batched fallbacks]).
__device__ __forceinline__ void EncodeEcc8Tile(const float (&x)[8], uint32_t (&b)[4],
                                               uint32_t (&e)[2], bool& ok) {
  uint32_t y[8];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    b[j] = PackBf16x2(x[2 * j], x[2 * j + 1]);
    y[2 * j] = Ecc8Word(x[2 * j], b[j] << 16);
    y[2 * j + 1] = Ecc8Word(x[2 * j + 1], b[j] & 0xFFFF0000u);
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) ok &= !(x[i] != x[i]);
  PackLowBytes(y, e);
}

// EncodeMomentumFast (num::EncodeMomentum) of 8 elements into two code words. Where the
// clamp below matters not, t' = num * rcp.approx(den) < 127 and |t' - t| < 2^-15: rcp.approx
// errs by at most 1 ulp (relative 2^-23) and the product rounds once (2^-24), so t' is
// within 127 * 1.5 * 2^-23 = 2^-15.4 of num / den, and the reference's t within half an
// ulp of 127 (2^-18) of it. rhe(t') = rhe(t) when t' is more than 2^-14 from a
// half-integer, i.e. when |t' - rhe(t')| < 0.5 - 2^-14 (twice the error bound; the
// exhaustive device check, FastCodecCheck::momentum_*, holds it to every input). With
// 2^-12, as the per-element EncodeMomentumFast keeps for t up to 254, about 12% of warp
// tiles took the fallback; with 2^-14 about 3%. Domain: for finite state a <= 1 + 2^-20
// (the scale is at least the group maximum; fl(1 / scale) errs by at most 2^-20
// relatively even where it is subnormal), so t < 127.5 - 2^-14 (a < 1.0078 would do)
// and the reference's clamp to 127 and its a < 1e30 condition never act; a non-finite m
// gives a NaN t', which fails the test. The operations run on the signed a = m * inv:
// every one of them is odd-symmetric (den takes |a|), so t' carries m's sign and the
// magic rounding gives the two's-complement byte (m = -0 gives -0, then code 0, as the
// reference). FastCodecCheck::momentum_* holds this to every m with |m| <= 1.0078125 at
// inv_scale 1, and to every non-finite m.
__device__ __forceinline__ void EncodeMomentumTile(const float (&m)[8], float inv_scale,
                                                   uint32_t (&c)[2], bool& ok) {
  uint32_t r[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float a = m[i] * inv_scale;
    const float num_ = 254.0f * a;
    const float den = 1.0f + fabsf(a);
    float rcp;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(rcp) : "f"(den));
    const float ts = num_ * rcp;
    const float sum = ts + 12582912.0f;                       // 1.5 * 2^23
    ok &= fabsf(ts - (sum - 12582912.0f)) < 0.49993896484375f;  // 0.5 - 2^-14; NaN: false
    r[i] = num::BitsOf(sum);
  }
  PackLowBytes(r, c);
}

// EncodeSqrtVarianceFast (num::EncodeSqrtVariance) of 8 elements u >= 0 into two code
// words. x = (u * inv) * 255 as the reference; x <= 255 (false for NaN) keeps the magic
// rounding exact and makes the reference's clamp a no-op; Note [No zero point]: for
// u > 0, rhe(max(x, 1)) = max(rhe(x), 1), the reference's raise of code 0 to 1.
__device__ __forceinline__ void EncodeSqrtVarianceTile(const float (&u)[8], float inv_scale,
                                                       uint32_t (&c)[2], bool& ok) {
  uint32_t r[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float x = (u[i] * inv_scale) * 255.0f;
    ok &= x <= 255.0f;
    if (u[i] > 0.0f) x = fmaxf(x, 1.0f);
    r[i] = num::BitsOf(x + 8388608.0f);  // 2^23
  }
  PackLowBytes(r, c);
}

// EncodeSqrtVarianceTile where the caller knows every u is finite and > 0 (AdamTile's
// square roots all in range) and passes u_max, the largest of the 8: the raise to code 1
// needs no test, and as x = (u * inv) * 255 is nondecreasing in u, x <= 255 for all 8
// exactly when it holds for u_max.
__device__ __forceinline__ void EncodeSqrtVarianceTilePositive(const float (&u)[8], float u_max,
                                                               float inv_scale, uint32_t (&c)[2],
                                                               bool& ok) {
  ok &= (u_max * inv_scale) * 255.0f <= 255.0f;
  uint32_t r[8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
    r[i] = num::BitsOf(fmaxf((u[i] * inv_scale) * 255.0f, 1.0f) + 8388608.0f);  // 2^23
  PackLowBytes(r, c);
}

// num::Sqrt (sqrt.rn.f32) for x in [2^-101, FLT_MAX]: the instruction sequence ptxas
// emits for sqrt.rn there (rsqrt approximation, one correction by fma), with the range
// test it applies (bits(x) - 0x0D000000 <= 0x727FFFFF, unsigned) accumulated into `ok`
// instead of a branch per element; outside (0, subnormals, tiny values, Inf, NaN,
// negatives) the caller falls back to num::Sqrt. fast_codec_check.cu compares it with
// __fsqrt_rn for every fp32 input in the range.
__device__ __forceinline__ float SqrtInRange(float x, bool& ok) {
  ok &= num::BitsOf(x) - 0x0D000000u <= 0x727FFFFFu;
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  const float y = __fmul_rn(x, r);
  const float h = __fmul_rn(r, 0.5f);
  const float e = __fmaf_rn(-y, y, x);
  return __fmaf_rn(e, h, y);
}

// num::AdamElement for the 8 elements of a tile, operation for operation (the same
// rounded operations in the same order; tests/cuda checks the bits), with the square
// roots batched: SqrtInRange for all 8, num::Sqrt for all 8 when one is out of range.
// `u` receives sqrt(v_new); returns whether all 8 square roots were in range, which puts
// every u at or above 2^-50.5 > 0. kDecoupled: AdamW.
template <bool kDecoupled>
__device__ __forceinline__ bool AdamTile(const StepScalars& s, const float (&g_in)[8],
                                         float (&w)[8], float (&m)[8], float (&v)[8],
                                         float (&u)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float g = g_in[i] * s.grad_mul;
    if (!kDecoupled && s.apply_l2) g = g + s.weight_decay * w[i];
    m[i] = s.beta1 * m[i] + s.one_minus_beta1 * g;
    v[i] = s.beta2 * v[i] + s.one_minus_beta2 * (g * g);
    if (kDecoupled) w[i] = w[i] * s.decay;
  }
  bool ok = true;
#pragma unroll
  for (int i = 0; i < 8; ++i) u[i] = SqrtInRange(v[i], ok);
  if (!ok) {
#pragma unroll
    for (int i = 0; i < 8; ++i) u[i] = num::Sqrt(v[i]);
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float denom = u[i] * s.inv_sqrt_bc2 + s.eps;
    w[i] = w[i] - s.step_size * (m[i] / denom);
  }
  return ok;
}

// num::LionElement for the 8 elements of a tile, operation for operation, except the
// selection of the step: the reference's `c > 0 ? lr : (c < 0 ? -lr : 0)` is lr with
// its sign flipped where c < 0 (an xor of c's sign bit: exact for any lr, -0 included),
// subtracted only where |c| > 0 (false for 0 and NaN); where the reference subtracts
// +0 instead, w - (+0) has w's bits (also for w = -0).
__device__ __forceinline__ void LionTile(const StepScalars& s, const float (&g_in)[8],
                                         float (&w)[8], float (&m)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float g = g_in[i] * s.grad_mul;
    w[i] = w[i] * s.decay;
    const float c = s.beta1 * m[i] + s.one_minus_beta1 * g;
    const float step = num::FloatOf(num::BitsOf(s.lr) ^ (num::BitsOf(c) & 0x80000000u));
    if (fabsf(c) > 0.0f) w[i] = w[i] - step;
    m[i] = s.beta2 * m[i] + s.one_minus_beta2 * g;
  }
}

}  // namespace tandem::gpu::detail
