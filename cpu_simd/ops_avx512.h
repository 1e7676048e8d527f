// The AVX-512 (F/CD/BW/DQ/VL) loader/storer layer under the generic kernel
// (step_kernel.h): widening loads, narrowing stores, fp16 conversion and
// round-to-int, one register of 16 lanes at a time. Include only from kernel_avx512.cc.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <xsimd/xsimd.hpp>

namespace tandem::cpu::avx512 {

// Note [Division-free decode]: the momentum code value q / (254 - |q|) takes one of 128
// magnitudes; the table holds them, each the correctly rounded quotient (constant
// folding is IEEE round-to-nearest), and -q / d = -(q / d) exactly gives the sign. The
// variance code value q / 255 is computed as r0 = q * (1/255), e = fma(-r0, 255, q)
// (exact), r1 = fma(e, 1/255, r0): checked exhaustively to be the correctly rounded
// quotient for all 256 codes (tests/cpu_simd/codec_test.cc).
inline constexpr std::array<float, 128> kMomentumMagnitudes = [] {
  std::array<float, 128> t{};
  for (int i = 0; i < 128; ++i) t[i] = static_cast<float>(i) / static_cast<float>(254 - i);
  return t;
}();

struct Ops {
  using Arch = xsimd::avx512bw;
  using F = xsimd::batch<float, Arch>;
  using I = xsimd::batch<int32_t, Arch>;
  using FMask = xsimd::batch_bool<float, Arch>;
  using IMask = xsimd::batch_bool<int32_t, Arch>;
  static constexpr int kWidth = 16;
  static constexpr bool kHasF16c = true;

