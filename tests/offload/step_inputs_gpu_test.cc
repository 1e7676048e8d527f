// What a step is handed, GPU mode (skipped without a GPU; host mode: step_inputs_test.cc):
// gradients handed per step in other device buffers give the bits of the construction's
// buffers in every placement class (the pre-pass, the hot plans and the stream plans are
// pointed at them), per-group learning rates give the bits of the lr_scale form,
// WaitGradConsumed orders another stream, and pointers are checked (host memory and short
// buffers refused, nothing changed). The placement decision: a pinned budget equal to
// what an auto construction built accepts it again, and PredictMemory after it (from the
// rate cache) is its memory().
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tandem/rate_cache.h"
#include "tests/offload/device_model.h"
#include "tests/offload/hybrid_fixture.h"

namespace tandem {
namespace {

using testing::DeviceModel;
using testing::QuantizedConfig;

#define SKIP_WITHOUT_GPU() \
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: GPU-mode test skipped"

// Device copies of the host model's gradients of step t, a fresh allocation each time.
struct DeviceGrads {
  std::vector<void*> ptrs;
  explicit DeviceGrads(const testing::Model& host) {
    for (const std::vector<uint8_t>& g : host.grads) {
      void* p = nullptr;
      cudaMalloc(&p, std::max<size_t>(1, g.size()));
      cudaMemcpy(p, g.data(), g.size(), cudaMemcpyHostToDevice);
      ptrs.push_back(p);
    }
  }
  ~DeviceGrads() {
    for (void* p : ptrs) cudaFree(p);
  }
  std::vector<const void*> View() const { return {ptrs.begin(), ptrs.end()}; }
};

OptimizerConfig Config(double fraction, double share, bool speculative) {
  OptimizerConfig c =
      QuantizedConfig(ExecutionMode::kGpu, fraction, PlacementPolicy::kBackwardOrder, 1024, 2);
  c.offload_compute = share;
  c.stream_chunk_bytes = 8192;
  c.speculative_early_start = speculative;
  return c;
}

TEST(StepInputsGpu, GradientsHandedPerStepGiveTheBitsOfTheConstructionsBuffers) {
  SKIP_WITHOUT_GPU();
  for (double fraction : {0.0, 0.5, 1.0})
    for (double share : {0.0, 0.5, 1.0})
      for (bool speculative : {false, true}) {
        const std::string what = "fraction " + std::to_string(fraction) + " share " +
                                 std::to_string(share) + (speculative ? " speculative" : "");
        const OptimizerConfig c = Config(fraction, share, speculative);
        DeviceModel a(7), b(7);
        HybridOptimizer oa(a.Specs(), c), ob(b.Specs(), c);
        std::vector<std::unique_ptr<DeviceGrads>> keep;
        for (int t = 0; t < 4; ++t) {
          const double lr = 1e-3 * (1 + t);
          if (speculative) {
            oa.BeginStep(lr);
            ob.BeginStep(lr);
          }
          a.FillGrads(t);
          b.host.FillGrads(t + 50);  // b's own buffers: other values, never read
          for (size_t k = 0; k < b.grads.size(); ++k)
            cudaMemcpy(b.grads[k], b.host.grads[k].data(), b.host.grads[k].size(),
                       cudaMemcpyHostToDevice);
          keep.push_back(std::make_unique<DeviceGrads>(a.host));
          const std::vector<const void*> grads = keep.back()->View();
          if (speculative)
            for (size_t k = grads.size(); k-- > 0;) {
              oa.GradReady(k);
              ob.GradReady(k, grads[k]);
            }
          StepOptions o;
          if (!speculative) o.grads = grads;
          ASSERT_TRUE(oa.Step(lr).applied) << what;
          ASSERT_TRUE(ob.Step(lr, o).applied) << what;
          for (size_t k = 0; k < grads.size(); ++k) ob.WaitGradConsumed(k, nullptr);
        }
        EXPECT_EQ(oa.Snapshot(), ob.Snapshot()) << what;
        EXPECT_TRUE(a.ReadParams() == b.ReadParams()) << what;
      }
}

TEST(StepInputsGpu, PerGroupLrsGiveTheBitsOfLrScale) {
  SKIP_WITHOUT_GPU();
  OptimizerConfig c = Config(0.5, 0.5, false);  // lr_scale 0.5 in group 1
  DeviceModel a(3), b(3);
  HybridOptimizer oa(a.Specs(), c);
  c.groups[1].lr_scale = 1.0;
  HybridOptimizer ob(b.Specs(), c);
  for (int t = 0; t < 3; ++t) {
    a.FillGrads(t);
    b.FillGrads(t);
    const double lr = 1e-3 * (1 + t);
    oa.Step(lr);
    const std::vector<double> lrs{lr, lr * 0.5};
    ob.Step(lrs);
  }
  EXPECT_TRUE(a.ReadParams() == b.ReadParams());
  EXPECT_EQ(oa.Snapshot().tensors, ob.Snapshot().tensors);
}

TEST(StepInputsGpu, GradientPointersAreChecked) {
  SKIP_WITHOUT_GPU();
  DeviceModel m(4);
  HybridOptimizer opt(m.Specs(), Config(0.5, 0.0, false));
  m.FillGrads(0);
  opt.Step(1e-3);
  const OptimizerSnapshot before = opt.Snapshot();
  std::vector<const void*> grads(m.grads.size(), nullptr);
  grads[0] = m.host.grads[0].data();  // host memory
  StepOptions o;
  o.grads = grads;
  try {
    opt.Step(1e-3, o);
    ADD_FAILURE() << "a host pointer was accepted in GPU mode";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("tensor 0 'layer0'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not device memory"), std::string::npos) << e.what();
  }
  void* small = nullptr;
  cudaMalloc(&small, 16);
  grads[0] = small;
  EXPECT_THROW(opt.Step(1e-3, o), Error);  // 16 bytes for 4113 elements
  EXPECT_THROW(opt.GradReady(0, small), Error);
  cudaFree(small);
  EXPECT_EQ(opt.Snapshot(), before);
  EXPECT_EQ(opt.step_count(), 1);
}

// The gradient of the last Step may be overwritten on another stream once that stream
// waited for WaitGradConsumed: the step's bits do not change.
TEST(StepInputsGpu, WaitGradConsumedOrdersAnotherStream) {
  SKIP_WITHOUT_GPU();
  for (double share : {0.0, 1.0}) {
    DeviceModel a(5), b(5);
    const OptimizerConfig c = Config(0.5, share, false);
    HybridOptimizer oa(a.Specs(), c), ob(b.Specs(), c);
    cudaStream_t other = nullptr;
    cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
    for (int t = 0; t < 3; ++t) {
      cudaStreamSynchronize(other);  // last step's overwrites done before new gradients
      a.FillGrads(t);
      b.FillGrads(t);
      oa.Step(1e-3);
      ob.Step(1e-3);
      for (size_t k = 0; k < b.grads.size(); ++k) {
        ob.WaitGradConsumed(k, other);
        cudaMemsetAsync(b.grads[k], 0xFF, b.host.grads[k].size(), other);  // NaN
      }
    }
    cudaStreamSynchronize(other);
    cudaStreamDestroy(other);
    EXPECT_TRUE(a.ReadParams() == b.ReadParams()) << share;
  }
}

// Auto with measured rates: the construction resolves, checks and builds one placement,
// so a budget of exactly what it built is accepted, and PredictMemory (which reads the
// rates the construction measured into the cache) predicts it.
TEST(StepInputsGpu, AnAutoPlacementFitsTheBudgetItBuilt) {
  SKIP_WITHOUT_GPU();
  DeviceModel m(6);
  OptimizerConfig c = Config(1.0, kOffloadComputeAuto, true);
  c.rate_cache = std::make_shared<RateCache>();
  HybridOptimizer first(m.Specs(), c);
  ASSERT_EQ(c.rate_cache->Entries().size(), 1u);
  const MemoryReport built = first.memory();
  EXPECT_EQ(PredictMemory(m.Specs(), c, ExecutionMode::kGpu).host.total(), built.host.total());
  EXPECT_EQ(PredictMemory(m.Specs(), c, ExecutionMode::kGpu).device.total(), built.device.total());
  c.pinned_budget_bytes = built.host.total();
  HybridOptimizer second(m.Specs(), c);  // the same rates: the same placement
  EXPECT_EQ(second.placement().stream_share, first.placement().stream_share);
  EXPECT_EQ(second.memory().host.total(), built.host.total());
}

}  // namespace
}  // namespace tandem
