// RankCpus on synthetic hwloc topologies (the split every rank computes alike), and
// on this machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "cpu_simd/cpu_pinning.h"
#include "tandem/error.h"
#include "tandem/node.h"

namespace tandem {
namespace {

// In a synthetic "... core:C pu:2" topology PU p belongs to core p / 2.
int CoreOf(int pu) { return pu / 2; }

std::vector<std::vector<int>> AllRanks(const std::string& topo, const std::vector<int>& allowed,
                                       const std::vector<int>& numa, int world) {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < world; ++r) out.push_back(RankCpusOnTopology(topo, allowed, numa, r, world));
  return out;
}

void ExpectDisjoint(const std::vector<std::vector<int>>& sets) {
  std::set<int> seen;
  for (const auto& s : sets)
    for (int c : s) EXPECT_TRUE(seen.insert(c).second) << "CPU " << c << " given twice";
}

void ExpectSiblingsTogether(const std::vector<std::vector<int>>& sets) {
  for (const auto& s : sets)
    for (int c : s) {
      const int sibling = c ^ 1;
      EXPECT_TRUE(std::binary_search(s.begin(), s.end(), sibling))
          << "PU " << c << " without its SMT sibling " << sibling;
    }
}

TEST(RankCpus, OneNumaNodeIsSplitEvenlyWithSiblingsTogether) {
  const std::string topo = "node:1 core:16 pu:2";
  for (int world : {1, 2, 4, 8}) {
    SCOPED_TRACE("ranks " + std::to_string(world));
    const auto sets = AllRanks(topo, {}, {}, world);
    ExpectDisjoint(sets);
    ExpectSiblingsTogether(sets);
    std::set<int> all;
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(sets[r].size(), static_cast<size_t>(32 / world));
      // Contiguous cores, in rank order.
      EXPECT_EQ(CoreOf(sets[r].front()), r * 16 / world);
      EXPECT_EQ(CoreOf(sets[r].back()), (r + 1) * 16 / world - 1);
      all.insert(sets[r].begin(), sets[r].end());
    }
    EXPECT_EQ(all.size(), 32u);  // the union is the node, nothing left out
  }
}

TEST(RankCpus, UnevenSplitsDifferByAtMostOneCore) {
  const auto sets = AllRanks("node:1 core:10 pu:2", {}, {}, 3);
  ExpectDisjoint(sets);
  std::vector<size_t> cores;
  for (const auto& s : sets) cores.push_back(s.size() / 2);
  EXPECT_EQ(
      *std::max_element(cores.begin(), cores.end()) - *std::min_element(cores.begin(), cores.end()),
      1u);
  EXPECT_EQ(cores[0] + cores[1] + cores[2], 10u);
}

TEST(RankCpus, RanksTakeTheCoresOfTheirGpusNumaNode) {
  const std::string topo = "node:2 core:8 pu:2";  // node 0: PUs 0-15, node 1: PUs 16-31
  // Two ranks, GPUs on different nodes: each gets its whole node.
  EXPECT_EQ(RankCpusOnTopology(topo, {}, {1, 0}, 0, 2).front(), 16);
  EXPECT_EQ(RankCpusOnTopology(topo, {}, {1, 0}, 0, 2).size(), 16u);
  EXPECT_EQ(RankCpusOnTopology(topo, {}, {1, 0}, 1, 2).back(), 15);
  // Four ranks, two per node (interleaved): the ranks of a node split it.
  const std::vector<int> numa = {0, 1, 0, 1};
  const auto sets = AllRanks(topo, {}, numa, 4);
  ExpectDisjoint(sets);
  ExpectSiblingsTogether(sets);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(sets[r].size(), 8u);
    for (int c : sets[r]) EXPECT_EQ(c / 16, numa[r]) << "rank " << r << " got CPU " << c;
  }
  EXPECT_EQ(sets[0].front(), 0);
  EXPECT_EQ(sets[2].front(), 8);
  EXPECT_EQ(sets[1].front(), 16);
  EXPECT_EQ(sets[3].front(), 24);
  // Three ranks on node 0, one on node 1.
  const auto uneven = AllRanks(topo, {}, {0, 0, 1, 0}, 4);
  ExpectDisjoint(uneven);
  EXPECT_EQ(uneven[2].size(), 16u);
  for (int r : {0, 1, 3})
    for (int c : uneven[r]) EXPECT_LT(c, 16);
}

