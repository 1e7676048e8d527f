// q8 momentum and variance: round-trip bounds per group, zero groups, outliers, denormals,
// and the no-zero-point rule for variance.
#include "engine/q8_codec.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

namespace tandem::num {
namespace {

constexpr int G = kQuantGroup;

// Largest decoding error for a value whose companded code value is t in [0, 127]: half a
// code step at the steep end of t / (254 - t), plus fp32 rounding.
double MomentumBound(double a_norm, double s) {
  const double t = 254.0 * a_norm / (1.0 + a_norm);
  const double hi = std::min(127.0, t + 0.5);
  const double slope = 254.0 / ((254.0 - hi) * (254.0 - hi));
  return s * (0.5 * slope + 1e-6);
}

TEST(Q8Momentum, RoundTripWithinHalfCodeStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (int trial = 0; trial < 2000; ++trial) {
    const int len = 1 + trial % G;
    const float mag = std::ldexp(1.0f, static_cast<int>(rng() % 120) - 60);
    std::vector<float> m(len), back(len);
    for (auto& x : m) x = nd(rng) * mag;
    std::vector<int8_t> codes(len);
    uint16_t sb;
    EncodeMomentumGroup(m.data(), len, codes.data(), &sb);
    DecodeMomentumGroup(codes.data(), sb, len, back.data());
    const double s = Bf16ToF32(sb);
    float amax = 0;
    for (float x : m) amax = std::max(amax, std::fabs(x));
    ASSERT_GE(s, amax);
    ASSERT_LE(s, amax * (1 + 1.0 / 128) + FLT_MIN);
    for (int i = 0; i < len; ++i) {
      ASSERT_LE(std::fabs(double(back[i]) - m[i]), MomentumBound(std::fabs(m[i]) / s, s))
          << "trial " << trial << " i " << i;
      ASSERT_NE(codes[i], -128);
      if (back[i] != 0) {
        ASSERT_EQ(back[i] < 0, m[i] < 0);
      }
    }
  }
}

TEST(Q8Momentum, ZeroGroupDecodesToZero) {
  std::vector<float> m(G, 0.0f), back(G, 1.0f);
  std::vector<int8_t> codes(G, 5);
  uint16_t sb;
  EncodeMomentumGroup(m.data(), G, codes.data(), &sb);
  DecodeMomentumGroup(codes.data(), sb, G, back.data());
  for (int i = 0; i < G; ++i) {
    EXPECT_EQ(codes[i], 0);
    EXPECT_EQ(back[i], 0.0f);
  }
  EXPECT_EQ(Bf16ToF32(sb), FLT_MIN);
}

TEST(Q8Momentum, OutlierKeepsItsValueAndSmallOnesStayBounded) {
  std::vector<float> m(G, 1e-3f), back(G);
  m[17] = -1e30f;
  std::vector<int8_t> codes(G);
  uint16_t sb;
  EncodeMomentumGroup(m.data(), G, codes.data(), &sb);
  DecodeMomentumGroup(codes.data(), sb, G, back.data());
  EXPECT_EQ(codes[17], -127);
  EXPECT_NEAR(back[17], -1e30, 1e30 / 128);
  for (int i = 0; i < G; ++i)
    if (i != 17) {
      EXPECT_LE(std::fabs(back[i] - m[i]), MomentumBound(1e-33, 1e30));
    }
}

TEST(Q8Momentum, DenormalInputs) {
  std::vector<float> m(G), back(G);
  for (int i = 0; i < G; ++i) m[i] = FloatOf(0x00000100u * (i + 1)) * (i % 2 ? -1.f : 1.f);
  std::vector<int8_t> codes(G);
  uint16_t sb;
  EncodeMomentumGroup(m.data(), G, codes.data(), &sb);
  DecodeMomentumGroup(codes.data(), sb, G, back.data());
  EXPECT_EQ(Bf16ToF32(sb), FLT_MIN);  // Note [Scale floor]
  for (int i = 0; i < G; ++i) EXPECT_LE(std::fabs(back[i] - m[i]), MomentumBound(1e-3, FLT_MIN));
}

TEST(Q8Momentum, CodeValuesAreTheExactCompanderInverse) {
  for (int q = -127; q <= 127; ++q) {
    const double exact = double(q) / double(254 - std::abs(q));
    EXPECT_EQ(MomentumCodeValue(q), static_cast<float>(exact)) << q;
  }
  EXPECT_EQ(MomentumCodeValue(127), 1.0f);
  EXPECT_EQ(MomentumCodeValue(-127), -1.0f);
}

TEST(Q8Variance, RoundTripWithinHalfCodeStep) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  for (int trial = 0; trial < 2000; ++trial) {
    const int len = 1 + trial % G;
    const float mag = std::ldexp(1.0f, static_cast<int>(rng() % 120) - 60);
    std::vector<float> u(len), back(len);
    for (auto& x : u) x = ud(rng) * mag;
    std::vector<uint8_t> codes(len);
    uint16_t sb;
    EncodeSqrtVarianceGroup(u.data(), len, codes.data(), &sb);
    DecodeSqrtVarianceGroup(codes.data(), sb, len, back.data());
    const double s = Bf16ToF32(sb);
    for (int i = 0; i < len; ++i) {
      const double err = std::fabs(double(back[i]) - u[i]);
      // Half a code step, or the raise to code 1 for tiny non-zero values.
      ASSERT_LE(err, s * (0.5 / 255 + 1e-6) + (codes[i] == 1 ? s / 255 : 0.0));
      if (u[i] > 0) {
        ASSERT_GT(back[i], 0.0f);
      }
    }
  }
}

TEST(Q8Variance, NonZeroNeverDecodesToZero) {
  // Tiny values beside a huge one: all must keep a non-zero code (Note [No zero point]).
  std::vector<float> u(G), back(G);
  for (int i = 0; i < G; ++i) u[i] = std::ldexp(1.0f, -100 + 3 * i);
  u[0] = FloatOf(1);  // smallest denormal
  u[5] = 0.0f;
  std::vector<uint8_t> codes(G);
  uint16_t sb;
  EncodeSqrtVarianceGroup(u.data(), G, codes.data(), &sb);
  DecodeSqrtVarianceGroup(codes.data(), sb, G, back.data());
  for (int i = 0; i < G; ++i) {
    if (u[i] > 0) {
      EXPECT_GE(codes[i], 1) << i;
      EXPECT_GT(back[i], 0.0f) << i;
      EXPECT_GE(back[i], u[i] * (1 - 1.0 / 255)) << i;  // rounding up never undershoots much
    } else {
      EXPECT_EQ(codes[i], 0);
      EXPECT_EQ(back[i], 0.0f);
    }
  }
  EXPECT_EQ(codes[G - 1], 255);
}

TEST(Q8Variance, ZeroGroupAndDenormals) {
  std::vector<float> u(G, 0.0f), back(G, 1.0f);
  std::vector<uint8_t> codes(G, 9);
  uint16_t sb;
  EncodeSqrtVarianceGroup(u.data(), G, codes.data(), &sb);
  DecodeSqrtVarianceGroup(codes.data(), sb, G, back.data());
  for (int i = 0; i < G; ++i) EXPECT_EQ(back[i], 0.0f);
  for (int i = 0; i < G; ++i) u[i] = FloatOf(0x10u + 0x1000u * i);
  EncodeSqrtVarianceGroup(u.data(), G, codes.data(), &sb);
  DecodeSqrtVarianceGroup(codes.data(), sb, G, back.data());
  for (int i = 0; i < G; ++i) EXPECT_GT(back[i], 0.0f);
}

}  // namespace
}  // namespace tandem::num
