// The AVX-512 Ops (ops_avx512.h) plus an AVX512-VBMI momentum decode: the codes of one
// or two whole groups are turned into their code values by byte-table lookups. Include
// only from kernel_avx512vbmi.cc, the one file built with -mavx512vbmi; it runs only where
// the CPU has VBMI and HostKernelOptions::vbmi_decode is on, and every other span or CPU
// takes the plain AVX-512 kernels of kernel_avx512.cc (the same bits).
#pragma once

#include <immintrin.h>

#include <array>
#include <bit>
#include <cstdint>

#include "cpu_simd/ops_avx512.h"

namespace tandem::cpu::TANDEM_ISA_NS {

// Note [VBMI momentum decode]: the momentum code value of int8 code q is kMomentumMagnitudes
// [|q|] with the sign of q (Note [Division-free decode]). Here the 128-entry table is split
// into its four byte planes (plane k holds byte k of every magnitude, 128 bytes = two zmm),
// and one vpermi2b per plane looks up 64 codes at once (index |q|: vpermi2b reads its low 7
// bits). Two byte and two word interleaves (vpunpck*bw, vpunpck*wd) then assemble the
// dwords; they work within 128-bit lanes, so the codes are first permuted by one vpermb
// (kDecodeOrder) such that the four output registers hold elements 0-15, 16-31, 32-47,
// 48-63 in order. The sign is or-ed into plane 3 (the magnitudes have none). A table
// lookup of the same table: the same bits as MomentumCodeValue, including code -128
// (|q| = 0x80 reads entry 0: -0.0). About 20 instructions per 64 codes instead of ~15 per
// 16 (tests/cpu_simd/codec_test.cc compares all 256 codes; the parity suite runs spans with
// and without it).
inline constexpr std::array<std::array<uint8_t, 128>, 4> kMomentumPlanes = [] {
  std::array<std::array<uint8_t, 128>, 4> planes{};
  for (int i = 0; i < 128; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(kMomentumMagnitudes[i]);
    for (int k = 0; k < 4; ++k) planes[k][i] = static_cast<uint8_t>(bits >> (8 * k));
  }
  return planes;
}();

// Output register s, 128-bit lane L, dword r comes from permuted position 16L + 4s + r
// (the interleaves) and must be element 16s + 4L + r.
inline constexpr std::array<uint8_t, 64> kDecodeOrder = [] {
  std::array<uint8_t, 64> order{};
  for (int s = 0; s < 4; ++s)
    for (int lane = 0; lane < 4; ++lane)
      for (int r = 0; r < 4; ++r)
        order[16 * lane + 4 * s + r] = static_cast<uint8_t>(16 * s + 4 * lane + r);
  return order;
}();

// Note [VBMI narrowing stores]: vpmovdb / vpmovdw / vpmovsdb cost two port-5 µops per 16
// lanes; one vpermt2b gathers the same bytes of two registers (32 lanes) in one. kLowBytes:
// byte 0 of every dword of a (result bytes 0-15), then of b (16-31).
inline constexpr std::array<uint8_t, 64> kLowBytes = [] {
  std::array<uint8_t, 64> idx{};
  for (int k = 0; k < 32; ++k) idx[k] = static_cast<uint8_t>(k < 16 ? 4 * k : 64 + 4 * (k - 16));
  return idx;
}();

// Note [VBMI group I/O]: the same byte shuffles replace the widening loads and narrowing
// stores of a bf16 gradient and a bf16 + ecc8 master, two registers (32 lanes) at a time:
// * gradient: bits = bf16 << 16 is one zero-masked vpermb of the 64 loaded bytes (byte 4i+2,
//   4i+3 of register j <- bytes 2(16j+i), 2(16j+i)+1; bytes 4i, 4i+1 zeroed): kWidenBf16.
// * master: bits = (bf16 << 16) + (ecc8 << 8) with ecc8 sign-extended. With e' = ecc8 ^ 0x80
//   (the byte as unsigned, offset by 128), sext(ecc8) = e' - 128, so bits = D - 0x8000 with
//   D = bytes [0, e', bf16 lo, bf16 hi]: one zero-masked vpermi2b of (bf16, e') and one
//   subtraction (mod 2^32, like the reference's addition): kMasterBytes.
// * master encode: the bf16 is kept in the upper half of the lane (hi << 16, NaN 0x7FC00000;
//   the lower bits are those the reference subtracts anyway), and the ecc8 rounding sum t
//   is clamped to 0x7FFF so that its byte 1 is the int8-saturated t >> 8 (t >> 8 is in
//   [-128, 128], and only 128, i.e. t >= 0x8000, saturates). One vpermt2b gathers bytes 2-3
//   (bf16) and one byte 1 (ecc8) of two registers: kBf16Bytes, kEccBytes.
// All exact integer rearrangements of Note [Ecc8 encode]'s formulas (the parity suite runs
// both forms).
inline constexpr std::array<std::array<uint8_t, 64>, 2> kWidenBf16 = [] {
  std::array<std::array<uint8_t, 64>, 2> idx{};
  for (int j = 0; j < 2; ++j)
    for (int i = 0; i < 16; ++i) {
      idx[j][4 * i + 2] = static_cast<uint8_t>(2 * (16 * j + i));
      idx[j][4 * i + 3] = static_cast<uint8_t>(2 * (16 * j + i) + 1);
    }
  return idx;
}();
inline constexpr std::array<std::array<uint8_t, 64>, 2> kMasterBytes = [] {
  std::array<std::array<uint8_t, 64>, 2> idx{};
  for (int j = 0; j < 2; ++j)
    for (int i = 0; i < 16; ++i) {
      idx[j][4 * i + 1] = static_cast<uint8_t>(64 + 16 * j + i);
      idx[j][4 * i + 2] = static_cast<uint8_t>(2 * (16 * j + i));
      idx[j][4 * i + 3] = static_cast<uint8_t>(2 * (16 * j + i) + 1);
    }
  return idx;
}();
inline constexpr std::array<uint8_t, 64> kBf16Bytes = [] {
  std::array<uint8_t, 64> idx{};
  for (int k = 0; k < 32; ++k) {
    const int base = k < 16 ? 4 * k : 64 + 4 * (k - 16);
    idx[2 * k] = static_cast<uint8_t>(base + 2);
    idx[2 * k + 1] = static_cast<uint8_t>(base + 3);
  }
  return idx;
}();
inline constexpr std::array<uint8_t, 64> kEccBytes = [] {
  std::array<uint8_t, 64> idx{};
  for (int k = 0; k < 32; ++k)
    idx[k] = static_cast<uint8_t>(k < 16 ? 4 * k + 1 : 64 + 4 * (k - 16) + 1);
  return idx;
}();

struct OpsVbmi : Ops {
  // group_io.h: decode the momentum codes of a group (or two) before its registers.
  static constexpr bool kGroupMomentumDecode = true;

