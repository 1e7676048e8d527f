// The one placement decision (tandem/resolve_placement.h) and the rate cache
// (tandem/rate_cache.h): pure, in the engine alone (this suite links tandem_engine only).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/layout/memory_plan.h"
#include "engine/resolve_sizes.h"
#include "tandem/error.h"
#include "tests/expect_error.h"
#include "tandem/rate_cache.h"
#include "tandem/resolve_placement.h"

namespace tandem {
namespace {

std::vector<TensorSpec> Specs() {
  std::vector<TensorSpec> specs;
  for (uint64_t n : {4096u + 17u, 64u, 100000u, 3u, 0u, 2048u, 33u, 90000u}) {
    TensorSpec s;
    s.name = std::to_string(specs.size());
    s.name.insert(0, 1, 't');
    s.numel = n;
    specs.push_back(s);
  }
  return specs;
}

OptimizerConfig Config(double fraction, double share) {
  OptimizerConfig c;
  c.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  c.offload_fraction = fraction;
  c.offload_compute = share;
  c.stream_chunk_bytes = 64 << 10;
  return c;
}

MachineRates Rates(double host_gparams) {
  MachineRates r;
  r.h2d_gbps = 50;
  r.d2h_gbps = 50;
  r.host_gparams = host_gparams;
  r.gpu_gparams = 100;
  return r;
}

using testing::ExpectInvalid;

TEST(ResolvePlacement, AnExplicitShareIsPlacedAsGiven) {
  const std::vector<TensorSpec> specs = Specs();
  const ResolvedPlacement r =
      ResolvePlacement(specs, Config(0.5, 0.25), ExecutionMode::kGpu, nullptr);
  std::vector<uint64_t> numels;
  for (const TensorSpec& s : specs) numels.push_back(s.numel);
  const Placement want = ComputePlacement(numels, 0.5, PlacementPolicy::kBackwardOrder, 0.25);
  EXPECT_EQ(r.placement.stream_share, 0.25);
  EXPECT_EQ(r.placement.streamed, want.streamed);
  EXPECT_EQ(r.placement.offloaded, want.offloaded);
  EXPECT_EQ(r.split.step_ms, 0.0);  // no rates: no model
  // With rates the split is the model at that share.
  const MachineRates rates = Rates(1);
  const ResolvedPlacement m =
      ResolvePlacement(specs, Config(0.5, 0.25), ExecutionMode::kGpu, &rates);
  EXPECT_EQ(m.split.share, 0.25);
  EXPECT_GT(m.split.step_ms, 0.0);
  EXPECT_EQ(m.memory.host.total(), r.memory.host.total());
}

TEST(ResolvePlacement, AutoChoosesTheModelsShareInGpuModeAndNothingOnTheHost) {
  const std::vector<TensorSpec> specs = Specs();
  const OptimizerConfig c = Config(1.0, kOffloadComputeAuto);
  // A slow host: the GPU computes most of the offloaded elements.
  const MachineRates slow = Rates(0.1);
  const ResolvedPlacement gpu = ResolvePlacement(specs, c, ExecutionMode::kGpu, &slow);
  EXPECT_GT(gpu.placement.stream_share, 0.5);
  EXPECT_EQ(gpu.placement.stream_share, gpu.split.share);
  EXPECT_GT(gpu.placement.streamed, 0u);
  EXPECT_GT(gpu.memory.device.staging, 0u);  // the stream slots
  // Host mode has no GPU to stream through: share 0, rates or not.
  const ResolvedPlacement host = ResolvePlacement(specs, c, ExecutionMode::kHost, &slow);
  EXPECT_EQ(host.placement.streamed, 0u);
  EXPECT_EQ(ResolvePlacement(specs, c, ExecutionMode::kHost, nullptr).memory.host.total(),
            host.memory.host.total());
  // Nothing offloaded: nothing to choose, no rates needed.
  EXPECT_EQ(ResolvePlacement(specs, Config(0.0, kOffloadComputeAuto), ExecutionMode::kGpu, nullptr)
                .placement.offloaded,
            0u);
}

// Note [The compute share's input] (engine/layout/stream_layout.h): auto's share is
// ChooseSplit's over the share-0 placement with the per-element bytes of the state
// (3.125 for bf16+ecc8/q8/q8 with bf16 parameters, no slab alignment), the gradient and
// the parameter, and with release_grads the gradient again on the way up: the rule the
// planner's sweep used before it asked the engine, so plans did not change.
TEST(ResolvePlacement, AutoSharesTheRuleOfThePlannersSweep) {
  std::vector<TensorSpec> specs = Specs();
  for (TensorSpec& s : specs) s.param_dtype = s.grad_dtype = DType::kBF16;
  std::vector<uint64_t> numels;
  for (const TensorSpec& s : specs) numels.push_back(s.numel);
  for (const double host_gparams : {0.02, 0.05, 0.2, 1.0}) {
    for (const bool release : {false, true}) {
      OptimizerConfig c = Config(0.7, kOffloadComputeAuto);
      c.release_grads = release;
      const MachineRates rates = Rates(host_gparams);
      const Placement base = ComputePlacement(numels, 0.7, c.placement);
      ComputeSplitInput in;
      in.hot = base.total - base.offloaded;
      in.offloaded = base.offloaded;
      in.stream_bytes = 1 + 2 * (1 + 2.0 / 32);
      in.grad_bytes = in.param_bytes = 2;
      in.chunk_elements = c.chunk_elements;
      if (release) in.stream_grad_bytes = 2;
      const ComputeSplit want = ChooseSplit(in, rates);
      const ResolvedPlacement got = ResolvePlacement(specs, c, ExecutionMode::kGpu, &rates);
      EXPECT_EQ(got.split.share, want.share) << host_gparams << " " << release;
      EXPECT_EQ(got.split.step_ms, want.step_ms);
      EXPECT_EQ(got.placement.streamed,
                ComputePlacement(numels, 0.7, c.placement, want.share).streamed);
      // DecidePlacement is the same decision without the memory.
      const PlacementDecision decided = DecidePlacement(specs, c, ExecutionMode::kGpu, &rates);
      EXPECT_EQ(decided.split.share, got.split.share);
      EXPECT_EQ(decided.placement.streamed, got.placement.streamed);
      EXPECT_EQ(decided.placement.offloaded, got.placement.offloaded);
    }
  }
}

TEST(ResolvePlacement, CarriesTheMemoryPlanItSized) {
  const MachineRates rates = Rates(0.1);
  const ResolvedPlacement r = ResolvePlacement(Specs(), Config(0.6, kOffloadComputeAuto),
                                               ExecutionMode::kGpu, &rates);
  ASSERT_NE(r.plan, nullptr);
  const ResolvedPlacement copy = r;  // shared, not planned again
  EXPECT_EQ(copy.plan.get(), r.plan.get());
  // What the plan adds up to is the memory reported (GPU mode adds the plans' tables).
  OptimizerConfig budget = Config(0.6, 0.5);
  budget.pinned_budget_bytes = 12345;
  const ResolvedPlacement host = ResolvePlacement(Specs(), budget, ExecutionMode::kHost, nullptr);
  EXPECT_EQ(host.plan->report.host.total(), host.memory.host.total());
  EXPECT_GT(host.plan->stream.chunks().size(), 0u);
  EXPECT_EQ(host.memory.host_budget, 12345u);
}

void ExpectSameBytes(const MemoryReport::Bytes& a, const MemoryReport::Bytes& b) {
  EXPECT_EQ(a.master, b.master);
  EXPECT_EQ(a.correction, b.correction);
  EXPECT_EQ(a.momentum, b.momentum);
  EXPECT_EQ(a.variance, b.variance);
  EXPECT_EQ(a.scales, b.scales);
  EXPECT_EQ(a.staging, b.staging);
  EXPECT_EQ(a.metadata, b.metadata);
  EXPECT_EQ(a.speculation, b.speculation);
  EXPECT_EQ(a.grads, b.grads);
  EXPECT_EQ(a.total(), b.total());
}

// Note [Sizes without parts]: the plan sized without parts has every size of the full one.
TEST(ResolvePlacement, SizesWithoutPartsAreTheFullPlans) {
  std::vector<TensorSpec> specs = Specs();
  specs[1].param_dtype = specs[1].grad_dtype = DType::kBF16;
  specs[2].formats = StateFormats{MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kF32};
  const MachineRates rates = Rates(0.1);
  for (const ExecutionMode mode : {ExecutionMode::kGpu, ExecutionMode::kHost})
    for (const double fraction : {0.0, 0.3, 0.8, 1.0})
      for (const double share : {0.0, 0.5, 1.0, kOffloadComputeAuto})
        for (const int extras : {0, 1, 2, 3}) {
          OptimizerConfig c = Config(fraction, share);
          c.chunk_elements = 1024;
          c.release_grads = (extras & 1) != 0;
          c.speculative_early_start = (extras & 2) != 0;
          c.speculative_host_bytes = 20000;
          c.speculative_stream_bytes = 30000;
          const ResolvedPlacement full = ResolvePlacement(specs, c, mode, &rates);
          const ResolvedPlacement sized = ResolvePlacementSizes(specs, c, mode, &rates);
          ExpectSameBytes(full.memory.device, sized.memory.device);
          ExpectSameBytes(full.memory.host, sized.memory.host);
          const layout::MemoryPlan &a = *full.plan, &b = *sized.plan;
          EXPECT_EQ(a.hot.bytes(), b.hot.bytes());
          EXPECT_EQ(a.cold.bytes(), b.cold.bytes());
          EXPECT_EQ(a.cold_backup.bytes(), b.cold_backup.bytes());
          EXPECT_EQ(a.stream.bytes(), b.stream.bytes());
          EXPECT_EQ(a.stream_slot_bytes, b.stream_slot_bytes);
          EXPECT_EQ(a.early_bytes, b.early_bytes);
          EXPECT_EQ(a.hold_bytes, b.hold_bytes);
          EXPECT_EQ(a.spec_spare_bytes, b.spec_spare_bytes);
          EXPECT_EQ(a.spec_hold_bytes, b.spec_hold_bytes);
          EXPECT_EQ(a.spec_spare_off, b.spec_spare_off);
          ASSERT_EQ(a.stream.chunks().size(), b.stream.chunks().size());
          for (size_t k = 0; k < a.stream.chunks().size(); ++k) {
            EXPECT_EQ(a.stream.chunks()[k].begin, b.stream.chunks()[k].begin);
            EXPECT_EQ(a.stream.chunks()[k].bytes, b.stream.chunks()[k].bytes);
          }
          EXPECT_EQ(b.hot.size(), 0u);  // no parts kept
        }
}

TEST(ResolvePlacement, AutoInGpuModeWithoutRatesSaysHowToGetThem) {
  const std::vector<TensorSpec> specs = Specs();
  OptimizerConfig c = Config(0.5, kOffloadComputeAuto);
  c.rate_cache = std::make_shared<RateCache>();  // empty: nothing measured yet
  ExpectInvalid([&] { ResolvePlacement(specs, c, ExecutionMode::kGpu, nullptr); },
                "no machine rates are known");
  ExpectInvalid([&] { PredictMemory(specs, c, ExecutionMode::kGpu); }, "machine_rates");
  // Once the setting's rates are in the cache (a construction measures them there),
  // PredictMemory places what the optimizer built with them.
  const MachineRates rates = Rates(0.2);
  c.rate_cache->Store(RateKeyFor(specs, c), rates);
  EXPECT_EQ(PredictMemory(specs, c, ExecutionMode::kGpu).host.total(),
            ResolvePlacement(specs, c, ExecutionMode::kGpu, &rates).memory.host.total());
  // machine_rates take precedence over the cache.
  c.machine_rates = Rates(1000);
  EXPECT_EQ(PredictMemory(specs, c, ExecutionMode::kGpu).host.total(),
            ResolvePlacement(specs, c, ExecutionMode::kGpu, &*c.machine_rates).memory.host.total());
}

TEST(ResolvePlacement, BadInputIsNamed) {
  std::vector<TensorSpec> specs = Specs();
  specs[3].group = 4;
  ExpectInvalid([&] { ResolvePlacement(specs, Config(0.5, 0.0), ExecutionMode::kGpu, nullptr); },
                "tensor 't3': group 4 out of range");
  ExpectInvalid([&] { ResolvePlacement(Specs(), Config(1.5, 0.0), ExecutionMode::kGpu, nullptr); },
                "offload_fraction");
  MachineRates bad;
  ExpectInvalid(
      [&] {
        ResolvePlacement(Specs(), Config(0.5, kOffloadComputeAuto), ExecutionMode::kGpu, &bad);
      },
      "machine rates must be finite");
}

TEST(RateCache, MeasuresOncePerKeyAndForgetsOnReset) {
  RateCache cache;
  const std::vector<TensorSpec> specs = Specs();
  const RateCache::Key key = RateKeyFor(specs, Config(0.5, kOffloadComputeAuto));
  RateCache::Key other = key;
  other.host_threads = 3;
  int measured = 0;
  auto measure = [&] {
    ++measured;
    return Rates(measured);
  };
  EXPECT_FALSE(cache.Find(key).has_value());
  EXPECT_EQ(cache.FindOrMeasure(key, measure).host_gparams, 1.0);
  EXPECT_EQ(cache.FindOrMeasure(key, measure).host_gparams, 1.0);
  EXPECT_EQ(measured, 1);
  EXPECT_EQ(cache.FindOrMeasure(other, measure).host_gparams, 2.0);
  ASSERT_EQ(cache.Entries().size(), 2u);
  EXPECT_EQ(cache.Entries()[0].first, key);
  cache.Reset();
  EXPECT_TRUE(cache.Entries().empty());
  EXPECT_EQ(cache.FindOrMeasure(key, measure).host_gparams, 3.0);
  // A measurement that throws stores nothing.
  EXPECT_THROW(
      cache.FindOrMeasure(other, []() -> MachineRates { throw Error(ErrorKind::kCuda, "x"); }),
      Error);
  EXPECT_FALSE(cache.Find(other).has_value());
  ExpectInvalid([&] { cache.Store(other, MachineRates{}); }, "finite and > 0");
}

TEST(RateCache, TheKeyIsTheLargestHostTensorsSetting) {
  std::vector<TensorSpec> specs = Specs();
  specs[2].formats = StateFormats{MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kF32};
  specs[2].param_dtype = DType::kF32;
  OptimizerConfig c = Config(1.0, kOffloadComputeAuto);
  c.host_threads = 5;
  const RateCache::Key key = RateKeyFor(specs, c);
  EXPECT_EQ(key.formats, *specs[2].formats);  // tensor 2 is the largest
  EXPECT_EQ(key.param_dtype, DType::kF32);
  EXPECT_EQ(key.host_threads, 5);
  EXPECT_EQ(key.chunk_elements, c.chunk_elements);
  EXPECT_GT(key.kernel_bytes, 0.0);
  // Another default cache is not this one: an explicit cache keeps its entries apart.
  EXPECT_NE(&DefaultRateCache(), c.rate_cache.get());
}

}  // namespace
}  // namespace tandem
