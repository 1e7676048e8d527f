// What is resolved is what is built: ResolvePlacement's placement, split and memory are the
// optimizer's own (host mode, every placement class the host can run, with and without
// speculation and per-tensor formats), and the host budget is checked against them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hybrid_fixture.h"
#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tandem/resolve_placement.h"

namespace tandem {
namespace {

using testing::Model;

OptimizerConfig Config(double fraction, double share, bool speculative) {
  OptimizerConfig c = testing::QuantizedConfig(ExecutionMode::kHost, fraction,
                                               PlacementPolicy::kBackwardOrder, 1024, 2);
  c.offload_compute = share;
  c.stream_chunk_bytes = 8192;
  c.speculative_early_start = speculative;
  c.speculative_stream_bytes = 3 * 8192;  // fewer than the streamed chunks
  return c;
}

void ExpectSameBytes(const MemoryReport::Bytes& a, const MemoryReport::Bytes& b,
                     const std::string& what) {
  EXPECT_EQ(a.master, b.master) << what;
  EXPECT_EQ(a.correction, b.correction) << what;
  EXPECT_EQ(a.momentum, b.momentum) << what;
  EXPECT_EQ(a.variance, b.variance) << what;
  EXPECT_EQ(a.scales, b.scales) << what;
  EXPECT_EQ(a.staging, b.staging) << what;
  EXPECT_EQ(a.metadata, b.metadata) << what;
  EXPECT_EQ(a.speculation, b.speculation) << what;
}

TEST(ResolvePlacementHost, WhatIsResolvedIsWhatIsBuilt) {
  for (double fraction : {0.0, 0.4, 1.0})
    for (double share : {0.0, 0.5, 1.0})
      for (bool speculative : {false, true}) {
        const std::string what = "fraction " + std::to_string(fraction) + " share " +
                                 std::to_string(share) + (speculative ? " speculative" : "");
        Model m;
        m.Init(2);
        OptimizerConfig c = Config(fraction, share, speculative);
        c.machine_rates = MachineRates{50, 50, 1, 100};  // the split is reported too
        const ResolvedPlacement r =
            ResolvePlacement(m.Specs(2), c, ExecutionMode::kHost, &*c.machine_rates);
        HybridOptimizer opt(m.Specs(2), c);
        const Placement& p = opt.placement();
        ASSERT_EQ(p.tensors.size(), r.placement.tensors.size()) << what;
        for (size_t t = 0; t < p.tensors.size(); ++t) {
          EXPECT_EQ(p.tensors[t].device_count, r.placement.tensors[t].device_count) << what;
          EXPECT_EQ(p.tensors[t].stream_count, r.placement.tensors[t].stream_count) << what;
        }
        EXPECT_EQ(p.stream_share, r.placement.stream_share) << what;
        EXPECT_EQ(opt.compute_split().step_ms, r.split.step_ms) << what;
        const MemoryReport got = opt.memory();
        ExpectSameBytes(got.host, r.memory.host, what);
        ExpectSameBytes(got.device, r.memory.device, what);
        EXPECT_EQ(got.classes.streamed, r.memory.classes.streamed) << what;
        EXPECT_EQ(got.classes.host_computed, r.memory.classes.host_computed) << what;
        EXPECT_EQ(got.host_budget, r.memory.host_budget) << what;
      }
}

// The budget is checked against the resolved placement's own host bytes: exactly those
// fit, one byte less does not (and nothing is allocated then).
TEST(ResolvePlacementHost, TheBudgetIsCheckedAgainstTheResolvedPlacement) {
  for (double share : {0.0, 0.5, 1.0}) {
    Model m;
    m.Init(3);
    OptimizerConfig c = Config(1.0, share, true);
    const uint64_t need =
        ResolvePlacement(m.Specs(2), c, ExecutionMode::kHost, nullptr).memory.host.total();
    c.pinned_budget_bytes = need;
    HybridOptimizer fits(m.Specs(2), c);
    EXPECT_EQ(fits.memory().host.total(), need);
    c.pinned_budget_bytes = need - 1;
    try {
      HybridOptimizer refused(m.Specs(2), c);
      ADD_FAILURE() << "a budget one byte short was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
      EXPECT_NE(std::string(e.what()).find(std::to_string(need)), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tandem
