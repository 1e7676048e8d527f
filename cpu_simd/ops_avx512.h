// The AVX-512 (F/CD/BW/DQ/VL) loader/storer layer under the generic kernel
// (kernel_args.h lists its layers): widening loads, narrowing stores, fp16 conversion and
// round-to-int, one register of 16 lanes at a time. Include only from kernel_avx512.cc and
// (through ops_avx512vbmi.h) kernel_avx512vbmi.cc: each defines TANDEM_ISA_NS, so the two
// files, built with different flags, share no inline function.
#pragma once

#ifndef TANDEM_ISA_NS
#error "define TANDEM_ISA_NS before including cpu_simd/ops_avx512.h"
#endif

#include <immintrin.h>

#include <array>
#include <cfloat>
#include <cstdint>
#include <xsimd/xsimd.hpp>

#ifndef TANDEM_HOST_STATIC_IO
#define TANDEM_HOST_STATIC_IO 1  // Note [Static dtypes]; 0 in the sanitizer build
#endif

namespace tandem::cpu::TANDEM_ISA_NS {

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
  // Note [Static dtypes] (kernel_args.h): instantiate the common gradient/parameter
  // dtypes as template arguments.
  // Off only in the sanitizer build (cpu_simd/CMakeLists.txt).
  static constexpr bool kStaticIo = TANDEM_HOST_STATIC_IO != 0;
  // Note [Scales in vector registers] below: the group code uses GroupScale1/2,
  // MomentumCode and VarianceCode instead of the scalar scale path.
  static constexpr bool kVectorScales = true;
  // Note [Two groups per iteration] (pairing.h): GroupScalesPair / GroupScales4.
  static constexpr bool kPairedTails = true;

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

