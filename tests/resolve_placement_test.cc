// The one placement decision (tandem/resolve_placement.h) and the rate cache
// (tandem/rate_cache.h): pure, in the engine alone (this suite links tandem_engine only).
#include <gtest/gtest.h>

#include <string>
#include <vector>

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
