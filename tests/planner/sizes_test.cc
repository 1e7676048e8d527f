#include <string>

#include <gtest/gtest.h>

#include "tandem/error.h"
#include "tandem/planner.h"

namespace tandem::planner {
namespace {

TEST(Sizes, ParseBytesUnits) {
  EXPECT_EQ(ParseBytes("80GiB"), 80ull << 30);
  EXPECT_EQ(ParseBytes("80 gib"), 80ull << 30);
  EXPECT_EQ(ParseBytes("141GB"), 141000000000ull);
  EXPECT_EQ(ParseBytes("512MiB"), 512ull << 20);
  EXPECT_EQ(ParseBytes("1.5TiB"), 3ull << 39);
  EXPECT_EQ(ParseBytes("4096B"), 4096u);
  EXPECT_EQ(ParseBytes("2TB"), 2000000000000ull);
  EXPECT_EQ(ParseBytes("2tib"), 2ull << 40);
  EXPECT_EQ(ParseBytes("3MB"), 3000000u);
  EXPECT_EQ(ParseBytes("1KiB"), 1024u);
  EXPECT_THROW(ParseBytes("80 parsecs"), Error);
  EXPECT_THROW(ParseBytes("GiB"), Error);
  EXPECT_THROW(ParseBytes("-1GiB"), Error);
  EXPECT_THROW(ParseBytes("1e30TiB"), Error);
}

TEST(Sizes, BareNumberIsAnErrorSuggestingUnits) {
  // "--gpu-mem 80" once planned for 80 bytes.
  for (const char* bare : {"80", "123456", "0", "1.5"}) {
    try {
      ParseBytes(bare);
      ADD_FAILURE() << bare << " was accepted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(m.find(std::string(bare) + "GiB"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string(bare) + "GB"), std::string::npos) << m;
      EXPECT_NE(m.find("no unit"), std::string::npos) << m;
    }
  }
}

TEST(Sizes, ParseCountSuffixes) {
  EXPECT_EQ(ParseCount("8e9"), 8000000000ull);
  EXPECT_EQ(ParseCount("7.5B"), 7500000000ull);
  EXPECT_EQ(ParseCount("125M"), 125000000u);
  EXPECT_EQ(ParseCount("1000"), 1000u);
  EXPECT_THROW(ParseCount("3 apples"), Error);
  // A plain number is the count itself: whole numbers in any spelling, nothing else.
  EXPECT_EQ(ParseCount("8.03e9"), 8030000000ull);
  EXPECT_EQ(ParseCount("8030261248"), 8030261248ull);
  try {
    ParseCount("8.5");
    ADD_FAILURE() << "8.5 parameters accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a whole number"), std::string::npos) << e.what();
  }
  // A path is not a count, and the message says what a count looks like (no "unit").
  try {
    ParseCount("nope/config.json");
    ADD_FAILURE() << "a path accepted as a count";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optional suffix K, M, B or T"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem::planner