  // The compander's quotient t = RN(n / d), n = RN(254 a), d = RN(1 + a): the
  // reference's own division, as on the other levels. A reciprocal estimate refined by
  // Newton with a distance-to-half-integer check (exact, with a division fallback) was
  // used here before; on the AVX-512 cores measured since (Sapphire and Emerald Rapids)
  // one vdivps costs fewer port-0/5 µops than that and the kernels run faster with it
  // (docs/host_kernels.md, "The divider is cheap on Golden Cove").
  __attribute__((always_inline)) static __m512 CompanderQuotient(__m512 a) {
    const __m512 n = _mm512_mul_ps(_mm512_set1_ps(254.0f), a);
    const __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), a);
    return _mm512_div_ps(n, d);
  }
  __attribute__((always_inline)) static I RoundedCompander(F a) {
    return RoundToInt(F(CompanderQuotient(a)));
  }

  // Note [Scales in vector registers]: q8_codec.h's scale is s = bf16ceil(max(amax,
  // FLT_MIN)) and the codes use inv = 1/s. Here the lane maxima are reduced by a butterfly
  // (every lane ends up holding the group max; maxps is exact and the lanes are never
  // NaN, see MaxInto), max(amax, FLT_MIN) is one maxps, and the bf16 ceiling of a
  // non-negative, non-NaN x is (bits(x) + 0xFFFF) & 0xFFFF0000: the upper half plus one
  // exactly when the lower half is non-zero (no carry out: bits(x) <= 0x7F800000). 1/s is
  // one IEEE vdivps on an xmm (both moments of a group in one division). The codes then
  // drop two clamps that cannot fire: a = |m| * inv <= (1 + 2^-24)^2 rounded, i.e. at most
  // 1 + 2^-23, so RoundHalfEven(254a/(1+a)) <= 127 and RoundHalfEven(255a) <= 255; NaN
  // and Inf lanes convert to INT_MIN with or without them.
  __attribute__((always_inline)) static __m512 ScaleOfMax(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(FLT_MIN));
    const __m512i b = _mm512_add_epi32(_mm512_castps_si512(x), _mm512_set1_epi32(0xFFFF));
    return _mm512_castsi512_ps(
        _mm512_and_si512(b, _mm512_set1_epi32(static_cast<int32_t>(0xFFFF0000u))));
  }
  // One q8 moment: writes the group's bf16 scale, returns 1/scale in every lane.
  __attribute__((always_inline)) static F GroupScale1(F acc, uint16_t* scale) {
    __m512 x = acc;
    x = _mm512_max_ps(x, _mm512_shuffle_f32x4(x, x, 0x4E));
    x = _mm512_max_ps(x, _mm512_shuffle_f32x4(x, x, 0xB1));
    x = _mm512_max_ps(x, _mm512_permute_ps(x, 0x4E));
    x = _mm512_max_ps(x, _mm512_permute_ps(x, 0xB1));
    const __m128 s = _mm512_castps512_ps128(ScaleOfMax(x));
    *scale = static_cast<uint16_t>(_mm_extract_epi16(_mm_castps_si128(s), 1));
    return F(_mm512_broadcastss_ps(_mm_div_ss(_mm_set_ss(1.0f), s)));
  }
  // Both q8 moments of an AdamW group: one butterfly over [m | v] halves, one division.
  __attribute__((always_inline)) static void GroupScales2(F acc_m, F acc_v, uint16_t* m_scale,
                                                          uint16_t* v_scale, F& inv_m, F& inv_v) {
    // Lanes 0-7 collect m, lanes 8-15 collect v.
    __m512 x = _mm512_max_ps(_mm512_shuffle_f32x4(acc_m, acc_v, 0x44),
                             _mm512_shuffle_f32x4(acc_m, acc_v, 0xEE));
    x = _mm512_max_ps(x, _mm512_shuffle_f32x4(x, x, 0xB1));
    x = _mm512_max_ps(x, _mm512_permute_ps(x, 0x4E));
    x = _mm512_max_ps(x, _mm512_permute_ps(x, 0xB1));
    const __m512 s = ScaleOfMax(x);
    // [s_m, s_v, s_m, s_v]
    const __m128 s2 = _mm_unpacklo_ps(_mm512_castps512_ps128(s), _mm512_extractf32x4_ps(s, 2));
    const __m128i bits = _mm_castps_si128(s2);
    *m_scale = static_cast<uint16_t>(_mm_extract_epi16(bits, 1));
    *v_scale = static_cast<uint16_t>(_mm_extract_epi16(bits, 3));
    const __m128 inv = _mm_div_ps(_mm_set1_ps(1.0f), s2);
    inv_m = F(_mm512_broadcastss_ps(inv));
    inv_v = F(_mm512_broadcastss_ps(_mm_movehdup_ps(inv)));
  }
  // Two adjacent groups of one q8 moment (Note [Two groups per iteration]): the same
  // butterfly as GroupScales2 with group 0 in lanes 0-7 and group 1 in lanes 8-15; both
  // scales stored by one 32-bit store (they are adjacent), one division for both.
  __attribute__((always_inline)) static void GroupScalesPair(const F acc[2], uint16_t* scale,
                                                             F inv[2]) {
    __m512 x = _mm512_max_ps(_mm512_shuffle_f32x4(acc[0], acc[1], 0x44),
                             _mm512_shuffle_f32x4(acc[0], acc[1], 0xEE));
    x = _mm512_max_ps(x, _mm512_shuffle_f32x4(x, x, 0xB1));
    x = _mm512_max_ps(x, _mm512_permute_ps(x, 0x4E));
    x = _mm512_max_ps(x, _mm512_permute_ps(x, 0xB1));
    const __m512 s = ScaleOfMax(x);
    // [s0, s1, s0, s1]
    const __m128 s2 = _mm_unpacklo_ps(_mm512_castps512_ps128(s), _mm512_extractf32x4_ps(s, 2));
    // The upper halves of s0 and s1, little-endian adjacent: scale[0], scale[1].
    const __m128i hi = _mm_shuffle_epi8(
        _mm_castps_si128(s2), _mm_setr_epi8(2, 3, 6, 7, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
    _mm_storeu_si32(scale, hi);
    const __m128 r = _mm_div_ps(_mm_set1_ps(1.0f), s2);
    inv[0] = F(_mm512_broadcastss_ps(r));
    inv[1] = F(_mm512_broadcastss_ps(_mm_movehdup_ps(r)));
  }
  // Two adjacent AdamW groups, both moments: four maxima reduced by one shuffle tree,
  // four scales, one vdivps xmm for the four reciprocals, each moment's two scales stored
  // by one 32-bit store.
  __attribute__((always_inline)) static void GroupScales4(const F acc_m[2], const F acc_v[2],
                                                          uint16_t* m_scale, uint16_t* v_scale,
                                                          F inv_m[2], F inv_v[2]) {
    // x: 128-bit blocks [m0 | m1 | v0 | v1], each the max of two blocks of its register...
    const __m512 xm = _mm512_max_ps(_mm512_shuffle_f32x4(acc_m[0], acc_m[1], 0x44),
                                    _mm512_shuffle_f32x4(acc_m[0], acc_m[1], 0xEE));
    const __m512 xv = _mm512_max_ps(_mm512_shuffle_f32x4(acc_v[0], acc_v[1], 0x44),
                                    _mm512_shuffle_f32x4(acc_v[0], acc_v[1], 0xEE));
    // ... then of all four blocks: block k of x holds 4 partial maxima of accumulator k
    // (m0, m1, v0, v1).
    __m512 x = _mm512_max_ps(_mm512_shuffle_f32x4(xm, xv, 0x88), _mm512_shuffle_f32x4(xm, xv, 0xDD));
    x = _mm512_max_ps(x, _mm512_permute_ps(x, 0x4E));
    x = _mm512_max_ps(x, _mm512_permute_ps(x, 0xB1));
    const __m512 s = ScaleOfMax(x);
    // [s_m0, s_m1, s_v0, s_v1]
    const __m128 s4 = _mm512_castps512_ps128(
        _mm512_permutexvar_ps(_mm512_castsi128_si512(_mm_setr_epi32(0, 4, 8, 12)), s));
    // The upper halves: dword 0 = m_scale[0..1], dword 1 = v_scale[0..1].
    const __m128i hi = _mm_shuffle_epi8(
        _mm_castps_si128(s4), _mm_setr_epi8(2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1));
    _mm_storeu_si32(m_scale, hi);
    _mm_storeu_si32(v_scale, _mm_srli_epi64(hi, 32));
    const __m512 r = _mm512_castps128_ps512(_mm_div_ps(_mm_set1_ps(1.0f), s4));
    inv_m[0] = F(_mm512_broadcastss_ps(_mm512_castps512_ps128(r)));
    inv_m[1] = F(_mm512_permutexvar_ps(_mm512_set1_epi32(1), r));
    inv_v[0] = F(_mm512_permutexvar_ps(_mm512_set1_epi32(2), r));
    inv_v[1] = F(_mm512_permutexvar_ps(_mm512_set1_epi32(3), r));
  }
  // Momentum code of m (q8_codec.h): sign(m) * RoundHalfEven(254a/(1+a)), a = |m| * inv.
  // The sign goes onto the quotient before rounding: RoundHalfEven(-t) = -RoundHalfEven(t).
  // Result in [-127, 127] (or INT_MIN for NaN), stored truncated to 8 bits.
  __attribute__((always_inline)) static I MomentumCode(F m, F inv) {
    const __m512 a = _mm512_mul_ps(_mm512_abs_ps(m), inv);
    const __m512 t = CompanderQuotient(a);
    const __m512i signed_t = _mm512_ternarylogic_epi32(
        _mm512_castps_si512(t), _mm512_castps_si512(m),
        _mm512_set1_epi32(static_cast<int32_t>(0x80000000u)), 0xF8);  // t | (m & sign)
    return I(_mm512_cvtps_epi32(_mm512_castsi512_ps(signed_t)));
  }
  // Variance code of u = sqrt(v): RoundHalfEven((u * inv) * 255), raised to 1 when u > 0
  // (Note [No zero point]). The unsigned max leaves INT_MIN (NaN/Inf) lanes as they were.
  __attribute__((always_inline)) static I VarianceCode(F u, F inv) {
    const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_mul_ps(u, inv), _mm512_set1_ps(255.0f)));
    const __mmask16 pos = _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_GT_OQ);
    return I(_mm512_mask_max_epu32(q, pos, q, _mm512_set1_epi32(1)));
  }

  // Note [Ecc8 encode]: master_codec.h's bf16 + ecc8 encode, the same integer formulas
  // in fewer instructions. b = (x + 0x7FFF + bit16(x)) >> 16 (logical: no carry out of
  // 32 bits for non-NaN x), 0x7FC0 for NaN; d = bits(x) - (b << 16), 0 for NaN; the ecc is
  // (d + 0x7F + bit8(d)) >> 8 (arithmetic), saturated to int8 by the signed-saturating
  // narrow store (the same as the clamp to [-128, 127]). Returns the bf16 bits (low 16 of
  // each lane) and the unsaturated quotient, in [-128, 128].
  struct Ecc8 {
    I hi, q;
  };
  __attribute__((always_inline)) static Ecc8 EncodeBf16Ecc8(F w, uint16_t* b, int8_t* e) {
    const __m512i xi = _mm512_castps_si512(w);
    const __mmask16 ord = _mm512_cmp_ps_mask(w, w, _CMP_ORD_Q);
    const __mmask16 lsb = _mm512_test_epi32_mask(xi, _mm512_set1_epi32(0x10000));
    __m512i r = _mm512_add_epi32(xi, _mm512_set1_epi32(0x7FFF));
    r = _mm512_mask_add_epi32(r, lsb, xi, _mm512_set1_epi32(0x8000));
    const __m512i hi =
        _mm512_mask_blend_epi32(ord, _mm512_set1_epi32(0x7FC0), _mm512_srli_epi32(r, 16));
    const __m512i d = _mm512_maskz_sub_epi32(ord, xi, _mm512_slli_epi32(hi, 16));
    const __mmask16 odd = _mm512_test_epi32_mask(d, _mm512_set1_epi32(0x100));
    __m512i t = _mm512_add_epi32(d, _mm512_set1_epi32(0x7F));
    t = _mm512_mask_add_epi32(t, odd, d, _mm512_set1_epi32(0x80));
    const __m512i q = _mm512_srai_epi32(t, 8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b), _mm512_cvtepi32_epi16(hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(e), _mm512_cvtsepi32_epi8(q));
    return {I(hi), I(q)};
  }

  // Lion's c > 0 ? lr : c < 0 ? -lr : 0 as lr ^ (c & sign) where c != 0 (ordered: NaN
  // gives 0), else +0; -lr is lr with its sign bit flipped, as float negation is.
  __attribute__((always_inline)) static F LionStep(F c, F lr) {
    const __mmask16 nz = _mm512_cmp_ps_mask(c, _mm512_setzero_ps(), _CMP_NEQ_OQ);
    return F(_mm512_castsi512_ps(_mm512_maskz_ternarylogic_epi32(
        nz, _mm512_castps_si512(lr), _mm512_castps_si512(c),
        _mm512_set1_epi32(static_cast<int32_t>(0x80000000u)), 0x78)));  // lr ^ (c & sign)
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

}  // namespace tandem::cpu::TANDEM_ISA_NS