  // The four byte planes of the magnitudes of the permuted codes in x (low 7 bits each),
  // interleaved into dwords, the sign of x's bytes or-ed in. Writes `regs` (2 or 4)
  // registers: elements 0-15, 16-31, ... of the codes before kDecodeOrder.
  template <int regs>
  __attribute__((always_inline)) static void DecodePermuted(__m512i x, F* out) {
    const uint8_t* t0 = kMomentumPlanes[0].data();
    const uint8_t* t1 = kMomentumPlanes[1].data();
    const uint8_t* t2 = kMomentumPlanes[2].data();
    const uint8_t* t3 = kMomentumPlanes[3].data();
    const __m512i a = _mm512_abs_epi8(x);
    const __m512i b0 =
        _mm512_permutex2var_epi8(_mm512_loadu_si512(t0), a, _mm512_loadu_si512(t0 + 64));
    const __m512i b1 =
        _mm512_permutex2var_epi8(_mm512_loadu_si512(t1), a, _mm512_loadu_si512(t1 + 64));
    const __m512i b2 =
        _mm512_permutex2var_epi8(_mm512_loadu_si512(t2), a, _mm512_loadu_si512(t2 + 64));
    __m512i b3 = _mm512_permutex2var_epi8(_mm512_loadu_si512(t3), a, _mm512_loadu_si512(t3 + 64));
    b3 = _mm512_ternarylogic_epi32(b3, x, _mm512_set1_epi8(static_cast<char>(0x80)),
                                   0xF8);  // b3 | (x & 0x80)
    const __m512i lo01 = _mm512_unpacklo_epi8(b0, b1), lo23 = _mm512_unpacklo_epi8(b2, b3);
    out[0] = F(_mm512_castsi512_ps(_mm512_unpacklo_epi16(lo01, lo23)));
    out[1] = F(_mm512_castsi512_ps(_mm512_unpackhi_epi16(lo01, lo23)));
    if constexpr (regs == 4) {
      const __m512i hi01 = _mm512_unpackhi_epi8(b0, b1), hi23 = _mm512_unpackhi_epi8(b2, b3);
      out[2] = F(_mm512_castsi512_ps(_mm512_unpacklo_epi16(hi01, hi23)));
      out[3] = F(_mm512_castsi512_ps(_mm512_unpackhi_epi16(hi01, hi23)));
    }
  }
  // Code values of the 32 codes of one group (out[0]: elements 0-15, out[1]: 16-31).
  // Reads exactly 32 bytes; the permutation takes the lower output registers' elements
  // from them (kDecodeOrder maps positions 16L + 0..7 to elements below 32).
  __attribute__((always_inline)) static void MomentumCodeValues32(const uint8_t* codes, F* out) {
    const __m512i raw =
        _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes)));
    const __m512i order = _mm512_loadu_si512(kDecodeOrder.data());
    DecodePermuted<2>(_mm512_permutexvar_epi8(order, raw), out);
  }
  // Note [VBMI group I/O].
  static constexpr bool kGroupIo = true;
  // 32 bf16 at p -> two registers of fp32 bits (bf16 << 16).
  __attribute__((always_inline)) static void LoadBf16x2(const uint16_t* p, F* out) {
    const __m512i x = _mm512_loadu_si512(p);
    constexpr __mmask64 kUpperHalves = 0xCCCCCCCCCCCCCCCCull;
    out[0] = F(_mm512_castsi512_ps(
        _mm512_maskz_permutexvar_epi8(kUpperHalves, _mm512_loadu_si512(kWidenBf16[0].data()), x)));
    out[1] = F(_mm512_castsi512_ps(
        _mm512_maskz_permutexvar_epi8(kUpperHalves, _mm512_loadu_si512(kWidenBf16[1].data()), x)));
  }
  // The bf16 + ecc8 master of 32 lanes -> two registers of its fp32 bits.
  __attribute__((always_inline)) static void LoadBf16Ecc8x2(const uint16_t* b, const int8_t* e,
                                                            F* out) {
    const __m512i hi = _mm512_loadu_si512(b);
    const __m512i ecc = _mm512_xor_si512(
        _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(e))),
        _mm512_set1_epi8(static_cast<char>(0x80)));
    constexpr __mmask64 kUpperThree = 0xEEEEEEEEEEEEEEEEull;
    const __m512i bias = _mm512_set1_epi32(0x8000);
    for (int j = 0; j < 2; ++j) {
      const __m512i d = _mm512_maskz_permutex2var_epi8(
          kUpperThree, hi, _mm512_loadu_si512(kMasterBytes[j].data()), ecc);
      out[j] = F(_mm512_castsi512_ps(_mm512_sub_epi32(d, bias)));
    }
  }
  // Note [Ecc8 encode] without the stores: hi = the bf16 << 16 (0x7FC00000 for NaN), t =
  // the ecc rounding sum clamped to 0x7FFF (byte 1: the saturated int8 ecc).
  struct Ecc8Bits {
    I hi, t;
  };
  __attribute__((always_inline)) static Ecc8Bits EncodeBf16Ecc8Bits(F w) {
    const __m512i xi = _mm512_castps_si512(w);
    const __mmask16 ord = _mm512_cmp_ps_mask(w, w, _CMP_ORD_Q);
    const __mmask16 lsb = _mm512_test_epi32_mask(xi, _mm512_set1_epi32(0x10000));
    __m512i r = _mm512_add_epi32(xi, _mm512_set1_epi32(0x7FFF));
    r = _mm512_mask_add_epi32(r, lsb, xi, _mm512_set1_epi32(0x8000));
    const __m512i hi = _mm512_mask_and_epi32(_mm512_set1_epi32(0x7FC00000), ord, r,
                                             _mm512_set1_epi32(static_cast<int32_t>(0xFFFF0000u)));
    const __m512i d = _mm512_maskz_sub_epi32(ord, xi, hi);
    const __mmask16 odd = _mm512_test_epi32_mask(d, _mm512_set1_epi32(0x100));
    __m512i t = _mm512_add_epi32(d, _mm512_set1_epi32(0x7F));
    t = _mm512_mask_add_epi32(t, odd, d, _mm512_set1_epi32(0x80));
    t = _mm512_min_epi32(t, _mm512_set1_epi32(0x7FFF));
    return {I(hi), I(t)};
  }
  // The master of two registers (a, then b) from EncodeBf16Ecc8Bits: 32 bf16 to b16, 32
  // ecc8 to e.
  __attribute__((always_inline)) static void StoreBf16Ecc8x2(uint16_t* b16, int8_t* e, I hi_a,
                                                             I hi_b, I t_a, I t_b) {
    _mm512_storeu_si512(
        b16, _mm512_permutex2var_epi8(hi_a, _mm512_loadu_si512(kBf16Bytes.data()), hi_b));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(e),
                        _mm512_castsi512_si256(_mm512_permutex2var_epi8(
                            t_a, _mm512_loadu_si512(kEccBytes.data()), t_b)));
  }
  // The low 8 bits of the lanes of a, then b (32 bytes), truncated like StoreLow8.
  __attribute__((always_inline)) static void StoreLow8x2(void* p, I a, I b) {
    const __m512i x = _mm512_permutex2var_epi8(a, _mm512_loadu_si512(kLowBytes.data()), b);
    _mm256_storeu_si256(static_cast<__m256i*>(p), _mm512_castsi512_si256(x));
  }
  // Code values of the 64 codes of two adjacent groups (out[0..3]).
  __attribute__((always_inline)) static void MomentumCodeValues64(const uint8_t* codes, F* out) {
    const __m512i raw = _mm512_loadu_si512(codes);
    const __m512i order = _mm512_loadu_si512(kDecodeOrder.data());
    DecodePermuted<4>(_mm512_permutexvar_epi8(order, raw), out);
  }
};

}  // namespace tandem::cpu::TANDEM_ISA_NS
