// The exact accumulator of the gradient pre-pass (Note [Exact sum of squares]): any order
// and any partition of the additions give the same integer, and ToDouble rounds it to the
// nearest double, ties to even.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/exact_sum.h"

namespace tandem::exact {
namespace {

Acc Sum(const std::vector<double>& xs) {
  Acc a;
  Clear(a);
  for (double x : xs) Add(a, x);
  EXPECT_TRUE(Normalize(a));
  return a;
}

bool Same(const Acc& a, const Acc& b) {
  return std::equal(std::begin(a.limb), std::end(a.limb), std::begin(b.limb));
}

TEST(ExactSum, OneValueComesBackExactly) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 20000; ++i) {
    // Exponents from 2^-139 (whose lowest mantissa bit is 2^-191) to 2^290.
    const double x = std::ldexp(1.0 + std::uniform_real_distribution<double>(0, 1)(rng),
                                static_cast<int>(rng() % 430) - 139);
    EXPECT_EQ(ToDouble(Sum({x})), x) << x;
  }
  EXPECT_EQ(ToDouble(Sum({})), 0.0);
  EXPECT_EQ(ToDouble(Sum({0.0, -0.0})), 0.0);
}

TEST(ExactSum, AnyOrderAndPartitionGivesTheSameInteger) {
  std::mt19937_64 rng(2);
  std::vector<double> xs;
  for (int i = 0; i < 5000; ++i)
    xs.push_back(std::ldexp(std::uniform_real_distribution<double>(0, 1)(rng),
                            static_cast<int>(rng() % 200) - 100));
  const Acc whole = Sum(xs);
  for (int round = 0; round < 20; ++round) {
    std::shuffle(xs.begin(), xs.end(), rng);
    // Split into random parts, each summed alone, then merged in a random order.
    std::vector<Acc> parts;
    size_t i = 0;
    while (i < xs.size()) {
      const size_t n = 1 + rng() % 700;
      parts.push_back(Sum({xs.begin() + i, xs.begin() + std::min(xs.size(), i + n)}));
      i += n;
    }
    std::shuffle(parts.begin(), parts.end(), rng);
    Acc merged;
    Clear(merged);
    for (const Acc& p : parts) Merge(merged, p);
    ASSERT_TRUE(Normalize(merged));
    EXPECT_TRUE(Same(merged, whole)) << "round " << round;
  }
  // And the double sum, which depends on the order, is within rounding of it.
  long double ref = 0;
  for (double x : xs) ref += x;
  EXPECT_NEAR(ToDouble(whole), static_cast<double>(ref), 1e-15 * static_cast<double>(ref));
}

TEST(ExactSum, RoundsToNearestTiesToEven) {
  const double ulp1 = std::ldexp(1.0, -52);
  EXPECT_EQ(ToDouble(Sum({1.0, ulp1 / 2})), 1.0);                       // tie: even (down)
  EXPECT_EQ(ToDouble(Sum({1.0 + ulp1, ulp1 / 2})), 1.0 + 2 * ulp1);     // tie: even (up)
  EXPECT_EQ(ToDouble(Sum({1.0, ulp1 / 2, std::ldexp(1.0, -150)})), 1.0 + ulp1);  // sticky
  EXPECT_EQ(ToDouble(Sum({1.0, ulp1 / 4})), 1.0);                       // below half
  EXPECT_EQ(ToDouble(Sum({std::ldexp(1.0, 200), 1.0})), std::ldexp(1.0, 200));
  // A carry through the rounding: 2^53 - 1 + 0.5 rounds to 2^53.
  EXPECT_EQ(ToDouble(Sum({std::ldexp(1.0, 53) - 1, 0.5})), std::ldexp(1.0, 53));
  // Many equal values: exact, unlike a double sum.
  std::vector<double> tenths(1000, 0.1);
  EXPECT_NEAR(ToDouble(Sum(tenths)), 100.0, 1e-12);
}

TEST(ExactSum, ValuesBelowTheLowestBitAreTruncatedAlike) {
  EXPECT_EQ(ToDouble(Sum({std::ldexp(1.0, -200)})), 0.0);
  EXPECT_EQ(ToDouble(Sum({std::ldexp(1.0, -192)})), std::ldexp(1.0, -192));
  // The part of a value above 2^-192 counts; the rest is dropped, the same everywhere.
  const double x = std::ldexp(1.0, -180) + std::ldexp(1.0, -195);
  EXPECT_EQ(ToDouble(Sum({x})), std::ldexp(1.0, -180));
  EXPECT_EQ(ToDouble(Sum({std::numeric_limits<double>::denorm_min()})), 0.0);
}

}  // namespace
}  // namespace tandem::exact
