// A plan for a node of ranks takes the rates measured with every rank busy at once
// (Note [The node is one machine] in tandem/compute_split.h; docs/planner.md "The node is
// one machine"): Llama-3-8B with f32 state at fraction 0.5, the step whose prediction
// from one rank's rates was a third of the measured time.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "planner/model_config.h"
#include "planner/plan.h"
#include "tandem/compute_split.h"

namespace tandem::planner {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
const StateFormats kF32{MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kF32};
const char* kF32Key = "adamw/f32/f32/f32/bf16";

// A 4-GPU host calibrated alone and with --ranks 4 (figures of docs/planner.md's node.json).
Profile NodeProfile() {
  Profile p = DefaultProfile();
  p.host.triad_gbps = 175;
  p.host.dram_gbps = 169;
  p.host.kernels[kF32Key].gparams_per_s = 6.0;
  p.pcie.h2d_concurrent_gbps = 50.2;
  p.pcie.d2h_concurrent_gbps = 50.0;
  p.node.ranks = 4;
  p.node.gpus = 4;
  p.node.host_kernels[kF32Key].gparams_per_s = 1.9;
  p.node.host_kernels_under_dma[kF32Key].gparams_per_s = 1.4;
  p.node.h2d_concurrent_gbps = 16.5;
  p.node.d2h_concurrent_gbps = 16.4;
  return p;
}

// tandem-plan --model llama3-8b --gpu-mem 141GB --host-mem 512GiB --master f32 --m f32
//   --v f32 --fraction 0.5 --fsdp2 --gpus-per-node RANKS --profile node.json
PlanInputs EightBF32AtHalf(uint32_t ranks) {
  PlanInputs in;
  in.model = ModelFromPreset("llama3-8b");
  in.gpu_budget = 141'000'000'000;
  in.host_budget = 512 * kGiB;
  in.formats = kF32;
  in.fraction = 0.5;
  in.fsdp2 = true;
  in.gpus_per_node = ranks;
  in.profile = NodeProfile();
  return in;
}

TEST(NodePlan, FourRanksStepWithTheRatesMeasuredAtOnce) {
  PlanInputs in = EightBF32AtHalf(4);
  const PlanResult plan = MakePlan(in);
  ASSERT_TRUE(plan.feasible);
  EXPECT_EQ(plan.rates.machine.h2d_gbps, 16.5);
  EXPECT_EQ(plan.rates.machine.d2h_gbps, 16.4);
  EXPECT_EQ(plan.rates.machine.host_gparams, 1.4);
  const MachineRates four = MachineRatesFor(in.profile, Algorithm::kAdamW, kF32, DType::kBF16,
                                            DType::kBF16, 4);
  EXPECT_EQ(plan.rates.machine.host_gparams, four.host_gparams);

  // Every offloaded element on the host: the host stage is the node's rate under DMA
  // plus the per-chunk cost, whatever one rank alone would do.
  in.offload_compute = 0;
  const FractionPoint host = MakePlan(in).recommended;
  const double h = static_cast<double>(host.cold_elements);
  ASSERT_GT(h, 0);
  const double chunks = std::ceil(h / static_cast<double>(in.chunk_elements));
  EXPECT_NEAR(host.time.host_ms, h / 1.4e6 + chunks * kHostChunkMs, 1e-6 * host.time.host_ms);
  EXPECT_GE(host.time.step_ms, host.time.host_ms);

  // Every offloaded element streamed: 12 bytes of f32 state each way at the node's PCIe.
  in.offload_compute = 1;
  const FractionPoint streamed = MakePlan(in).recommended;
  const double s = static_cast<double>(streamed.cold_elements);
  EXPECT_NEAR(streamed.time.split.up_ms, 12.0 * s / 16.5e6, 1e-6 * streamed.time.split.up_ms);
  EXPECT_NEAR(streamed.time.split.down_ms, 12.0 * s / 16.4e6,
              1e-6 * streamed.time.split.down_ms);
}

TEST(NodePlan, OneRankTakesTheWholeHostsFigures) {
  const PlanResult one = MakePlan(EightBF32AtHalf(1));
  ASSERT_TRUE(one.feasible);
  EXPECT_EQ(one.rates.machine.h2d_gbps, 50.2);
  EXPECT_EQ(one.rates.machine.d2h_gbps, 50.0);
  // 28 bytes per f32 element for the kernel, 4 more for the DMA's gradient and parameter.
  EXPECT_DOUBLE_EQ(one.rates.machine.host_gparams, HostRateUnderDma(6.0, 28.0, 2.0, 2.0));
  // Four ranks each step a quarter of the elements, at far less than a quarter of the
  // rates: each rank's step is not a quarter of one rank's.
  const PlanResult four = MakePlan(EightBF32AtHalf(4));
  EXPECT_GT(four.recommended.time.step_ms, 0.5 * one.recommended.time.step_ms);
}

// Eight ranks on a profile measured with four: derived, each direction capped at its share
// of host DRAM under every rank's DMA, the host kernel divided among the ranks.
TEST(NodePlan, AnotherRankCountIsDerived) {
  const PlanResult eight = MakePlan(EightBF32AtHalf(8));
  ASSERT_TRUE(eight.feasible);
  EXPECT_DOUBLE_EQ(eight.rates.machine.h2d_gbps, 169.0 / 16);
  EXPECT_DOUBLE_EQ(eight.rates.machine.d2h_gbps, 169.0 / 16);
  EXPECT_DOUBLE_EQ(eight.rates.machine.host_gparams, HostRateUnderDma(6.0, 28.0, 2.0, 2.0) / 8);
  EXPECT_NE(eight.rates.pcie_source.find("capped"), std::string::npos) << eight.rates.pcie_source;
}

}  // namespace
}  // namespace tandem::planner
