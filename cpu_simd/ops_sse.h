// The SSE4.2 loader/storer layer under the generic kernel (kernel_args.h lists its layers); 4 lanes.
// fp16 goes through the scalar reference conversions (no F16C at this level).
// Include only from kernel_sse.cc.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <xsimd/xsimd.hpp>

#include "cpu_simd/span_kernels.h"

namespace tandem::cpu::sse {

struct Ops {
  using Arch = xsimd::sse4_2;
  using F = xsimd::batch<float, Arch>;
  using I = xsimd::batch<int32_t, Arch>;
  using FMask = xsimd::batch_bool<float, Arch>;
  using IMask = xsimd::batch_bool<int32_t, Arch>;
  static constexpr int kWidth = 4;
  static constexpr bool kHasF16c = false;

  __attribute__((always_inline)) static __m128i Load32(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm_cvtsi32_si128(v);
  }
  __attribute__((always_inline)) static I LoadU16(const void* p) {
    return I(_mm_cvtepu16_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(p))));
  }
  __attribute__((always_inline)) static I LoadI16(const void* p) {
    return I(_mm_cvtepi16_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(p))));
  }
  __attribute__((always_inline)) static I LoadI8(const void* p) {
    return I(_mm_cvtepi8_epi32(Load32(p)));
  }
  __attribute__((always_inline)) static I LoadU8(const void* p) {
    return I(_mm_cvtepu8_epi32(Load32(p)));
  }
  __attribute__((always_inline)) static void StoreLow16(void* p, I x) {
    const __m128i m = _mm_and_si128(x, _mm_set1_epi32(0xFFFF));
    _mm_storel_epi64(static_cast<__m128i*>(p), _mm_packus_epi32(m, m));
  }
  __attribute__((always_inline)) static void StoreLow8(void* p, I x) {
    const __m128i m = _mm_and_si128(x, _mm_set1_epi32(0xFF));
    const __m128i w = _mm_packus_epi32(m, m);
    const int32_t v = _mm_cvtsi128_si32(_mm_packus_epi16(w, w));
    std::memcpy(p, &v, 4);
  }
  // Non-temporal variants: plain stores at this level (kept simple; SSE is the fallback).
  __attribute__((always_inline)) static void StreamLow16(void* p, I x) { StoreLow16(p, x); }
  __attribute__((always_inline)) static void StreamF32(float* p, F x) { x.store_unaligned(p); }
  __attribute__((always_inline)) static I RoundToInt(F x) { return I(_mm_cvtps_epi32(x)); }
  __attribute__((always_inline)) static IMask ToIntMask(FMask m) {
    return IMask(_mm_castps_si128(m));
  }

  // acc = a > acc ? a : acc (q8_codec.cc's loop): maxps returns its second operand when
  // either is NaN, so a NaN lane of `a` never wins, exactly like the comparison.
  __attribute__((always_inline)) static F MaxInto(F acc, F a) { return F(_mm_max_ps(a, acc)); }

  // Max over lanes (lanes are non-NaN, so the order of the reduction does not matter).
  __attribute__((always_inline)) static float HMax(F x) {
    __m128 m = _mm_max_ps(x, _mm_movehl_ps(x, x));
    m = _mm_max_ps(m, _mm_shuffle_ps(m, m, 0x55));
    return _mm_cvtss_f32(m);
  }

  // Code values by IEEE division (q8_codec.h: MomentumCodeValue, VarianceCodeValue).
  __attribute__((always_inline)) static F MomentumCodeValue(I q) {
    const I aq = xsimd::select(q < I(0), -q, q);
    return xsimd::batch_cast<float>(q) / xsimd::batch_cast<float>(I(254) - aq);
  }
  __attribute__((always_inline)) static F VarianceCodeValue(I q) {
    return xsimd::batch_cast<float>(q) / F(255.0f);
  }
  // RoundHalfEven((254 a) / (1 + a)), the momentum compander (q8_codec.h: EncodeMomentum).
  __attribute__((always_inline)) static I RoundedCompander(F a) {
    return RoundToInt((F(254.0f) * a) / (F(1.0f) + a));
  }

  __attribute__((always_inline)) static F LoadF16(const uint16_t* p) {
    alignas(16) float f[kWidth];
    F16ToF32Array(p, kWidth, f);
    return F::load_aligned(f);
  }
  __attribute__((always_inline)) static void StoreF16(uint16_t* p, F x) {
    alignas(16) float f[kWidth];
    x.store_aligned(f);
    F32ToF16Array(f, kWidth, p);
  }
};

}  // namespace tandem::cpu::sse
