// Gradient release in the plan, the issue's runs predicted with the built-in profile, and
// the largest model that fits (docs/planner.md "Gradient release", "Iteration", "The
// largest model").
#include <cmath>
#include <iostream>
#include <string>

#include <gtest/gtest.h>

#include "planner/model_config.h"
#include "planner/plan.h"

namespace tandem::planner {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// tandem-plan --model llama3-70b --gpu-mem 80GB --host-mem 512GiB --fsdp2 --gpus-per-node 4
//   --batch 1 --seq 4096 --recompute full
PlanInputs Llama70BOnFourH100() {
  PlanInputs in;
  in.model = ModelFromPreset("llama3-70b");
  in.gpu_budget = 80'000'000'000;
  in.host_budget = 512 * kGiB;
  in.fsdp2 = true;
  in.gpus_per_node = 4;
  in.activation_shape.batch = 1;
  in.activation_shape.seq_len = 4096;
  in.recompute = Recompute::kFull;
  return in;
}

TEST(ReleasePlan, Llama70BOnFourH100sFitsOnlyWithRelease) {
  PlanInputs in = Llama70BOnFourH100();
  const PlanResult without = MakePlan(in);
  EXPECT_FALSE(without.feasible);
  // The bf16 sharded gradients (32.85 GiB per GPU) stay until Step(): short by about 21
  // (the runtime as measured, 2.7 GiB with the allocator's share, within a headroom of
  // 5%).
  EXPECT_NEAR(ToGiB(without.gpu_short_bytes), 20.9, 0.5);
  // The verdict names what fits: release, at the fraction the plan below recommends.
  ASSERT_FALSE(without.would_fit.empty());
  EXPECT_EQ(without.would_fit.front().rfind("would fit: gradient release", 0), 0u);
  EXPECT_EQ(without.recommended.gpu.gradients, without.shard_elements * 2);

  in.grad_release = Choice::kOn;
  const PlanResult plan = MakePlan(in);
  ASSERT_TRUE(plan.feasible) << plan.messages[0];
  const FractionPoint& r = plan.recommended;
  EXPECT_TRUE(r.grad_release);
  // What it takes, per GPU: the bf16 shards of 17.64 G parameters, FSDP2's unsharded
  // working set (root unit and two blocks, parameters and gradients), 4096 tokens of
  // activations with full recomputation, the GPU-resident state, and only the gradients
  // in flight and of the GPU-resident part.
  EXPECT_EQ(plan.shard_elements, 17638426624u);
  EXPECT_EQ(r.gpu.weights, 2 * plan.shard_elements);
  EXPECT_NEAR(ToGiB(r.gpu.weights), 32.85, 0.01);
  EXPECT_NEAR(ToGiB(r.gpu.unsharded), 14.20, 0.01);
  EXPECT_NEAR(ToGiB(r.gpu.activations), 8.02, 0.01);
  EXPECT_LT(ToGiB(r.gpu.gradients), 8.0);
  EXPECT_LE(r.gpu.total(), plan.usable_gpu_bytes);
  EXPECT_GT(r.fraction, 0.85);  // most state offloaded: the GPU holds little of it
  // Per node: four ranks' offloaded state and pinned gradient areas (2 bytes per offloaded
  // element each).
  EXPECT_EQ(r.host.gradients, 2 * r.cold_elements);
  EXPECT_EQ(r.host_node_bytes, 4 * r.host.total());
  EXPECT_LE(r.host_node_bytes, 512 * kGiB);
  EXPECT_GT(ToGiB(r.host_node_bytes), 250.0);
  // Release saves most of the gradients' 32.85 GiB.
  EXPECT_EQ(plan.gpu_bytes_with_release, r.gpu.total());
  EXPECT_GT(ToGiB(plan.gpu_bytes_without_release - plan.gpu_bytes_with_release), 25.0);
  // The iteration is modelled, and said.
  EXPECT_TRUE(r.iteration.modelled);
  EXPECT_GT(r.iteration.iteration_ms, r.iteration.forward_ms + r.iteration.backward_ms);
  const std::string text = PlanToText(plan);
  for (const char* want :
       {"gradients ", "unsharded ", "activations ", "host per node (4 rank(s)): ",
        "GPU GiB/rank", "GPU peak: ", "with gradient release", "Iteration at fraction",
        "gradient release on"})
    EXPECT_NE(text.find(want), std::string::npos) << want;
  // What it takes, for the record.
  std::cout << "70B on 4 x 80 GB, 512 GiB: fraction " << r.fraction << ", GPU "
            << ToGiB(r.gpu.total()) << " GiB (weights " << ToGiB(r.gpu.weights) << ", unsharded "
            << ToGiB(r.gpu.unsharded) << ", activations " << ToGiB(r.gpu.activations)
            << ", gradients " << ToGiB(r.gpu.gradients) << ", state "
            << ToGiB(r.gpu.correction + r.gpu.moments + r.gpu.scales + r.gpu.master)
            << "); host " << ToGiB(r.host_node_bytes) << " GiB per node; iteration "
            << r.iteration.iteration_ms << " ms\n";
}

TEST(ReleasePlan, AutoReleasesOnlyWhereItHelps) {
  PlanInputs in = Llama70BOnFourH100();
  in.grad_release = Choice::kAuto;
  const PlanResult big = MakePlan(in);
  ASSERT_TRUE(big.feasible);
  EXPECT_TRUE(big.recommended.grad_release);  // it fits only so
  // Llama-3-8B fits four H200s either way: release would only add the gradients' upload.
  PlanInputs small = in;
  small.model = ModelFromPreset("llama3-8b");
  small.gpu_budget = 141'000'000'000;
  small.activation_shape.seq_len = 2048;
  const PlanResult p = MakePlan(small);
  ASSERT_TRUE(p.feasible);
  EXPECT_FALSE(p.recommended.grad_release);
}

TEST(ReleasePlan, HsdpSavesNoGpuMemory) {
  PlanInputs in = Llama70BOnFourH100();
  in.gpu_budget = 1000 * kGiB;
  in.host_budget = 4096 * kGiB;
  in.nodes = 2;
  in.shard_size = 4;
  in.grad_release = Choice::kOn;
  const PlanResult plan = MakePlan(in);
  ASSERT_TRUE(plan.feasible);
  EXPECT_EQ(plan.recommended.gpu.gradients, plan.shard_elements * 2);
  bool warned = false;
  for (const std::string& m : plan.messages)
    warned |= m.find("HSDP keeps each group's reduce output") != std::string::npos;
  EXPECT_TRUE(warned);
}

// The issue's runs (4 x H200, 64-core host; bench/fsdp_step.py, Llama-3-8B shapes, seq 2048,
// full activation checkpointing, offload fraction 1, today's engine: the step after
// backward) against the built-in profile: within 15%.
TEST(ReleasePlan, PredictsTheIssuesRunsWithTheBuiltInProfile) {
  PlanInputs in;
  in.model = ModelFromPreset("llama3-8b");
  in.gpu_budget = 141'000'000'000;
  in.host_budget = 512 * kGiB;
  in.fsdp2 = true;
  in.activation_shape.seq_len = 2048;
  in.recompute = Recompute::kFull;
  in.fraction = 1;
  struct Run {
    uint32_t ranks;
    double iteration_ms, step_ms;
  };
  for (const Run& run : {Run{4, 683, 296}, Run{1, 825, 524}}) {
    in.gpus_per_node = run.ranks;
    const PlanResult plan = MakePlan(in);
    ASSERT_TRUE(plan.feasible);
    const FractionPoint& p = plan.recommended;
    EXPECT_NEAR(p.iteration.iteration_ms / run.iteration_ms, 1.0, 0.15) << run.ranks;
    EXPECT_NEAR(p.time.step_ms / run.step_ms, 1.0, 0.15) << run.ranks;
  }
  // World size 4's GPU peak: 15.9 GiB measured.
  in.gpus_per_node = 4;
  EXPECT_NEAR(ToGiB(MakePlan(in).recommended.gpu.total()) / 15.9, 1.0, 0.15);
}

TEST(Largest, FindsTheMostLayersThatFit) {
  PlanInputs in = Llama70BOnFourH100();
  in.grad_release = Choice::kAuto;
  const LargestResult one = FindLargest(in);
  ASSERT_EQ(one.rows.size(), PresetNames().size());
  ASSERT_GE(one.best, 0);
  for (const LargestRow& row : one.rows) {
    if (row.layers == 0) continue;
    EXPECT_TRUE(row.plan.feasible) << row.shape;
    EXPECT_EQ(row.published_fits, row.layers >= row.published_layers) << row.shape;
    // One more layer does not fit (unless the search stopped at twice the published).
    if (row.layers < 2 * row.published_layers) {
      PlanInputs more = in;
      more.model = PresetWithLayers(row.shape, row.layers + 1);
      EXPECT_FALSE(PlanFits(more)) << row.shape;
    }
  }
  // The 70B width fits with its 80 layers and more on this node (release).
  const LargestRow& w70 = one.rows[3];
  EXPECT_EQ(w70.shape, "llama3-70b");
  EXPECT_TRUE(w70.published_fits);
  EXPECT_GE(one.rows[one.best].params, w70.params);
  // Two nodes: the shards halve, so at least as large a model fits.
  in.nodes = 2;
  const LargestResult two = FindLargest(in);
  ASSERT_GE(two.best, 0);
  EXPECT_GE(two.rows[two.best].params, one.rows[one.best].params);
  // Eight GPUs per node share one host: more GPU memory, the same host memory.
  in.nodes = 1;
  in.gpus_per_node = 8;
  const LargestResult eight = FindLargest(in);
  ASSERT_GE(eight.best, 0);
  EXPECT_GE(eight.rows[3].layers, w70.layers);
  const std::string text = LargestToText(one);
  EXPECT_NE(text.find("LARGEST: "), std::string::npos);
  EXPECT_NE(text.find("Its plan:"), std::string::npos);
}

TEST(Largest, NothingFitsATinyGpu) {
  PlanInputs in = Llama70BOnFourH100();
  in.gpu_budget = 1 * kGiB;
  const LargestResult r = FindLargest(in);
  EXPECT_EQ(r.best, -1);
  for (const LargestRow& row : r.rows) EXPECT_EQ(row.layers, 0u);
  EXPECT_NE(LargestToText(r).find("NOTHING FITS"), std::string::npos);
}

}  // namespace
}  // namespace tandem::planner
