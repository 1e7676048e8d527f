// Exhaustive checks of the division-free paths of the kernels (Note [Division-free
// decode], Note [Compander without division] in cpu_simd/ops_avx512.h): every code value
// and every compander input of [0, ~1.008] must give the reference's bits, on each ISA.
#include <gtest/gtest.h>

#include <cstring>

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

INSTANTIATE_TEST_SUITE_P(SupportedIsas, Codec, ::testing::ValuesIn(SupportedIsas()),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return std::string(IsaName(i.param));
                         });

}  // namespace
}  // namespace tandem::cpu::testing
