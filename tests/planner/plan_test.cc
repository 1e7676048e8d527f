#include "planner/plan.h"

#include <string>

#include <gtest/gtest.h>

#include "tandem/error.h"

namespace tandem::planner {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

PlanInputs Inputs(ModelDescription model, StateFormats f, DType param, DType grad) {
  PlanInputs in;
  in.model = std::move(model);
  in.formats = f;
  in.param_dtype = param;
  in.grad_dtype = grad;
  in.gpu_budget = 1000 * kGiB;
  in.host_budget = 1000 * kGiB;
  in.gpu_headroom_fraction = 0;  // these tests set exact budgets; PlanHeadroom tests it
  // Every offloaded element computed on the host: these tests hold the plan to
  // PredictMemory's host-resident parts; streamed_plan_test.cc covers the other classes.
  in.offload_compute = 0.0;
  return in;
}

PlanInputs Fp32(ModelDescription m) { return Inputs(std::move(m), {}, DType::kF32, DType::kF32); }
PlanInputs Flash(ModelDescription m) {
  return Inputs(std::move(m), {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8},
                DType::kBF16, DType::kBF16);
}

// Bytes of weights, optimizer state and gradients (no activations, metadata or staging).
uint64_t PerParamBytes(const MemoryBreakdown& m) {
  return m.weights + m.master + m.correction + m.moments + m.scales + m.gradients;
}

TEST(PlanMemory, Fp32AdamWIsSixteenBytesPerParam) {
  // Sizes with 4-byte arrays a multiple of 256 bytes: exact.
  const uint64_t n = 1 << 22;
  const FractionPoint p = EvaluateFraction(Fp32(ModelFromParamCount(n, 4)), 0.0);
  EXPECT_EQ(p.gpu.weights, 4 * n);
  EXPECT_EQ(p.gpu.gradients, 4 * n);
  EXPECT_EQ(p.gpu.master, 0u);  // aliases the fp32 weights
  EXPECT_EQ(p.gpu.moments, 8 * n);
  EXPECT_EQ(p.gpu.scales, 0u);
  EXPECT_EQ(PerParamBytes(p.gpu), 16 * n);
  EXPECT_EQ(p.host.total() - p.host.metadata, 0u);  // nothing offloaded
  // The pinned pre-pass results: the step's and each tensor's (early start's partials).
  EXPECT_LE(p.host.metadata, 5 * 136u);
  // Odd sizes: within the 256-byte alignment of each array (2 arrays x 3 tensors).
  const uint64_t odd = 1000003;
  const FractionPoint q = EvaluateFraction(Fp32(ModelFromParamCount(odd, 3)), 0.0);
  EXPECT_GE(PerParamBytes(q.gpu), 16 * odd);
  EXPECT_LT(PerParamBytes(q.gpu), 16 * odd + 2 * 3 * 256);
}

TEST(PlanMemory, FlashFormatsAreSevenBytesPerParamPlusScales) {
  const uint64_t n = 1 << 22;
  const FractionPoint p = EvaluateFraction(Flash(ModelFromParamCount(n, 4)), 0.0);
  EXPECT_EQ(p.gpu.weights, 2 * n);
  EXPECT_EQ(p.gpu.master, 0u);  // the bf16 part is the weight
  EXPECT_EQ(p.gpu.correction, n);
  EXPECT_EQ(p.gpu.moments, 2 * n);
  EXPECT_EQ(p.gpu.gradients, 2 * n);
  EXPECT_EQ(p.gpu.scales, n / 8);  // 2 moments x 2 bytes / 32 = 0.125 bytes per param
  EXPECT_EQ(PerParamBytes(p.gpu) - p.gpu.scales, 7 * n);
}

TEST(PlanMemory, GradientReleaseKeepsOneLayerAndTheResidentPart) {
  const uint64_t n = 1 << 22;
  PlanInputs in = Flash(ModelFromParamCount(n, 4));
  in.offload_compute = 0.0;
  in.grad_release = Choice::kOn;
  // Everything offloaded: only the release group in flight, the largest of 4 pieces; the
  // host keeps every gradient in its pinned area.
  const FractionPoint all = EvaluateFraction(in, 1.0);
  EXPECT_TRUE(all.grad_release);
  EXPECT_EQ(all.gpu.gradients, 2 * (n / 4));
  EXPECT_EQ(all.host.gradients, 2 * n);
  // Nothing offloaded: the engine's copy of every GPU-resident gradient, plus the group
  // in flight: release saves nothing there.
  const FractionPoint none = EvaluateFraction(in, 0.0);
  EXPECT_EQ(none.gpu.gradients, 2 * (n + n / 4));
  EXPECT_EQ(none.host.gradients, 0u);
  // A real model: one transformer block or the embedding, whichever is larger.
  PlanInputs l = Flash(ModelFromPreset("llama3-8b"));
  l.grad_release = Choice::kOn;
  EXPECT_EQ(EvaluateFraction(l, 1.0).gpu.gradients, 2ull * 128256 * 4096);
  // auto takes release only where it fits better: never at fraction 0.
  in.grad_release = Choice::kAuto;
  EXPECT_FALSE(EvaluateFraction(in, 0.0).grad_release);
}

TEST(PlanMemory, OptimizerStateIsPredictMemoryOfTheShard) {
  for (uint32_t gpus : {1u, 8u}) {
    PlanInputs in = Flash(ModelFromPreset("llama3-1b"));
    in.gpus_per_node = gpus;
    in.zero1_sharding = true;
    for (double f : {0.0, 0.3, 1.0}) {
      const FractionPoint p = EvaluateFraction(in, f);
      const MemoryReport r = PredictMemory(ShardSpecs(in), ShardConfig(in, f), ExecutionMode::kGpu);
      EXPECT_EQ(p.gpu.master, r.device.master);
      EXPECT_EQ(p.gpu.correction, r.device.correction);
      EXPECT_EQ(p.gpu.moments, r.device.momentum + r.device.variance);
      EXPECT_EQ(p.gpu.scales, r.device.scales);
      EXPECT_EQ(p.gpu.metadata, r.device.metadata);
      EXPECT_EQ(p.host.total(), r.host.total());
      EXPECT_EQ(p.host_node_bytes, r.host.total() * gpus);
    }
  }
}

TEST(PlanMemory, SpeculativeEarlyStartAddsItsHostBackup) {
  PlanInputs in = Flash(ModelFromPreset("llama3-1b"));
  const FractionPoint plain = EvaluateFraction(in, 0.5);
  in.speculative_early_start = true;
  const FractionPoint spec = EvaluateFraction(in, 0.5);
  const MemoryReport r = PredictMemory(ShardSpecs(in), ShardConfig(in, 0.5), ExecutionMode::kGpu);
  EXPECT_EQ(plain.host.speculation, 0u);
  EXPECT_GT(spec.host.speculation, 0u);
  EXPECT_EQ(spec.host.speculation, r.host.speculation);
  EXPECT_EQ(spec.gpu.speculation, r.device.speculation);
  EXPECT_EQ(spec.host.total(), r.host.total());
  // At least the backup of the offloaded state: master + correction + moments + scales.
  EXPECT_GE(spec.host.speculation,
            plain.host.master + plain.host.correction + plain.host.moments + plain.host.scales);
  EXPECT_EQ(EvaluateFraction(in, 0.0).host.speculation, 0u);
}

TEST(PlanMemory, FullOffloadMovesStateToHost) {
  const uint64_t n = 1 << 22;
  const FractionPoint p = EvaluateFraction(Flash(ModelFromParamCount(n, 4)), 1.0);
  EXPECT_EQ(p.gpu.correction + p.gpu.moments + p.gpu.scales + p.gpu.master, 0u);
  EXPECT_EQ(p.host.master, 2 * n);  // the host keeps its own bf16 master
  EXPECT_EQ(p.host.correction, n);
  EXPECT_EQ(p.host.moments, 2 * n);
  EXPECT_GT(p.host.staging, 0u);
  EXPECT_EQ(p.cold_elements, n);
  EXPECT_EQ(p.hot_elements, 0u);
}

TEST(PlanMemory, ZeroOneShardsOptimizerStateOnly) {
  PlanInputs one = Flash(ModelFromPreset("llama3-8b"));
  PlanInputs eight = one;
  eight.gpus_per_node = 8;
  eight.zero1_sharding = true;  // the what-if
  const FractionPoint a = EvaluateFraction(one, 0.0), b = EvaluateFraction(eight, 0.0);
  EXPECT_EQ(a.gpu.weights, b.gpu.weights);
  EXPECT_EQ(a.gpu.gradients, b.gpu.gradients);
  EXPECT_NEAR(static_cast<double>(b.gpu.moments), a.gpu.moments / 8.0, a.gpu.moments * 1e-4);
}

TEST(PlanSearch, SmallestFittingFraction) {
  PlanInputs in = Flash(ModelFromPreset("llama3-8b"));
  const uint64_t at0 = EvaluateFraction(in, 0.0).gpu.total();
  const uint64_t at1 = EvaluateFraction(in, 1.0).gpu.total();
  ASSERT_GT(at0, at1);
  in.gpu_budget = (at0 + at1) / 2;
  const PlanResult plan = MakePlan(in);
  ASSERT_TRUE(plan.feasible) << plan.messages[0];
  EXPECT_TRUE(plan.monotone);
  EXPECT_GT(plan.min_fraction, 0.3);
  EXPECT_LT(plan.min_fraction, 0.7);
  EXPECT_TRUE(EvaluateFraction(in, plan.min_fraction).fits_gpu);
  EXPECT_FALSE(EvaluateFraction(in, plan.min_fraction - 1.0 / kFractionSteps).fits_gpu);
  EXPECT_GE(plan.recommended.fraction, plan.min_fraction);
  EXPECT_TRUE(plan.recommended.fits_gpu && plan.recommended.fits_host);
  // Fastest among the fitting sweep points.
  for (const FractionPoint& p : plan.sweep)
    if (p.fits_gpu && p.fits_host) {
      EXPECT_LE(plan.recommended.time.step_ms, p.time.step_ms);
    }
  ASSERT_EQ(plan.sweep.size(), 17u);
  EXPECT_EQ(plan.sweep[8].fraction, 0.5);
  EXPECT_NE(plan.messages[0].find("FITS"), std::string::npos);
}

TEST(PlanSearch, EverythingFitsOnTheGpu) {
  const PlanInputs in = Flash(ModelFromPreset("llama3-1b"));
  const PlanResult plan = MakePlan(in);
  EXPECT_TRUE(plan.feasible);
  EXPECT_EQ(plan.min_fraction, 0.0);
  // Offloading a little would be faster still: the host takes the share that its rate
  // bears to the GPU's (about 10.7 / (313 + 10.7) with the default profile)...
  const double balance = plan.rates.host_gparams_per_s /
                         (plan.rates.gpu_gparams_per_s + plan.rates.host_gparams_per_s);
  const double front = plan.sweep.front().time.step_ms;
  EXPECT_LT(EvaluateFraction(in, balance / 2).time.step_ms, front);
  // ... but by less than kMinStepGain of the step: Note [A larger fraction must pay].
  EXPECT_GT(EvaluateFraction(in, balance / 2).time.step_ms, 0.95 * front);
  EXPECT_EQ(plan.recommended.fraction, 0.0);
  // A host and links twenty times faster: offloading pays, and the plan takes it.
  PlanInputs fast = in;
  fast.profile.host.triad_gbps *= 20;
  fast.profile.pcie.h2d_gbps *= 20;
  fast.profile.pcie.d2h_gbps *= 20;
  fast.profile.pcie.bidir_gbps *= 20;
  const PlanResult quick = MakePlan(fast);
  EXPECT_GT(quick.recommended.fraction, 0.0);
  EXPECT_LT(quick.recommended.time.step_ms, 0.95 * quick.sweep.front().time.step_ms);
}

TEST(PlanSearch, MemoryIsMonotoneInTheFraction) {
  for (PlacementPolicy policy : {PlacementPolicy::kBackwardOrder, PlacementPolicy::kForwardOrder,
                                 PlacementPolicy::kLargestFirst}) {
    PlanInputs in = Flash(ModelFromPreset("llama3-3b"));
    in.placement = policy;
    EXPECT_TRUE(MakePlan(in).monotone) << Name(policy);
  }
}

TEST(PlanImpossible, GpuTooSmallEvenFullyOffloaded) {
  PlanInputs in = Flash(ModelFromPreset("llama3-70b"));
  in.gpu_budget = 80 * kGiB;  // 140 GB of bf16 weights alone
  const PlanResult plan = MakePlan(in);
  EXPECT_FALSE(plan.feasible);
  EXPECT_EQ(plan.min_fraction, -1);
  EXPECT_EQ(plan.gpu_short_bytes, EvaluateFraction(in, 1.0).gpu.total() - in.gpu_budget);
  EXPECT_NE(plan.messages[0].find("GPU memory short by"), std::string::npos) << plan.messages[0];
  EXPECT_NE(plan.messages[0].find("GiB"), std::string::npos);
}

TEST(PlanImpossible, HostTooSmall) {
  PlanInputs in = Flash(ModelFromPreset("llama3-8b"));
  in.gpu_budget = EvaluateFraction(in, 0.9).gpu.total();
  in.host_budget = 8 * kGiB;
  const PlanResult plan = MakePlan(in);
  EXPECT_FALSE(plan.feasible);
  EXPECT_EQ(plan.gpu_short_bytes, 0u);
  EXPECT_GT(plan.host_short_bytes, 0u);
  EXPECT_EQ(plan.host_short_bytes,
            EvaluateFraction(in, plan.min_fraction).host_node_bytes - in.host_budget);
  EXPECT_NE(plan.messages[0].find("host memory short by"), std::string::npos) << plan.messages[0];
}

TEST(PlanInputsCheck, RejectsBadInputs) {
  PlanInputs in = Flash(ModelFromPreset("llama3-1b"));
  in.gpu_budget = 0;
  EXPECT_THROW(MakePlan(in), Error);
  in = Flash(ModelFromParamCount(1000));
  in.activation_shape.seq_len = 2048;  // a flat model has no shape to estimate from
  EXPECT_THROW(MakePlan(in), Error);
}

TEST(PlanActivations, EstimatedFromTheModelShape) {
  PlanInputs in = Flash(ModelFromPreset("llama3-8b"));
  in.activation_shape.seq_len = 4096;
  in.recompute = Recompute::kSelective;
  EXPECT_EQ(EvaluateFraction(in, 0.0).gpu.activations,
            32ull * 34 * 4096 * 4096 + 4ull * 4096 * 128256);
  in.activation_bytes_given = true;
  in.activation_bytes = 20 * kGiB;
  EXPECT_EQ(EvaluateFraction(in, 0.0).gpu.activations, 20 * kGiB);
}

}  // namespace
}  // namespace tandem::planner

