#include <gtest/gtest.h>

#include <string>

#include "checkpoint/crc.h"

namespace tandem::ckpt {
namespace {

TEST(Crc32cTest, StandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);  // RFC 3720 / the usual check value
  EXPECT_EQ(Crc32c("", 0), 0u);
}

TEST(Crc32cTest, ExtendEqualsWhole) {
  const std::string a = "hello, ", b = "checkpoint";
  EXPECT_EQ(Crc32c(b.data(), b.size(), Crc32c(a.data(), a.size())),
            Crc32c((a + b).data(), a.size() + b.size()));
}

TEST(Crc32cTest, ThirtyTwoZeroBytes) {  // RFC 3720 B.4 test vector
  const std::string z(32, '\0');
  EXPECT_EQ(Crc32c(z.data(), z.size()), 0x8A9136AAu);
}

TEST(SectionCrcTest, TagCoversKindTensorCodecAndLength) {
  const std::string p = "payload";
  const uint32_t base = SectionCrc(SectionKind::kMCodes, 3, Codec::kNone, 7, p.data(), p.size());
  EXPECT_NE(base, SectionCrc(SectionKind::kVCodes, 3, Codec::kNone, 7, p.data(), p.size()));
  EXPECT_NE(base, SectionCrc(SectionKind::kMCodes, 4, Codec::kNone, 7, p.data(), p.size()));
  EXPECT_NE(base, SectionCrc(SectionKind::kMCodes, 3, Codec::kDeflate, 7, p.data(), p.size()));
  EXPECT_NE(base, SectionCrc(SectionKind::kMCodes, 3, Codec::kNone, 8, p.data(), p.size()));
  EXPECT_NE(base, Crc32c(p.data(), p.size()));
}

}  // namespace
}  // namespace tandem::ckpt
