#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "checkpoint/compress.h"
#include "tandem/error.h"

namespace tandem::ckpt {
namespace {

std::vector<uint8_t> LowEntropy(size_t n) {
  std::mt19937 rng(1);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(rng() % 4);
  return v;
}

TEST(CompressTest, RoundTrip) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{1} << 20}) {
    const auto in = LowEntropy(n);
    std::vector<uint8_t> z;
    ASSERT_TRUE(DeflateLevel1(in.data(), in.size(), in.size() + 1024, &z)) << n;
    std::vector<uint8_t> out(n);
    Inflate(z.data(), z.size(), out.data(), n, "t");
    EXPECT_EQ(in, out) << n;
  }
}

TEST(CompressTest, RandomDataDoesNotPay) {
  std::mt19937 rng(2);
  std::vector<uint8_t> in(100000);
  for (auto& x : in) x = static_cast<uint8_t>(rng());
  std::vector<uint8_t> z;
  EXPECT_FALSE(DeflateLevel1(in.data(), in.size(), in.size() - in.size() / 8, &z));
}

class InflateDamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    in_ = LowEntropy(50000);
    ASSERT_TRUE(DeflateLevel1(in_.data(), in_.size(), in_.size(), &z_));
    out_.resize(in_.size() + 10);
  }
  void ExpectCorrupt(const std::vector<uint8_t>& z, size_t raw) {
    try {
      Inflate(z.data(), z.size(), out_.data(), raw, "section 9");
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kCorruption);
      EXPECT_NE(std::string(e.what()).find("section 9"), std::string::npos) << e.what();
    }
  }
  std::vector<uint8_t> in_, z_, out_;
};

TEST_F(InflateDamageTest, ClaimedSizeTooSmall) { ExpectCorrupt(z_, in_.size() - 1); }
TEST_F(InflateDamageTest, ClaimedSizeTooLarge) { ExpectCorrupt(z_, in_.size() + 1); }
TEST_F(InflateDamageTest, TruncatedStream) {
  for (size_t cut : {size_t{0}, size_t{1}, z_.size() / 2, z_.size() - 1}) {
    std::vector<uint8_t> z(z_.begin(), z_.begin() + cut);
    ExpectCorrupt(z, in_.size());
  }
}
TEST_F(InflateDamageTest, TrailingBytes) {
  auto z = z_;
  z.push_back(0);
  ExpectCorrupt(z, in_.size());
}
TEST_F(InflateDamageTest, Garbage) {
  std::vector<uint8_t> z(200, 0xFF);
  ExpectCorrupt(z, in_.size());
}

}  // namespace
}  // namespace tandem::ckpt
