// Per-tensor state formats in GPU mode (skipped without a CUDA device): the hot spans of
// one step run as several plans, one per format set (Note [One plan per format set],
// engine/layout/plan_groups.h), and every tensor gets the bits an optimizer configured with
// its formats globally gives it, at fractions 0, 0.5 and 1, with clipping, speculative
// early start and ReloadParams; the memory report equals the prediction; a snapshot
// restores at another fraction.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tests/offload/device_model.h"
#include "tests/offload/hybrid_fixture.h"
#include "tests/offload/mixed_formats_test.h"

namespace tandem {
namespace {

using testing::DeviceModel;
using testing::MixedFormatsOf;

#define SKIP_WITHOUT_GPU()                                                        \
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: GPU-mode test skipped"

OptimizerConfig Config(const StateFormats& f, double fraction, uint64_t chunk = 64) {
  OptimizerConfig c = testing::QuantizedConfig(ExecutionMode::kGpu, fraction,
                                               PlacementPolicy::kBackwardOrder, chunk, 4);
  c.formats = f;
  return c;
}

struct Result {
  OptimizerSnapshot snap;
  std::vector<std::vector<uint8_t>> params;
};

// 6 steps with clipping; after step 3 tensors 0, 7 and 9 get new parameters (ReloadParams).
Result Train(OptimizerConfig c, bool mixed, bool speculative = false) {
  DeviceModel m(11);
  c.speculative_early_start = speculative;
  std::vector<TensorSpec> specs = m.Specs();
  if (mixed) specs = testing::WithMixedFormats(specs);
  HybridOptimizer opt(specs, c);
  for (int t = 1; t <= 6; ++t) {
    m.FillGrads(t);
    const double lr = 1e-3 * (1.0 + 0.1 * t);
    const StepOptions o{.max_grad_norm = 5.0};
    if (speculative) {
      opt.BeginStep(lr, o);
      for (size_t i = m.params.size(); i-- > 0;) opt.GradReady(i);
    }
    EXPECT_TRUE(opt.Step(lr, o).applied);
    if (t == 3) {
      cudaDeviceSynchronize();
      const std::vector<size_t> reload = {0, 7, 9};
      for (size_t k : reload) {
        std::vector<uint8_t>& host = m.host.params[k];
        for (uint64_t i = 0; i < m.host.sizes[k]; i += 3)
          testing::Model::Store(host.data(), m.host.param_dtype, i, 0.25f * float(i % 11) - 1.0f);
        cudaMemcpy(m.params[k], host.data(), host.size(), cudaMemcpyHostToDevice);
      }
      opt.ReloadParams(reload);
    }
  }
  return {opt.Snapshot(), m.ReadParams()};
}

TEST(MixedFormatsGpu, EachTensorMatchesItsGlobalFormatsAcrossPlansAndOffload) {
  SKIP_WITHOUT_GPU();
  const std::vector<StateFormats> sets = testing::MixedFormatSets();
  for (double fraction : {0.0, 0.5, 1.0}) {
    // At the same fraction: ReloadParams resets the corrections of an aliased hot prefix.
    std::vector<Result> global;
    for (const StateFormats& f : sets) global.push_back(Train(Config(f, fraction), false));
    for (bool speculative : {false, true}) {
      if (speculative && fraction == 0.0) continue;  // nothing offloaded to speculate on
      const Result got = Train(Config(testing::kMixedDefault, fraction), true, speculative);
      for (size_t t = 0; t < got.snap.tensors.size(); ++t) {
        size_t k = 0;
        while (!(sets[k] == MixedFormatsOf(t))) ++k;
        EXPECT_EQ(got.snap.tensors[t].formats, sets[k]);
        EXPECT_TRUE(got.snap.tensors[t] == global[k].snap.tensors[t])
            << "fraction " << fraction << " speculative " << speculative << " tensor " << t;
        EXPECT_EQ(got.params[t], global[k].params[t])
            << "fraction " << fraction << " speculative " << speculative << " tensor " << t;
      }
    }
  }
}

TEST(MixedFormatsGpu, MemoryIsThePredictionAndRestoreWorksAtAnotherFraction) {
  SKIP_WITHOUT_GPU();
  DeviceModel m(5);
  const std::vector<TensorSpec> specs = testing::WithMixedFormats(m.Specs());
  const OptimizerConfig c = Config(testing::kMixedDefault, 0.5);
  HybridOptimizer a(specs, c);
  // offload_compute is auto: predicted for the share it chose (ResolvePlacement, with the
  // rates the construction measured; tandem/resolve_placement.h).
  OptimizerConfig chosen = c;
  chosen.offload_compute = a.placement().stream_share;
  const MemoryReport got = a.memory(), want = PredictMemory(specs, chosen, ExecutionMode::kGpu);
  EXPECT_EQ(got.device.total(), want.device.total());
  EXPECT_EQ(got.device.metadata, want.device.metadata);
  EXPECT_EQ(got.host.total(), want.host.total());
  for (int t = 1; t <= 3; ++t) {
    m.FillGrads(t);
    a.Step(1e-3, {.max_grad_norm = 5.0});
  }
  const OptimizerSnapshot snap = a.Snapshot();
  DeviceModel m2(99);
  HybridOptimizer b(testing::WithMixedFormats(m2.Specs()), Config(testing::kMixedDefault, 1.0));
  b.Restore(snap);
  EXPECT_TRUE(b.Snapshot() == snap);
  EXPECT_EQ(m2.ReadParams(), m.ReadParams());
  // A mismatching tensor is refused, naming it.
  std::vector<TensorSpec> other = m2.Specs();
  HybridOptimizer d(other, Config(testing::kMixedDefault, 1.0));
  try {
    d.Restore(snap);
    ADD_FAILURE() << "restored mismatching formats";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'layer1'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