TEST(RankCpus, UnknownGpusSplitEveryCore) {
  const auto sets = AllRanks("node:2 core:8 pu:2", {}, {0, -1}, 2);
  EXPECT_EQ(sets[0], RankCpusOnTopology("node:2 core:8 pu:2", {}, {}, 0, 2));
  EXPECT_EQ(sets[0].size(), 16u);
  EXPECT_EQ(sets[1].front(), 16);
}

TEST(RankCpus, OnlyTheProcessAffinityIsUsed) {
  // Allowed: cores 2..9 complete, and one PU of core 10 (its sibling 21 is not allowed).
  std::vector<int> allowed;
  for (int pu = 4; pu < 20; ++pu) allowed.push_back(pu);
  allowed.push_back(20);
  const auto sets = AllRanks("node:1 core:16 pu:2", allowed, {}, 3);
  ExpectDisjoint(sets);
  std::set<int> all;
  for (const auto& s : sets) all.insert(s.begin(), s.end());
  EXPECT_EQ(all, std::set<int>(allowed.begin(), allowed.end()));
  EXPECT_EQ(sets[0].front(), 4);
  // A NUMA node without enough allowed cores for its ranks: all ranks split what is
  // allowed instead (every rank decides alike).
  const std::vector<int> node0_only = {0, 1, 2, 3};
  const auto fallback = AllRanks("node:2 core:4 pu:2", node0_only, {0, 1}, 2);
  ExpectDisjoint(fallback);
  EXPECT_EQ(fallback[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(fallback[1], (std::vector<int>{2, 3}));
}

TEST(RankCpus, MoreRanksThanCoresGivesOneCoreEach) {
  const auto sets = AllRanks("node:1 core:2 pu:2", {}, {}, 5);
  for (int r = 0; r < 5; ++r) EXPECT_EQ(sets[r], (std::vector<int>{2 * (r % 2), 2 * (r % 2) + 1}));
}

TEST(RankCpus, BadArgumentsAreRejected) {
  EXPECT_THROW(RankCpusOnTopology("node:1 core:4 pu:1", {}, {}, 2, 2), Error);
  EXPECT_THROW(RankCpusOnTopology("node:1 core:4 pu:1", {}, {}, -1, 2), Error);
  EXPECT_THROW(RankCpusOnTopology("node:1 core:4 pu:1", {}, {}, 0, 0), Error);
  EXPECT_THROW(RankCpusOnTopology("not a topology", {}, {}, 0, 1), Error);
  EXPECT_THROW(RankCpusOnTopology("node:1 core:4 pu:1", {100}, {}, 0, 1), Error);
  try {
    RankCpus(0, 2, {"0000:17:00.0"});
    ADD_FAILURE() << "one bus id for two ranks was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("gpu_pci_bus_ids has 1 entries"), std::string::npos) << e.message();
  }
}

TEST(RankCpus, OnThisMachineRanksShareTheAffinity) {
  const std::vector<int> all = cpu::ProcessCpus();
  EXPECT_EQ(RankCpus(0, 1), all);
  // Unknown bus ids are unknown GPUs: the plain split.
  EXPECT_EQ(RankCpus(0, 1, {"0000:ff:1f.7"}), all);
  std::set<int> seen;
  const int world = 2;
  for (int r = 0; r < world; ++r) {
    const std::vector<int> s = RankCpus(r, world);
    EXPECT_FALSE(s.empty());
    cpu::ValidateCpuSet(s, "RankCpus");  // usable as host_cpus
    if (all.size() >= 2) {               // with one core, both ranks share it
      for (int c : s) EXPECT_TRUE(seen.insert(c).second);
    }
  }
}

}  // namespace
}  // namespace tandem
