// The three placement classes in the plan: offload_compute, the streamed elements' memory
// and the step time through tandem::PredictSplit / ChooseSplit.
#include <string>

#include <gtest/gtest.h>

#include <cmath>

#include "planner/plan.h"
#include "planner/step_time.h"
#include "tandem/error.h"

namespace tandem::planner {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMiB = 1ull << 20;

PlanInputs Flash(ModelDescription model) {
  PlanInputs in;
  in.model = std::move(model);
  in.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  in.gpu_budget = 1000 * kGiB;
  in.host_budget = 1000 * kGiB;
  in.gpu_headroom_fraction = 0;
  NoRuntime(&in);  // these tests size the plan's tensors against exact budgets
  return in;
}

// A host ten times slower than the reference: computing on the GPU pays off.
Profile SlowHost() {
  Profile p = DefaultProfile();
  p.host.triad_gbps = 14.6;
  return p;
}

uint64_t StateBytes(const MemoryBreakdown& m) {
  return m.master + m.correction + m.moments + m.scales;
}

// What `tandem-plan --model llama3-8b --gpu-mem 40GiB --host-mem 256GiB` printed before
// the three classes (the built-in profile): host mode must reproduce it.
TEST(StreamedPlan, HostModeReproducesThePlanBeforeTheThreeClasses) {
  PlanInputs in;
  in.model = ModelFromPreset("llama3-8b");
  in.gpu_budget = 40 * kGiB;
  in.host_budget = 256 * kGiB;
  in.offload_compute = ParseOffloadCompute("host");
  NoRuntime(&in);                   // the plan before counted no runtime
  in.gpu_headroom_fraction = 0.10;  // and kept 10% free
  const PlanResult plan = MakePlan(in);
  ASSERT_TRUE(plan.feasible);
  const FractionPoint& r = plan.recommended;
  EXPECT_EQ(r.fraction, 0.7405);
  // Byte for byte but the pinned pre-pass results, one per tensor since early start's
  // per-tensor partials (291 tensors x 136 bytes = 39576 bytes more on the host).
  EXPECT_EQ(r.gpu.total(), 38652283536u);
  EXPECT_EQ(r.host.total(), 30492160288u);
  EXPECT_EQ(r.time.streamed, 0u);
  EXPECT_EQ(r.time.split.share, 0.0);
  auto near = [](double got, double want) { EXPECT_NEAR(got, want, want * 1e-13); };
  // Figure for figure but the pre-pass, which the exact sum of squares doubled since
  // (kDefaultPrepassBytesPerElement: 4 bytes, not the bf16 gradient's 2, at the HBM
  // rate): 3.770 ms more, in the step too.
  const double prepass_before = 3.770075703286385;
  near(r.time.step_ms, 821.5606056648978 + prepass_before);
  near(r.time.d2h_ms, 233.8803716027532);
  near(r.time.h2d_ms, 233.8803716027532);
  near(r.time.host_ms, 817.6255622526636);
  near(r.time.gpu_ms, 6.658110798122066);
  near(r.time.fill_ms, 0.16496770894788593);
  near(r.time.prepass_ms, 2 * prepass_before);
  const FractionPoint& all = plan.sweep.back();
  EXPECT_EQ(all.gpu.total(), 32139728152u);
  EXPECT_EQ(all.host.total(), 41171905824u);
  near(all.time.step_ms, 1108.0929070347609 + prepass_before);
  near(all.time.host_ms, 1104.1578636225265);
}

TEST(StreamedPlan, AtFractionOneASlowHostHandsWorkToTheGpu) {
  PlanInputs in = Flash(ModelFromParamCount(1ull << 30, 16));
  in.profile = SlowHost();
  in.offload_compute = 0.0;
  const FractionPoint host = EvaluateFraction(in, 1.0);
  in.offload_compute = kOffloadComputeAuto;
  const FractionPoint aut = EvaluateFraction(in, 1.0);
  EXPECT_EQ(host.time.split.share, 0.0);
  EXPECT_EQ(host.time.bottleneck, Stage::kHost);
  EXPECT_GT(aut.time.split.share, 0.5);
  EXPECT_GT(aut.time.streamed, 0u);
  EXPECT_LT(aut.time.step_ms, 0.5 * host.time.step_ms);
  // The share is ChooseSplit's for the plan's rates (placed to within a group).
  const Rates rates = ResolveRates(in);
  const ComputeSplit best =
      ChooseSplit({0, aut.cold_elements, rates.stream_bytes_per_element, 2.0, 2.0}, rates.machine);
  EXPECT_NEAR(aut.time.split.share, best.share, 1e-6);
  // And no other share does better in the model.
  for (double s : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    in.offload_compute = s;
    EXPECT_GE(EvaluateFraction(in, 1.0).time.split.step_ms, aut.time.split.step_ms * (1 - 1e-9));
  }
}

TEST(StreamedPlan, StepTermsArePredictSplits) {
  PlanInputs in = Flash(ModelFromParamCount(1ull << 28, 8));
  in.offload_compute = 0.5;
  const FractionPoint p = EvaluateFraction(in, 0.75);
  const Rates rates = ResolveRates(in);
  const double share = static_cast<double>(p.time.streamed) / p.cold_elements;
  EXPECT_NEAR(share, 0.5, 1e-6);
  const ComputeSplit s = PredictSplit({p.hot_elements, p.cold_elements,
                                       rates.stream_bytes_per_element, 2.0, 2.0, in.chunk_elements},
                                      rates.machine, share);
  EXPECT_DOUBLE_EQ(p.time.split.down_ms, s.down_ms);
  EXPECT_DOUBLE_EQ(p.time.split.up_ms, s.up_ms);
  EXPECT_DOUBLE_EQ(p.time.split.host_ms, s.host_ms);
  EXPECT_DOUBLE_EQ(p.time.split.gpu_ms, s.gpu_ms);
  EXPECT_DOUBLE_EQ(p.time.d2h_ms, s.down_ms);
  EXPECT_DOUBLE_EQ(p.time.gpu_ms, s.gpu_ms);
  // The host term holds the per-chunk overhead: the kernels alone are less.
  EXPECT_DOUBLE_EQ(p.time.host_ms, s.host_ms);
  ComputeSplitInput no_chunks{p.hot_elements, p.cold_elements, rates.stream_bytes_per_element,
                              2.0, 2.0};
  const double chunks = std::ceil((p.cold_elements - p.time.streamed) / double(in.chunk_elements));
  EXPECT_NEAR(s.host_ms - PredictSplit(no_chunks, rates.machine, share).host_ms,
              chunks * kHostChunkMs, 1e-9);
  // The streamed elements' bytes are in the PCIe terms: d2h moves each host-computed
  // element's gradient and each streamed element's state.
  const double bytes =
      2.0 * (p.cold_elements - p.time.streamed) + rates.stream_bytes_per_element * p.time.streamed;
  EXPECT_NEAR(p.time.d2h_ms, bytes / (rates.machine.d2h_gbps * 1e6), 1e-9 * p.time.d2h_ms);
}

TEST(StreamedPlan, StreamedStateLeavesOutTheAliasedMaster) {
  const uint64_t n = 1ull << 26;  // 4 tensors of 2^24: every array a multiple of 256 bytes
  PlanInputs in = Flash(ModelFromParamCount(n, 4));
  in.offload_compute = 0.0;
  const FractionPoint host = EvaluateFraction(in, 1.0);
  in.offload_compute = 1.0;
  const FractionPoint gpu = EvaluateFraction(in, 1.0);
  EXPECT_EQ(gpu.time.streamed, n);
  // Host-computed: the bf16 master (2), ecc8 (1), two q8 moments (2) and scales (1/8).
  EXPECT_EQ(host.host.master, 2 * n);
  EXPECT_EQ(host.host.correction, n);
  EXPECT_EQ(StateBytes(host.host), 41 * n / 8);  // 5.125 B per element
  // Streamed: the bf16 part of the master is the parameter on the GPU; the rest as before,
  // carved per chunk piece (each array of a piece aligned to 256 bytes).
  EXPECT_EQ(gpu.host.master, 0u);
  EXPECT_EQ(gpu.host.correction, n);
  EXPECT_EQ(gpu.host.moments, host.host.moments);
  EXPECT_GE(StateBytes(gpu.host), 25 * n / 8);  // 3.125 B per element
  EXPECT_LT(StateBytes(gpu.host), 25 * n / 8 + 64 * 4 * 256);
  EXPECT_EQ(ResolveRates(in).stream_bytes_per_element, 3.125);
  // No pipeline staging without host-computed elements; the GPU holds the stream slots:
  // stream_slots of the largest chunk, at most stream_chunk_bytes each.
  EXPECT_EQ(gpu.host.staging, 0u);
  EXPECT_EQ(host.gpu.staging, 0u);
  EXPECT_LE(gpu.gpu.staging, 3 * in.stream_chunk_bytes);
  EXPECT_GT(gpu.gpu.staging, 3 * (in.stream_chunk_bytes - kMiB));
  // The rest of the GPU side grows only by the chunks' kernel tables.
  EXPECT_GE(gpu.gpu.total() - gpu.gpu.staging, host.gpu.total());
  EXPECT_LT(gpu.gpu.total() - gpu.gpu.staging, host.gpu.total() + kMiB);
  in.stream_slots = 4;
  in.stream_chunk_bytes = 16 * kMiB;
  const uint64_t slots = EvaluateFraction(in, 1.0).gpu.staging;
  EXPECT_LE(slots, 4 * 16 * kMiB);
  EXPECT_GT(slots, 4 * 15 * kMiB);
  // Half streamed: the master of the host-computed half only.
  in.offload_compute = 0.5;
  const FractionPoint half = EvaluateFraction(in, 1.0);
  EXPECT_EQ(half.time.streamed, n / 2);
  EXPECT_EQ(half.host.master, n);
  EXPECT_EQ(half.host.correction, n);
  EXPECT_EQ(half.host.staging, host.host.staging);
}

// The plan's optimizer bytes are what HybridOptimizer::memory() would report for the
// share the plan resolved: PredictMemory with that offload_compute.
TEST(StreamedPlan, BytesAreTheEnginesForTheResolvedShare) {
  PlanInputs in = Flash(ModelFromParamCount(3'000'017, 5));  // odd sizes
  in.profile = SlowHost();
  for (double fraction : {0.3, 0.8, 1.0}) {
    const FractionPoint p = EvaluateFraction(in, fraction);
    ASSERT_GT(p.time.streamed, 0u) << fraction;
    OptimizerConfig cfg = ShardConfig(in, fraction);
    cfg.offload_compute = p.time.split.share;
    const MemoryReport r = PredictMemory(ShardSpecs(in), cfg, ExecutionMode::kGpu);
    EXPECT_EQ(p.gpu.total() - p.gpu.weights - p.gpu.gradients - p.gpu.activations, r.device.total())
        << fraction;
    EXPECT_EQ(p.host.total(), r.host.total()) << fraction;
    EXPECT_EQ(p.gpu.staging, r.device.staging) << fraction;
  }
}

// With gradient release each stream slot also holds its chunk's gradient: the plan's GPU
// staging is what the engine with release allocates (its slot_stride).
TEST(StreamedPlan, ReleasedGradientsInTheStreamSlotsAreCounted) {
  PlanInputs in = Flash(ModelFromParamCount(3'000'017, 5));  // odd sizes
  in.profile = SlowHost();
  in.grad_release = Choice::kOn;
  for (double fraction : {0.3, 1.0}) {
    const FractionPoint p = EvaluateFraction(in, fraction);
    ASSERT_TRUE(p.grad_release) << fraction;
    ASSERT_GT(p.time.streamed, 0u) << fraction;
    OptimizerConfig cfg = ShardConfig(in, fraction);
    cfg.offload_compute = p.time.split.share;
    const uint64_t without = PredictMemory(ShardSpecs(in), cfg, ExecutionMode::kGpu).device.staging;
    cfg.release_grads = true;
    const uint64_t with = PredictMemory(ShardSpecs(in), cfg, ExecutionMode::kGpu).device.staging;
    EXPECT_GT(with, without) << fraction;
    EXPECT_EQ(p.gpu.staging, with) << fraction;
  }
}

TEST(StreamedPlan, AnFp32MasterWithBf16ParametersStreamsWhole) {
  const uint64_t n = 1ull << 24;
  PlanInputs in = Flash(ModelFromParamCount(n, 1));
  in.formats = {MasterFormat::kF32, MomentFormat::kQ8, MomentFormat::kQ8};
  in.offload_compute = 1.0;
  const FractionPoint p = EvaluateFraction(in, 1.0);
  EXPECT_EQ(p.host.master, 4 * n);  // nothing aliases a bf16 parameter
  EXPECT_EQ(ResolveRates(in).stream_bytes_per_element, 4 + 2 * (1 + 2.0 / 32));
  // fp32 parameters: the fp32 master is the parameter.
  in.param_dtype = in.grad_dtype = DType::kF32;
  EXPECT_EQ(EvaluateFraction(in, 1.0).host.master, 0u);
}

TEST(StreamedPlan, NothingOffloadedStreamsNothing) {
  PlanInputs in = Flash(ModelFromParamCount(1 << 24, 2));
  in.offload_compute = 1.0;
  const FractionPoint p = EvaluateFraction(in, 0.0);
  EXPECT_EQ(p.time.streamed, 0u);
  EXPECT_EQ(p.gpu.staging, 0u);
  in.offload_compute = 0.0;
  EXPECT_EQ(EvaluateFraction(in, 0.0).gpu.total(), p.gpu.total());
}

TEST(StreamedPlan, FractionSearchWeighsTheSplit) {
  // A budget that needs most of the state offloaded, and a slow host.
  PlanInputs in = Flash(ModelFromPreset("llama3-8b"));
  in.profile = SlowHost();
  in.gpu_budget = 40 * kGiB;
  in.offload_compute = 0.0;
  const PlanResult host = MakePlan(in);
  in.offload_compute = kOffloadComputeAuto;
  const PlanResult aut = MakePlan(in);
  ASSERT_TRUE(host.feasible);
  ASSERT_TRUE(aut.feasible);
  EXPECT_GT(aut.recommended.time.split.share, 0.0);
  EXPECT_LT(aut.recommended.time.step_ms, host.recommended.time.step_ms);
  EXPECT_NE(aut.messages.front().find("the GPU computes"), std::string::npos)
      << aut.messages.front();
  // Host mode says nothing of a split.
  EXPECT_EQ(host.messages.front().find("the GPU computes"), std::string::npos);
  // The recommended point is the fastest feasible one of the sweep, or as fast.
  for (const FractionPoint& p : aut.sweep) {
    if (p.fits_gpu && p.fits_host) {
      EXPECT_LE(aut.recommended.time.step_ms, p.time.step_ms * (1 + 1e-12));
    }
  }
  EXPECT_TRUE(aut.monotone);
}

TEST(StreamedPlan, AutoComputesOnTheHostWhereTheSlotsDoNotFit) {
  // Weights and gradients take 1 GiB; 100 MiB more holds the kernel tables but not the
  // 192 MiB of stream slots of 64 MiB chunks.
  PlanInputs in = Flash(ModelFromParamCount(1ull << 28, 8));
  in.stream_chunk_bytes = 64 * kMiB;
  in.gpu_budget = kGiB + 100 * kMiB;
  const PlanResult aut = MakePlan(in);
  ASSERT_TRUE(aut.feasible);
  EXPECT_TRUE(aut.recommended.split_fallback);
  EXPECT_EQ(aut.recommended.time.streamed, 0u);
  EXPECT_EQ(aut.recommended.gpu.staging, 0u);
  bool noted = false;
  for (const std::string& m : aut.messages)
    noted |= m.find("offload_compute=\"host\"") != std::string::npos;
  EXPECT_TRUE(noted);
  // The same figures as asking for the host outright.
  in.offload_compute = 0.0;
  const PlanResult host = MakePlan(in);
  EXPECT_EQ(aut.recommended.fraction, host.recommended.fraction);
  EXPECT_EQ(aut.recommended.time.step_ms, host.recommended.time.step_ms);
  EXPECT_FALSE(host.recommended.split_fallback);
  // Asked for outright, streaming does not fit.
  in.offload_compute = 1.0;
  EXPECT_FALSE(MakePlan(in).feasible);
  // With room for the slots auto streams again.
  in.offload_compute = kOffloadComputeAuto;
  in.gpu_budget = kGiB + 400 * kMiB;
  const PlanResult roomy = MakePlan(in);
  EXPECT_FALSE(roomy.recommended.split_fallback);
  EXPECT_GT(roomy.recommended.time.streamed, 0u);
}

// docs/planner.md's example: eight fp32 Linear(4096, 4096) layers on 1.2 GiB. auto streams
// at small fractions, computes on the host where the stream slots do not fit beside the
// state (0.75 to 0.9375) and streams again at 1: the host's pinned pipeline slots come and
// go with that, and the host total steps back by them at 1 while the state grows. Memory
// is monotone in the fraction all the same: no warning.
TEST(StreamedPlan, StagingThatFollowsTheSplitIsNotNonMonotoneMemory) {
  ModelDescription m;
  m.name = "linear stack";
  for (int i = 0; i < 8; ++i) {
    m.tensors.push_back({std::to_string(i) + ".weight", 4096ull * 4096, -1, {4096, 4096}});
    m.tensors.push_back({std::to_string(i) + ".bias", 4096, -1, {4096}});
  }
  PlanInputs in = Flash(m);
  in.stream_chunk_bytes = 64 * kMiB;  // the example's --stream-chunk
  in.param_dtype = in.grad_dtype = DType::kF32;
  in.gpu_budget = kGiB + kGiB / 5;
  in.host_budget = 64 * kGiB;
  const PlanResult plan = MakePlan(in);
  ASSERT_TRUE(plan.feasible);
  // The case this is about: host staging present at 0.9375, gone at 1.
  const FractionPoint& before = plan.sweep[plan.sweep.size() - 2];
  const FractionPoint& last = plan.sweep.back();
  ASSERT_GT(before.host.staging, 0u);
  ASSERT_EQ(last.host.staging, 0u);
  ASSERT_LT(last.host_node_bytes, before.host_node_bytes);
  EXPECT_TRUE(plan.monotone);
  for (const std::string& msg : plan.messages)
    EXPECT_EQ(msg.find("not monotone"), std::string::npos) << msg;
}

TEST(StreamedPlan, RejectsBadSettings) {
  PlanInputs in = Flash(ModelFromParamCount(1 << 20, 1));
  in.offload_compute = 1.5;
  EXPECT_THROW(MakePlan(in), Error);
  in.offload_compute = -0.5;
  EXPECT_THROW(MakePlan(in), Error);
  in.offload_compute = 1.0;
  in.stream_slots = 1;
  EXPECT_THROW(MakePlan(in), Error);
  in.stream_slots = 3;
  in.stream_chunk_bytes = 1024;
  try {
    MakePlan(in);
    ADD_FAILURE() << "accepted a 1 KiB stream chunk";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stream chunk"), std::string::npos) << e.what();
  }
  const Rates rates = ResolveRates(in);
  EXPECT_THROW(PredictStepTime(in, rates, 0, 10, 10, 11), Error);  // streamed > cold
}

TEST(StreamedPlan, RendersTheSplit) {
  PlanInputs in = Flash(ModelFromPreset("llama3-8b"));
  in.gpu_budget = 40 * kGiB;
  const PlanResult plan = MakePlan(in);
  ASSERT_GT(plan.recommended.time.streamed, 0u);
  const std::string text = PlanToText(plan);
  EXPECT_NE(text.find("compute split: offload_compute auto -> share "), std::string::npos) << text;
  EXPECT_NE(text.find("bound: "), std::string::npos);
  const std::string json = PlanToJson(plan);
  EXPECT_NE(json.find("\"compute_split\""), std::string::npos);
  EXPECT_NE(json.find("\"offload_compute\": \"auto\""), std::string::npos);
  EXPECT_NE(json.find("\"machine_rates\""), std::string::npos);
  EXPECT_NE(PlanToSvg(plan).find("GPU computes"), std::string::npos);
}

}  // namespace
}  // namespace tandem::planner