namespace tandem::planner {
namespace {

TEST(PlanRanks, WithoutZeroOneEveryRankHoldsTheWholeState) {
  // The engine today: no ZeRO-1, so eight ranks each step all of the model.
  PlanInputs one = Flash(ModelFromPreset("llama3-8b"));
  PlanInputs eight = one;
  eight.gpus_per_node = 8;
  const FractionPoint a = EvaluateFraction(one, 0.5), b = EvaluateFraction(eight, 0.5);
  EXPECT_EQ(a.gpu.total(), b.gpu.total());
  EXPECT_EQ(a.host.total(), b.host.total());
  EXPECT_EQ(b.host_node_bytes, 8 * a.host_node_bytes);
  const PlanResult plan = MakePlan(eight);
  EXPECT_EQ(plan.shard_elements, one.model.total_params());
  bool fsdp = false, zero = false;
  for (const std::string& m : plan.messages) {
    fsdp = fsdp || m.find("plain data parallelism") != std::string::npos;
    zero = zero || m.find("ZeRO-1") != std::string::npos;
  }
  EXPECT_TRUE(fsdp);   // the note that points at --fsdp2
  EXPECT_FALSE(zero);  // not used, so not mentioned in the messages
  EXPECT_NE(PlanToText(plan).find("ZeRO-1 sharding: not available in this version"),
            std::string::npos);
}

TEST(PlanRanks, WhatIfsSayTheyAreNotAvailable) {
  PlanInputs in = Flash(ModelFromPreset("llama3-1b"));
  in.gpus_per_node = 4;
  in.zero1_sharding = true;
  in.grad_release = Choice::kOn;  // runs: not a what-if
  const PlanResult plan = MakePlan(in);
  EXPECT_FALSE(plan.runnable);
  int unavailable = 0;
  for (const std::string& m : plan.messages)
    unavailable += m.find("not available in this version") != std::string::npos;
  EXPECT_EQ(unavailable, 1);
  const std::string text = PlanToText(plan);
  EXPECT_NE(text.find("(gradient release on)"), std::string::npos);
  EXPECT_NE(text.find("ZeRO-1 what-if: not available in this version"), std::string::npos);
}

TEST(PlanHeadroom, FivePercentByDefault) {
  PlanInputs in;
  EXPECT_DOUBLE_EQ(in.gpu_headroom_fraction, 0.05);
  in.model = ModelFromPreset("llama3-8b");
  in.gpu_budget = 40 * kGiB;
  in.host_budget = 512 * kGiB;
  EXPECT_EQ(UsableGpuBytes(in), 38 * kGiB);
  const PlanResult with = MakePlan(in);
  EXPECT_EQ(with.usable_gpu_bytes, 38 * kGiB);
  ASSERT_TRUE(with.feasible);
  EXPECT_LE(with.recommended.gpu.total(), 38 * kGiB);
  EXPECT_GT(EvaluateFraction(in, with.min_fraction - 1.0 / kFractionSteps).gpu.total(), 38 * kGiB);
  bool said = false;
  for (const std::string& m : with.messages)
    said = said || (m.find("headroom 5%") != std::string::npos &&
                    m.find("38.00 GiB of 40.00 GiB") != std::string::npos);
  EXPECT_TRUE(said);
  EXPECT_NE(PlanToText(with).find("38.00 GiB usable (headroom 5%)"), std::string::npos);
  // Without headroom the same budget needs a smaller fraction.
  in.gpu_headroom_fraction = 0;
  const PlanResult without = MakePlan(in);
  EXPECT_LT(without.min_fraction, with.min_fraction);
  // Bytes instead of a fraction.
  in.gpu_headroom_bytes = 2 * kGiB;
  EXPECT_EQ(UsableGpuBytes(in), 38 * kGiB);
  EXPECT_EQ(MakePlan(in).min_fraction, with.min_fraction);
  in.gpu_headroom_bytes = 50 * kGiB;
  EXPECT_EQ(UsableGpuBytes(in), 0u);
  in.gpu_headroom_fraction = 1.0;
  EXPECT_THROW(MakePlan(in), Error);
}

TEST(PlanModels, MixtureOfExpertsConfigPlans) {
  // Qwen3-30B-A3B (30.5B): all of it fits on one 141 GB GPU only with most state offloaded.
  PlanInputs in;
  in.model = ModelFromConfigFile(std::string(TANDEM_PLANNER_CONFIGS) + "/qwen3-30b-a3b");
  in.gpu_budget = 141000000000ull;
  in.host_budget = 1ull << 40;
  const PlanResult plan = MakePlan(in);
  EXPECT_TRUE(plan.feasible) << plan.messages[0];
  EXPECT_GT(plan.min_fraction, 0.5);
  EXPECT_EQ(plan.recommended.gpu.weights, 2 * in.model.total_params());
  // With a sequence, the transformers estimate counts the routed experts (top-k of them
  // per token); Megatron's dense-block formula does not, and says so.
  in.activation_shape.seq_len = 4096;
  in.recompute = Recompute::kFull;
  auto noted = [](const PlanResult& p, const char* text) {
    bool found = false;
    for (const std::string& m : p.messages) found = found || m.find(text) == 0;
    return found;
  };
  const PlanResult hf = MakePlan(in);
  EXPECT_EQ(hf.activation_model, ActivationModel::kTransformers);
  EXPECT_FALSE(noted(hf, "note: mixture of experts"));
  EXPECT_TRUE(noted(hf, "note: activations as transformers computes them"));
  in.activation_model = ActivationModel::kMegatron;
  const PlanResult megatron = MakePlan(in);
  EXPECT_TRUE(noted(megatron, "note: mixture of experts"));
}

}  // namespace
}  // namespace tandem::planner
