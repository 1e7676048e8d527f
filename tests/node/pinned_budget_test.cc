// The node's pinned-memory budget, its per-rank shares and the byte-size syntax.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "tandem/error.h"
#include "tandem/node.h"

namespace tandem {
namespace {

TEST(ParseByteSize, UnitsAndSpelling) {
  EXPECT_EQ(ParseByteSize("12345"), 12345u);
  EXPECT_EQ(ParseByteSize("64GiB"), 64ull << 30);
  EXPECT_EQ(ParseByteSize("64 gib"), 64ull << 30);
  EXPECT_EQ(ParseByteSize("200GB"), 200'000'000'000ull);
  EXPECT_EQ(ParseByteSize("1.5TiB"), 3ull << 39);
  EXPECT_EQ(ParseByteSize("512MiB"), 512ull << 20);
  EXPECT_EQ(ParseByteSize("4k"), 4096u);
  EXPECT_EQ(ParseByteSize("7B"), 7u);
  EXPECT_EQ(ParseByteSize("0"), 0u);
  for (const char* bad :
       {"", "GiB", "-1GiB", "12 parsecs", "1.2.3", "1e3", "99999999999TiB", "64 GiB extra"}) {
    try {
      ParseByteSize(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(e.message().find(std::string("'") + bad + "'"), std::string::npos) << e.message();
    }
  }
}

TEST(PinnedBudget, SharesAddUpToAtMostTheNodeBudget) {
  const uint64_t node = (200ull << 30) + 7;
  for (int world : {1, 2, 3, 8}) {
    const uint64_t share = PinnedBudget(world, node);
    EXPECT_EQ(share, node / world);
    EXPECT_LE(share * world, node);
  }
  EXPECT_THROW(PinnedBudget(0, node), Error);
}

TEST(PinnedBudget, NodeBudgetComesFromTheEnvironmentOrMemTotal) {
  unsetenv("TANDEM_NODE_PINNED_BUDGET");
  const uint64_t by_memtotal = NodePinnedBudget();
  EXPECT_GT(by_memtotal, 0u);  // half of MemTotal on Linux
  EXPECT_EQ(PinnedBudget(2), by_memtotal / 2);
  setenv("TANDEM_NODE_PINNED_BUDGET", "64GiB", 1);
  EXPECT_EQ(NodePinnedBudget(), 64ull << 30);
  EXPECT_EQ(PinnedBudget(4), 16ull << 30);
  setenv("TANDEM_NODE_PINNED_BUDGET", "lots", 1);
  try {
    NodePinnedBudget();
    ADD_FAILURE() << "a malformed TANDEM_NODE_PINNED_BUDGET was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("TANDEM_NODE_PINNED_BUDGET"), std::string::npos) << e.message();
  }
  unsetenv("TANDEM_NODE_PINNED_BUDGET");
}

}  // namespace
}  // namespace tandem
