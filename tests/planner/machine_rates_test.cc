// MachineRatesFor: a profile's figures as tandem::MachineRates, measured or derived.
#include <gtest/gtest.h>

#include <algorithm>

#include "tandem/error.h"
#include "tandem/planner.h"

namespace tandem::planner {
namespace {

const StateFormats kFlash{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
const char* kFlashKey = "adamw/bf16+ecc8/q8/q8/bf16";

TEST(MachineRatesFor, DerivesFromAnOlderProfile) {
  const MachineRates r = MachineRatesFor(DefaultProfile(), Algorithm::kAdamW, kFlash, DType::kBF16);
  ASSERT_TRUE(r.valid());
  // Both at once (101.7) split evenly between 2-byte gradients and 2-byte parameters.
  EXPECT_DOUBLE_EQ(r.h2d_gbps, 101.7 / 2);
  EXPECT_DOUBLE_EQ(r.d2h_gbps, 101.7 / 2);
  // Rooflines at 90%: 12.25 B per element; the host slowed by 4 DMA bytes per 12.25.
  EXPECT_DOUBLE_EQ(r.gpu_gparams, 4260 * 0.9 / 12.25);
  EXPECT_DOUBLE_EQ(r.host_gparams, 146 * 0.9 / 12.25 / (1 + 4 / 12.25));
  // f32 gradients take two thirds of the shared link down, never more than D2H alone.
  const MachineRates f = MachineRatesFor(DefaultProfile(), Algorithm::kAdamW, kFlash, DType::kF32);
  EXPECT_DOUBLE_EQ(f.d2h_gbps, 55.5);  // 101.7 * 4 / 6 = 67.8, above D2H alone
  EXPECT_DOUBLE_EQ(f.h2d_gbps, 101.7 * 2 / 6);
}

TEST(MachineRatesFor, TakesWhatTheProfileMeasured) {
  Profile p = DefaultProfile();
  p.pcie.h2d_concurrent_gbps = 48.5;
  p.pcie.d2h_concurrent_gbps = 47.25;
  p.host.kernels[kFlashKey].gparams_per_s = 9.0;
  p.host.kernels_under_dma[kFlashKey].gparams_per_s = 6.5;
  p.gpu.kernels[kFlashKey].gparams_per_s = 280;
  const MachineRates r = MachineRatesFor(p, Algorithm::kAdamW, kFlash, DType::kBF16);
  EXPECT_EQ(r.h2d_gbps, 48.5);
  EXPECT_EQ(r.d2h_gbps, 47.25);
  EXPECT_EQ(r.host_gparams, 6.5);
  EXPECT_EQ(r.gpu_gparams, 280);
  // Without the DMA-load figure: the kernel's rate slowed for the DMA's DRAM traffic.
  p.host.kernels_under_dma.clear();
  EXPECT_DOUBLE_EQ(MachineRatesFor(p, Algorithm::kAdamW, kFlash, DType::kBF16).host_gparams,
                   9.0 / (1 + 4 / 12.25));
  // Another format's key is not this one's.
  p.host.kernels_under_dma["adamw/f32/f32/f32/bf16"].gparams_per_s = 1.0;
  EXPECT_NE(MachineRatesFor(p, Algorithm::kAdamW, kFlash, DType::kBF16).host_gparams, 1.0);
}

TEST(MachineRatesFor, ThePlanUsesTheSameRatesPerRank) {
  PlanInputs in;
  in.formats = kFlash;
  in.gpus_per_node = 4;
  const Rates plan = ResolveRates(in);
  const MachineRates one = MachineRatesFor(in.profile, Algorithm::kAdamW, kFlash, DType::kBF16);
  const MachineRates four =
      MachineRatesFor(in.profile, Algorithm::kAdamW, kFlash, DType::kBF16, DType::kBF16, 4);
  EXPECT_EQ(plan.machine.h2d_gbps, four.h2d_gbps);
  EXPECT_EQ(plan.machine.d2h_gbps, four.d2h_gbps);
  EXPECT_EQ(plan.machine.host_gparams, four.host_gparams);
  EXPECT_DOUBLE_EQ(plan.machine.host_gparams, one.host_gparams / 4);  // the host is shared
  EXPECT_EQ(plan.machine.gpu_gparams, one.gpu_gparams);               // each its own GPU
}

// Note [The node is one machine]: each GPU has its own link, but every rank's DMA goes
// through the one host DRAM.
TEST(MachineRatesFor, RanksShareTheHostDram) {
  Profile p = DefaultProfile();
  const MachineRates one = MachineRatesFor(p, Algorithm::kAdamW, kFlash, DType::kBF16);
  EXPECT_DOUBLE_EQ(one.h2d_gbps, 101.7 / 2);  // one rank: its link, DRAM has room
  for (uint32_t ranks : {2u, 4u, 8u}) {
    const MachineRates r =
        MachineRatesFor(p, Algorithm::kAdamW, kFlash, DType::kBF16, DType::kBF16, ranks);
    const double cap = kDefaultNodeDramGbps / (2.0 * ranks);
    EXPECT_DOUBLE_EQ(r.h2d_gbps, std::min(101.7 / 2, cap)) << ranks;
    EXPECT_DOUBLE_EQ(r.d2h_gbps, std::min(101.7 / 2, cap)) << ranks;
    EXPECT_DOUBLE_EQ(r.host_gparams, one.host_gparams / ranks) << ranks;
  }
  // The node: 4 ranks streaming bf16+ecc8/q8/q8 state (3.125 bytes each way per
  // element) move 169 GB/s together: 27 G elements/s, a quarter each.
  const MachineRates four =
      MachineRatesFor(p, Algorithm::kAdamW, kFlash, DType::kBF16, DType::kBF16, 4);
  EXPECT_NEAR(4 * four.h2d_gbps / 3.125, 27.04, 0.01);
  // Without a DRAM figure the triad stands for it.
  p.host.dram_gbps = 0;
  const MachineRates triad =
      MachineRatesFor(p, Algorithm::kAdamW, kFlash, DType::kBF16, DType::kBF16, 4);
  EXPECT_DOUBLE_EQ(triad.h2d_gbps, 146.0 / 8);
  EXPECT_THROW(MachineRatesFor(p, Algorithm::kAdamW, kFlash, DType::kBF16, DType::kBF16, 0),
               Error);
}

// A profile measured with the plan's rank count at once gives each rank's figures as they
// are; another rank count derives them.
TEST(MachineRatesFor, TakesTheNodeFiguresOfThatRankCount) {
  Profile p = DefaultProfile();
  p.node.ranks = 4;
  p.node.gpus = 4;
  p.node.h2d_concurrent_gbps = 20.5;
  p.node.d2h_concurrent_gbps = 21.5;
  p.node.host_kernels[kFlashKey].gparams_per_s = 3.0;
  p.node.host_kernels_under_dma[kFlashKey].gparams_per_s = 1.25;
  const MachineRates r =
      MachineRatesFor(p, Algorithm::kAdamW, kFlash, DType::kBF16, DType::kBF16, 4);
  EXPECT_EQ(r.h2d_gbps, 20.5);
  EXPECT_EQ(r.d2h_gbps, 21.5);
  EXPECT_EQ(r.host_gparams, 1.25);
  PlanInputs in;
  in.profile = p;
  in.gpus_per_node = 4;
  const Rates plan = ResolveRates(in);
  EXPECT_EQ(plan.host_gparams_per_s, 3.0);
  EXPECT_NE(plan.host_source.find("with 4 ranks at once"), std::string::npos) << plan.host_source;
  EXPECT_NE(plan.pcie_source.find("measured, 4 ranks at once"), std::string::npos)
      << plan.pcie_source;
  // Without the DMA-load figure: the node's kernel slowed for the DMA.
  p.node.host_kernels_under_dma.clear();
  EXPECT_DOUBLE_EQ(
      MachineRatesFor(p, Algorithm::kAdamW, kFlash, DType::kBF16, DType::kBF16, 4).host_gparams,
      3.0 / (1 + 4 / 12.25));
  // Eight ranks: not what was measured; derived from the whole host.
  const MachineRates eight =
      MachineRatesFor(p, Algorithm::kAdamW, kFlash, DType::kBF16, DType::kBF16, 8);
  EXPECT_DOUBLE_EQ(eight.h2d_gbps, kDefaultNodeDramGbps / 16);
  EXPECT_DOUBLE_EQ(eight.host_gparams,
                   MachineRatesFor(p, Algorithm::kAdamW, kFlash, DType::kBF16).host_gparams / 8);
}

TEST(MachineRatesFor, RejectsAProfileWithoutBandwidths) {
  Profile p = DefaultProfile();
  p.pcie.bidir_gbps = 0;
  try {
    MachineRatesFor(p, Algorithm::kAdamW, kFlash, DType::kBF16);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("pcie.bidir_gbps"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::planner
