// Exhaustive checks of the code paths of the kernels that may be written otherwise than
// the reference (Note [Division-free decode] in cpu_simd/ops_avx512.h, and the compander
// of each ISA): every code value and every compander input of [0, ~1.008] must give the
// reference's bits, on each ISA.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cpu_simd/span_kernels.h"
#include "engine/q8_codec.h"
#include "tests/cpu_simd/test_util.h"

namespace tandem::cpu::testing {
namespace {

struct Hooks {
  void (*code_values)(float*, float*);
  uint64_t (*compander_mismatches)(uint32_t, uint32_t);
};

Hooks HooksFor(Isa isa) {
  switch (isa) {
    case Isa::kSse:
      return {&CodeValuesSse, &CompanderMismatchesSse};
    case Isa::kAvx2:
      return {&CodeValuesAvx2, &CompanderMismatchesAvx2};
    case Isa::kAvx512:
      return {&CodeValuesAvx512, &CompanderMismatchesAvx512};
  }
  return {};
}

class Codec : public ::testing::TestWithParam<Isa> {};

TEST_P(Codec, EveryCodeValueIsTheReferenceQuotient) {
  float mom[256], var[256];
  HooksFor(GetParam()).code_values(mom, var);
  for (int c = -127; c <= 127; ++c) {
    const float want = num::MomentumCodeValue(c);
    EXPECT_EQ(0, std::memcmp(&want, &mom[c + 128], 4)) << "momentum code " << c;
  }
  for (int c = 0; c < 256; ++c) {
    const float want = num::VarianceCodeValue(c);
    EXPECT_EQ(0, std::memcmp(&want, &var[c], 4)) << "variance code " << c;
  }
}

// All 1.07e9 floats from +0 to 1.0078125 (a <= 1 up to a rounding of |m| * (1/s)).
TEST_P(Codec, CompanderMatchesDivisionForEveryInputUpToOne) {
  if (GetParam() != Isa::kAvx512) GTEST_SKIP() << "division is used directly on this ISA";
  EXPECT_EQ(HooksFor(GetParam()).compander_mismatches(0, 0x3F810000u), 0u);
}

// Note [Scales in vector registers]: the vector bf16 ceiling and 1/scale equal
// q8_codec.h's GroupScaleBits and 1.0f / scale for every binade and every kind of lower
// half (zero, one, the tie 0x8000, all ones: the carry cases), for zero, subnormals,
// FLT_MIN and Inf, and for a stride through all other non-negative floats.
TEST(CodecAvx512, GroupScaleInVectorRegistersMatchesReference) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  auto check = [](uint32_t bits) {
    float amax;
    std::memcpy(&amax, &bits, 4);
    uint16_t got_bits = 0;
    float got_inv = 0.0f;
    GroupScaleAvx512(amax, &got_bits, &got_inv);
    const uint16_t want_bits = num::GroupScaleBits(amax);
    const float want_inv = 1.0f / num::Bf16ToF32(want_bits);
    ASSERT_EQ(got_bits, want_bits) << "amax bits 0x" << std::hex << bits;
    ASSERT_EQ(0, std::memcmp(&got_inv, &want_inv, 4)) << "amax bits 0x" << std::hex << bits;
  };
  for (uint32_t hi = 0; hi <= 0x7F80u; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
      if ((hi << 16 | lo) <= 0x7F800000u) check(hi << 16 | lo);
  for (uint64_t b = 0; b <= 0x7F800000u; b += 65521) check(static_cast<uint32_t>(b));
}

// Note [VBMI momentum decode]: the byte-plane lookups of one and of two groups give every
// code the reference's value, and code -128 (never written by the encoder) the per-register
// path's -0.0 (|-128| reads table entry 0 there too).
TEST(CodecAvx512Vbmi, GroupDecodeGivesEveryCodeValue) {
  if (!VbmiSupported()) GTEST_SKIP() << "no AVX512-VBMI on this CPU";
  float got[256];
  GroupCodeValuesAvx512Vbmi(got);
  for (int c = -127; c <= 127; ++c) {
    const float want = num::MomentumCodeValue(c);
    EXPECT_EQ(0, std::memcmp(&want, &got[c + 128], 4)) << "momentum code " << c;
  }
  const float minus_zero = -0.0f;
  EXPECT_EQ(0, std::memcmp(&minus_zero, &got[0], 4)) << "momentum code -128";
}

// Note [VBMI group I/O]: the VBMI group loads (bf16 gradient; bf16 + ecc8 master) and the
// master encode and stores give the per-register AVX-512 bits for every bf16 with every
// ecc8 byte, and for master values with every upper half and, per pass, lower halves at
// and around the bf16 and ecc8 rounding ties (where the ecc8 saturates) or pseudo-random.
TEST(CodecAvx512Vbmi, GroupIoMatchesPerRegisterForms) {
  if (!VbmiSupported()) GTEST_SKIP() << "no AVX512-VBMI on this CPU";
  constexpr uint32_t kLows[] = {0x0000, 0x0001, 0x007F, 0x0080, 0x0081, 0x017F, 0x0180, 0x0181,
                                0x7FFF, 0x8000, 0x8001, 0x807F, 0x8080, 0x8180, 0xFF7F, 0xFFFF};
  constexpr size_t n = 65536;
  std::vector<uint16_t> bf16(n);
  std::vector<int8_t> ecc(n);
  std::vector<float> w(n);
  for (uint32_t k = 0; k < 256; ++k) {
    for (uint32_t i = 0; i < n; ++i) {
      bf16[i] = static_cast<uint16_t>(i);
      ecc[i] = static_cast<int8_t>(static_cast<uint8_t>(i * 7 + k));
      const uint32_t low = k < 16 ? kLows[k] : (i * 2654435761u + k * 40503u) >> 16;
      const uint32_t bits = i << 16 | low;
      std::memcpy(&w[i], &bits, 4);
    }
    ASSERT_EQ(GroupIoMismatchesAvx512Vbmi(bf16.data(), ecc.data(), w.data(), n), 0u)
        << "pass " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, Codec, ::testing::ValuesIn(SupportedIsas()),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return std::string(IsaName(i.param));
                         });

}  // namespace
}  // namespace tandem::cpu::testing
