// The AVX2 + F16C loader/storer layer under the generic kernel (kernel_args.h lists its layers); 8 lanes.
// Include only from kernel_avx2.cc.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <xsimd/xsimd.hpp>

namespace tandem::cpu::avx2 {

struct Ops {
  using Arch = xsimd::avx2;
  using F = xsimd::batch<float, Arch>;
  using I = xsimd::batch<int32_t, Arch>;
  using FMask = xsimd::batch_bool<float, Arch>;
  using IMask = xsimd::batch_bool<int32_t, Arch>;
  static constexpr int kWidth = 8;
  static constexpr bool kHasF16c = true;

  __attribute__((always_inline)) static I LoadU16(const void* p) {
    return I(_mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))));
  }
  __attribute__((always_inline)) static I LoadI16(const void* p) {
    return I(_mm256_cvtepi16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))));
  }
  __attribute__((always_inline)) static I LoadI8(const void* p) {
    return I(_mm256_cvtepi8_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(p))));
  }
  __attribute__((always_inline)) static I LoadU8(const void* p) {
    return I(_mm256_cvtepu8_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(p))));
  }
  // The low 16 bits of each lane, packed (masked first, so the saturating pack is exact).
  __attribute__((always_inline)) static __m128i Pack16(I x) {
    const __m256i m = _mm256_and_si256(x, _mm256_set1_epi32(0xFFFF));
    return _mm_packus_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  }
  __attribute__((always_inline)) static void StoreLow16(void* p, I x) {
    _mm_storeu_si128(static_cast<__m128i*>(p), Pack16(x));
  }
  __attribute__((always_inline)) static void StoreLow8(void* p, I x) {
    const __m128i w = _mm_and_si128(Pack16(x), _mm_set1_epi16(0xFF));
    _mm_storel_epi64(static_cast<__m128i*>(p), _mm_packus_epi16(w, w));
  }
  // Non-temporal variants (16- / 32-byte aligned p); the caller issues an sfence.
  __attribute__((always_inline)) static void StreamLow16(void* p, I x) {
    _mm_stream_si128(static_cast<__m128i*>(p), Pack16(x));
  }
  __attribute__((always_inline)) static void StreamF32(float* p, F x) { _mm256_stream_ps(p, x); }
  __attribute__((always_inline)) static I RoundToInt(F x) { return I(_mm256_cvtps_epi32(x)); }
  __attribute__((always_inline)) static IMask ToIntMask(FMask m) {
    return IMask(_mm256_castps_si256(m));
  }

  // acc = a > acc ? a : acc (q8_codec.cc's loop): maxps returns its second operand when
  // either is NaN, so a NaN lane of `a` never wins, exactly like the comparison.
  __attribute__((always_inline)) static F MaxInto(F acc, F a) { return F(_mm256_max_ps(a, acc)); }

  // Max over lanes (lanes are non-NaN, so the order of the reduction does not matter).
  __attribute__((always_inline)) static float HMax(F x) {
    __m256 m = _mm256_max_ps(x, _mm256_permute2f128_ps(x, x, 1));
    m = _mm256_max_ps(m, _mm256_permute_ps(m, 0x4E));
    m = _mm256_max_ps(m, _mm256_permute_ps(m, 0xB1));
    return _mm256_cvtss_f32(m);
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
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const F hw(_mm256_cvtph_ps(h));
    const I hi = I(_mm256_cvtepu16_epi32(h));
    const I special = ((hi & I(0x8000)) << 16) | I(0x7F800000) | ((hi & I(0x3FF)) << 13);
    const IMask is_special = (hi & I(0x7C00)) == I(0x7C00);
    return xsimd::bitwise_cast<F>(xsimd::select(is_special, special, xsimd::bitwise_cast<I>(hw)));
  }
  __attribute__((always_inline)) static void StoreF16(uint16_t* p, F x) {
    const I h =
        I(_mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    const IMask nan = (xsimd::bitwise_cast<I>(x) & I(0x7FFFFFFF)) > I(0x7F800000);
    StoreLow16(p, xsimd::select(nan, I(0x7E00), h));
  }
};

}  // namespace tandem::cpu::avx2
