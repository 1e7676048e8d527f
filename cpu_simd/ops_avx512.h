// The AVX-512 (F/CD/BW/DQ/VL) loader/storer layer under the generic kernel
// (step_kernel.h): widening loads, narrowing stores, fp16 conversion and
// round-to-int, one register of 16 lanes at a time. Include only from kernel_avx512.cc.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <xsimd/xsimd.hpp>

namespace tandem::cpu::avx512 {

struct Ops {
  using Arch = xsimd::avx512bw;
  using F = xsimd::batch<float, Arch>;
  using I = xsimd::batch<int32_t, Arch>;
  using FMask = xsimd::batch_bool<float, Arch>;
  using IMask = xsimd::batch_bool<int32_t, Arch>;
  static constexpr int kWidth = 16;
  static constexpr bool kHasF16c = true;

  static I LoadU16(const void* p) {
    return I(_mm512_cvtepu16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p))));
  }
  static I LoadI16(const void* p) {
    return I(_mm512_cvtepi16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p))));
  }
  static I LoadI8(const void* p) {
    return I(_mm512_cvtepi8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))));
  }
  static I LoadU8(const void* p) {
    return I(_mm512_cvtepu8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))));
  }
  // Store the low 16 / 8 bits of every lane (truncation, like a C cast).
  static void StoreLow16(void* p, I x) {
    _mm256_storeu_si256(static_cast<__m256i*>(p), _mm512_cvtepi32_epi16(x));
  }
  static void StoreLow8(void* p, I x) {
    _mm_storeu_si128(static_cast<__m128i*>(p), _mm512_cvtepi32_epi8(x));
  }
  // Non-temporal variants for write-only streams; p must be 32- (u16) / 64-byte (f32)
  // aligned. The caller issues an sfence before the data is published.
  static void StreamLow16(void* p, I x) {
    _mm256_stream_si256(static_cast<__m256i*>(p), _mm512_cvtepi32_epi16(x));
  }
  static void StreamF32(float* p, F x) { _mm512_stream_ps(p, x); }
  // cvtps2dq: round half to even under the MXCSR round-to-nearest the entry point sets.
  static I RoundToInt(F x) { return I(_mm512_cvtps_epi32(x)); }
  static IMask ToIntMask(FMask m) { return IMask(static_cast<__mmask16>(m)); }

  // fp16 -> fp32 with F16C (exact); Inf/NaN lanes rebuilt as num::F16ToF32 does (the
  // hardware would quiet a signalling NaN).
  static F LoadF16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const F hw(_mm512_cvtph_ps(h));
    const I hi = I(_mm512_cvtepu16_epi32(h));
    const I special = ((hi & I(0x8000)) << 16) | I(0x7F800000) | ((hi & I(0x3FF)) << 13);
    const IMask is_special = (hi & I(0x7C00)) == I(0x7C00);
    return xsimd::bitwise_cast<F>(xsimd::select(is_special, special, xsimd::bitwise_cast<I>(hw)));
  }
  // fp32 -> fp16 round-to-nearest-even with F16C; NaN -> 0x7E00 as num::F32ToF16.
  static void StoreF16(uint16_t* p, F x) {
    const I h = I(_mm512_cvtepu16_epi32(
        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    const IMask nan = (xsimd::bitwise_cast<I>(x) & I(0x7FFFFFFF)) > I(0x7F800000);
    StoreLow16(p, xsimd::select(nan, I(0x7E00), h));
  }
};

}  // namespace tandem::cpu::avx512