  __attribute__((always_inline)) static I LoadU16(const void* p) {
    return I(_mm512_cvtepu16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p))));
  }
  __attribute__((always_inline)) static I LoadI16(const void* p) {
    return I(_mm512_cvtepi16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p))));
  }
  __attribute__((always_inline)) static I LoadI8(const void* p) {
    return I(_mm512_cvtepi8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))));
  }
  __attribute__((always_inline)) static I LoadU8(const void* p) {
    return I(_mm512_cvtepu8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))));
  }
  // Store the low 16 / 8 bits of every lane (truncation, like a C cast).
  __attribute__((always_inline)) static void StoreLow16(void* p, I x) {
    _mm256_storeu_si256(static_cast<__m256i*>(p), _mm512_cvtepi32_epi16(x));
  }
  __attribute__((always_inline)) static void StoreLow8(void* p, I x) {
    _mm_storeu_si128(static_cast<__m128i*>(p), _mm512_cvtepi32_epi8(x));
  }
  // Non-temporal variants for write-only streams; p must be 32- (u16) / 64-byte (f32)
  // aligned. The caller issues an sfence before the data is published.
  __attribute__((always_inline)) static void StreamLow16(void* p, I x) {
    _mm256_stream_si256(static_cast<__m256i*>(p), _mm512_cvtepi32_epi16(x));
  }
  __attribute__((always_inline)) static void StreamF32(float* p, F x) { _mm512_stream_ps(p, x); }
  // cvtps2dq: round half to even under the MXCSR round-to-nearest the entry point sets.
  __attribute__((always_inline)) static I RoundToInt(F x) { return I(_mm512_cvtps_epi32(x)); }
  __attribute__((always_inline)) static IMask ToIntMask(FMask m) {
    return IMask(static_cast<__mmask16>(m));
  }

  // acc = a > acc ? a : acc (q8_codec.cc's loop): maxps returns its second operand when
  // either is NaN, so a NaN lane of `a` never wins, exactly like the comparison.
  __attribute__((always_inline)) static F MaxInto(F acc, F a) { return F(_mm512_max_ps(a, acc)); }

  // Max over lanes (lanes are non-NaN, so the order of the reduction does not matter).
  __attribute__((always_inline)) static float HMax(F x) {
    __m512 m = _mm512_max_ps(x, _mm512_shuffle_f32x4(x, x, 0x4E));
    m = _mm512_max_ps(m, _mm512_shuffle_f32x4(m, m, 0xB1));
    m = _mm512_max_ps(m, _mm512_permute_ps(m, 0x4E));
    m = _mm512_max_ps(m, _mm512_permute_ps(m, 0xB1));
    return _mm512_cvtss_f32(m);
  }

  // Note [Division-free decode] above.
  __attribute__((always_inline)) static F MomentumCodeValue(I q) {
    const __m512i aq = _mm512_abs_epi32(q);
    const float* t = kMomentumMagnitudes.data();
    const __m512 p0 = _mm512_permutex2var_ps(_mm512_loadu_ps(t), aq, _mm512_loadu_ps(t + 16));
    const __m512 p1 = _mm512_permutex2var_ps(_mm512_loadu_ps(t + 32), aq, _mm512_loadu_ps(t + 48));
    const __m512 p2 = _mm512_permutex2var_ps(_mm512_loadu_ps(t + 64), aq, _mm512_loadu_ps(t + 80));
    const __m512 p3 = _mm512_permutex2var_ps(_mm512_loadu_ps(t + 96), aq, _mm512_loadu_ps(t + 112));
    const __mmask16 b5 = _mm512_test_epi32_mask(aq, _mm512_set1_epi32(32));
    const __mmask16 b6 = _mm512_test_epi32_mask(aq, _mm512_set1_epi32(64));
    const __m512 lo = _mm512_mask_blend_ps(b5, p0, p1);
    const __m512 hi = _mm512_mask_blend_ps(b5, p2, p3);
    const __m512 mag = _mm512_mask_blend_ps(b6, lo, hi);
    const __m512i sign = _mm512_and_si512(q, _mm512_set1_epi32(static_cast<int32_t>(0x80000000u)));
    return F(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(mag), sign)));
  }
  __attribute__((always_inline)) static F VarianceCodeValue(I q) {
    const __m512 x = _mm512_cvtepi32_ps(q);
    const __m512 c = _mm512_set1_ps(1.0f / 255.0f);
    const __m512 r0 = _mm512_mul_ps(x, c);
    const __m512 e = _mm512_fnmadd_ps(r0, _mm512_set1_ps(255.0f), x);
    return F(_mm512_fmadd_ps(e, c, r0));
  }

  // Note [Compander without division]: RoundHalfEven(t) for t = RN(n / d), n = RN(254 a),
  // d = RN(1 + a), 0 <= a <= ~1 (so t <= ~127). t' = n * r1 with r1 = rcp14(d) refined by
  // one Newton step (fma) is within 2.5e-5 of t (rcp14 2^-14 -> 2^-28 after the step,
  // plus three roundings of 2^-24 relative, times 127, plus half an ulp of t, 2^-17).
  // If t' lies more than 2^-10 from every half-integer, t lies on the same side of all of
  // them and RoundHalfEven(t') = RoundHalfEven(t); otherwise (rare: about 0.2% of lanes)
  // the register takes the exact division. NaN lanes never count as close; they convert
  // to INT_MIN like the division would. Checked exhaustively over every a in [0, 1] and
  // beyond (tests/cpu_simd/codec_test.cc).
  __attribute__((always_inline)) static I RoundedCompander(F a) {
    const __m512 n = _mm512_mul_ps(_mm512_set1_ps(254.0f), a);
    const __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), a);
    const __m512 r = _mm512_rcp14_ps(d);
    const __m512 e = _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0f));
    const __m512 r1 = _mm512_fmadd_ps(r, e, r);
    const __m512 t = _mm512_mul_ps(n, r1);
    const __m512 frac =
        _mm512_sub_ps(t, _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
    const __m512 dist = _mm512_abs_ps(_mm512_sub_ps(frac, _mm512_set1_ps(0.5f)));
    const __mmask16 close = _mm512_cmp_ps_mask(dist, _mm512_set1_ps(1.0f / 1024), _CMP_LT_OQ);
    if (__builtin_expect(close != 0, 0)) return RoundToInt(F(_mm512_div_ps(n, d)));
    return RoundToInt(F(t));
  }

  // fp16 -> fp32 with F16C (exact); Inf/NaN lanes rebuilt as num::F16ToF32 does (the
  // hardware would quiet a signalling NaN).
  __attribute__((always_inline)) static F LoadF16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const F hw(_mm512_cvtph_ps(h));
    const I hi = I(_mm512_cvtepu16_epi32(h));
    const I special = ((hi & I(0x8000)) << 16) | I(0x7F800000) | ((hi & I(0x3FF)) << 13);
    const IMask is_special = (hi & I(0x7C00)) == I(0x7C00);
    return xsimd::bitwise_cast<F>(xsimd::select(is_special, special, xsimd::bitwise_cast<I>(hw)));
  }
  // fp32 -> fp16 round-to-nearest-even with F16C; NaN -> 0x7E00 as num::F32ToF16.
  __attribute__((always_inline)) static void StoreF16(uint16_t* p, F x) {
    const I h =
        I(_mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    const IMask nan = (xsimd::bitwise_cast<I>(x) & I(0x7FFFFFFF)) > I(0x7F800000);
    StoreLow16(p, xsimd::select(nan, I(0x7E00), h));
  }
};

}  // namespace tandem::cpu::avx512
