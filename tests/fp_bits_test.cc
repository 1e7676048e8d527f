// Conversions are checked against the compiler's own correctly rounded conversions
// (_Float16, double arithmetic) over strided sweeps of all 2^32 bit patterns.
#include "engine/fp_bits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace tandem::num {
namespace {

// bf16 RNE through double: the bf16 neighbours of x bracket it; pick the nearer, ties even.
uint16_t Bf16ViaDouble(float x) {
  const uint32_t u = BitsOf(x);
  const uint16_t lo = static_cast<uint16_t>(u >> 16);  // truncation (toward zero)
  const uint16_t hi = static_cast<uint16_t>(lo + 1);   // next magnitude up
  if ((u & 0xFFFFu) == 0) return lo;
  const double dx = std::fabs(static_cast<double>(x));
  const double dlo = std::fabs(static_cast<double>(Bf16ToF32(lo)));
  const double dhi = std::fabs(static_cast<double>(Bf16ToF32(hi)));
  if (dx - dlo < dhi - dx) return lo;
  if (dx - dlo > dhi - dx) return hi;
  return (lo & 1u) ? hi : lo;
}

TEST(FpBits, Bf16RoundsToNearestEvenOverSweep) {
  uint64_t checked = 0;
  for (uint64_t p = 0; p <= 0xFFFFFFFFull; p += 257) {
    const float x = FloatOf(static_cast<uint32_t>(p));
    if (std::isnan(x)) {
      EXPECT_EQ(F32ToBf16(x), 0x7FC0u);
      continue;
    }
    if ((BitsOf(x) & 0x7FFFFFFFu) >= 0x7F7F8000u) continue;  // rounds to Inf: checked below
    ASSERT_EQ(F32ToBf16(x), Bf16ViaDouble(x)) << std::hex << p;
    ++checked;
  }
  EXPECT_GT(checked, 16000000u);
  EXPECT_EQ(F32ToBf16(INFINITY), 0x7F80u);
  EXPECT_EQ(F32ToBf16(-INFINITY), 0xFF80u);
  EXPECT_EQ(F32ToBf16(FloatOf(0x7F7F8000u)), 0x7F80u);  // tie above the largest bf16: to Inf
  EXPECT_EQ(F32ToBf16(FloatOf(0x7F7F7FFFu)), 0x7F7Fu);
  EXPECT_EQ(F32ToBf16(-0.0f), 0x8000u);
  EXPECT_EQ(F32ToBf16(FloatOf(0x00008000u)), 0x0000u);  // denormal tie to even (0)
  EXPECT_EQ(F32ToBf16(FloatOf(0x00018000u)), 0x0002u);  // denormal tie to even (2)
}

// The compiler's IEEE binary16: _Float16 (GCC 12 has it in C++ on x86-64 only), __fp16 on
// aarch64 (IEEE format there; its conversions are fcvt, under FPCR's round to nearest).
#if defined(__aarch64__)
using Half = __fp16;
#else
using Half = _Float16;
#endif

TEST(FpBits, F16MatchesCompilerConversionOverSweep) {
  uint64_t checked = 0;
  for (uint64_t p = 0; p <= 0xFFFFFFFFull; p += 251) {
    const float x = FloatOf(static_cast<uint32_t>(p));
    const Half h = static_cast<Half>(x);
    uint16_t hb;
    memcpy(&hb, &h, 2);
    if (std::isnan(x)) {
      EXPECT_EQ(F32ToF16(x), 0x7E00u);
      continue;
    }
    ASSERT_EQ(F32ToF16(x), hb) << std::hex << p;
    ++checked;
  }
  EXPECT_GT(checked, 16000000u);
}

TEST(FpBits, F16ToF32IsExactForAllHalves) {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    Half hv;
    const uint16_t hb = static_cast<uint16_t>(h);
    memcpy(&hv, &hb, 2);
    const float want = static_cast<float>(hv);
    const float got = F16ToF32(hb);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      ASSERT_EQ(BitsOf(got), BitsOf(want)) << std::hex << h;
    }
  }
}

TEST(FpBits, Bf16CeilIsSmallestBf16NotBelow) {
  for (uint64_t p = 0; p < 0x7F800000ull; p += 4099) {
    const float x = FloatOf(static_cast<uint32_t>(p));
    const float c = Bf16ToF32(Bf16CeilNonNeg(x));
    ASSERT_GE(c, x);
    if (c != x) {
      ASSERT_LT(Bf16ToF32(static_cast<uint16_t>(Bf16CeilNonNeg(x) - 1)), x);
    }
  }
  EXPECT_EQ(Bf16CeilNonNeg(INFINITY), 0x7F80u);
}

TEST(FpBits, RoundHalfEvenMatchesNearbyint) {
  for (float x = -300.0f; x <= 300.0f; x += 0.125f) {
    ASSERT_EQ(RoundHalfEven(x), static_cast<int32_t>(std::nearbyint(x))) << x;
  }
  EXPECT_EQ(RoundHalfEven(0.5f), 0);
  EXPECT_EQ(RoundHalfEven(1.5f), 2);
  EXPECT_EQ(RoundHalfEven(2.5f), 2);
  EXPECT_EQ(RoundHalfEven(-0.5f), 0);
  EXPECT_EQ(RoundHalfEven(-1.5f), -2);
  EXPECT_EQ(RoundHalfEven(-2.5f), -2);
  EXPECT_EQ(RoundHalfEven(126.49999f), 126);
  EXPECT_EQ(RoundHalfEven(8388607.0f), 8388607);
}

}  // namespace
}  // namespace tandem::num
