// Gradient release in GPU mode (skipped without a CUDA device): the gradients are
// produced on a stream of their own, handed over with GradReady(i, nullptr, producer),
// and overwritten on that stream right after WaitGradConsumed(i, producer); the steps
// give the bits of plain steps that read the gradients at Step, at fractions 0, 0.5 and
// 1 and offload_compute shares 0, 0.5 and 1, with and without speculation (and its
// in-place reads of the handed gradients), through clipped steps and a non-finite one.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tests/offload/device_model.h"
#include "tests/offload/release_config.h"

namespace tandem {
namespace {

using testing::DeviceModel;
using testing::Model;

OptimizerConfig GpuConfig(double fraction, double share, bool release, bool speculative,
                          uint64_t in_place = 0) {
  return testing::ReleaseTestConfig(ExecutionMode::kGpu, fraction, share, release, speculative,
                                    in_place);
}

struct GpuOutcome {
  OptimizerSnapshot snap;
  std::vector<std::vector<uint8_t>> params;
  std::vector<StepResult> results;
};

GpuOutcome TrainGpu(const OptimizerConfig& c, bool early) {
  DeviceModel m(11);
  cudaStream_t producer = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
  GpuOutcome run;
  {
    HybridOptimizer opt(m.Specs(), c);
    const size_t n = m.grads.size();
    for (int t = 1; t <= 12; ++t) {
      const double lr = 1e-3 * (1.0 + 0.01 * t);
      const StepOptions o{.max_grad_norm = 100.0, .loss_scale = t % 2 == 0 ? 4.0 : 1.0};
      if (c.speculative_early_start) opt.BeginStep(lr, o);
      m.host.FillGrads(t, t % 4 == 2 ? 1.0f : 0.1f);
      if (t == 7) Model::Store(m.host.grads[n - 1].data(), m.host.grad_dtype, 5, NAN);
      for (size_t i = n; i-- > 0;) {  // "backward" on the producer stream
        cudaMemcpyAsync(m.grads[i], m.host.grads[i].data(), m.host.grads[i].size(),
                        cudaMemcpyHostToDevice, producer);
        if (!early) continue;
        opt.GradReady(i, nullptr, producer);
        if (!c.release_grads) continue;
        opt.WaitGradConsumed(i, producer);
        cudaMemsetAsync(m.grads[i], 0x7f, m.host.grads[i].size(), producer);  // reused
      }
      if (!early) cudaStreamSynchronize(producer);
      run.results.push_back(opt.Step(lr, o));
      cudaDeviceSynchronize();
    }
    run.snap = opt.Snapshot();
  }
  run.params = m.ReadParams();
  cudaStreamDestroy(producer);
  return run;
}

TEST(GradReleaseGpu, BitIdenticalAtEveryFractionAndShare) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: GPU-mode test skipped";
  for (double f : {0.0, 0.5, 1.0}) {
    for (double share : {0.0, 0.5, 1.0}) {
      const std::string what = "f=" + std::to_string(f) + " share=" + std::to_string(share);
      const GpuOutcome plain = TrainGpu(GpuConfig(f, share, false, false), false);
      int applied = 0;
      for (const StepResult& r : plain.results) applied += r.applied ? 1 : 0;
      ASSERT_EQ(applied, 11) << what;
      // Release; with speculation; with every gradient read in place (Note [Reading the
      // handed gradient in place]); with a budget that keeps one or two at a time.
      struct Variant {
        bool spec;
        uint64_t in_place;
      };
      for (const Variant v : {Variant{false, 0}, Variant{true, 0}, Variant{true, 1 << 20},
                              Variant{true, testing::kSomeInPlaceBytes}}) {
        const GpuOutcome got = TrainGpu(GpuConfig(f, share, true, v.spec, v.in_place), true);
        const std::string w = what + (v.spec ? " release+speculation" : " release") +
                              (v.in_place > 0 ? ", in place " + std::to_string(v.in_place) : "");
        ASSERT_EQ(got.results.size(), plain.results.size());
        for (size_t s = 0; s < got.results.size(); ++s) {
          EXPECT_EQ(got.results[s].applied, plain.results[s].applied) << w << " step " << s + 1;
          EXPECT_EQ(got.results[s].grad_norm, plain.results[s].grad_norm) << w << " step " << s + 1;
        }
        EXPECT_EQ(got.params, plain.params) << w << ": parameters differ";
        EXPECT_TRUE(got.snap == plain.snap) << w << ": state differs";
      }
    }
  }
}

// A Restore between the hand-overs and Step keeps the step's released gradients (the
// producer reuses their memory at once): Step steps the restored state with them, as an
// optimizer at that state steps the same gradients read at Step
// (GradRelease.RestoreKeepsTheHandedGradientsForTheStep in host mode).
TEST(GradReleaseGpu, RestoreKeepsTheHandedGradientsForTheStep) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: GPU-mode test skipped";
  for (double f : {0.0, 0.5, 1.0}) {
    for (double share : {0.0, 1.0}) {
      const std::string what = "f=" + std::to_string(f) + " share=" + std::to_string(share);
      DeviceModel m(9), ref(9);
      cudaStream_t producer = nullptr;
      ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
      {
        HybridOptimizer opt(m.Specs(), GpuConfig(f, share, true, false));
        HybridOptimizer plain(ref.Specs(), GpuConfig(f, share, false, false));
        for (int t = 1; t <= 2; ++t) {  // both at the state to restore
          m.FillGrads(t);
          ref.FillGrads(t);
          opt.Step(1e-3);
          plain.Step(1e-3);
        }
        const OptimizerSnapshot saved = opt.Snapshot();
        m.FillGrads(3);
        opt.Step(1e-3);  // moves on; the restore brings it back
        m.host.FillGrads(4);
        for (size_t i = m.grads.size(); i-- > 0;) {
          cudaMemcpyAsync(m.grads[i], m.host.grads[i].data(), m.host.grads[i].size(),
                          cudaMemcpyHostToDevice, producer);
          opt.GradReady(i, nullptr, producer);
          opt.WaitGradConsumed(i, producer);
          cudaMemsetAsync(m.grads[i], 0x7f, m.host.grads[i].size(), producer);  // reused
        }
        opt.Restore(saved);
        ref.FillGrads(4);
        const StepResult got = opt.Step(1e-3), want = plain.Step(1e-3);
        cudaDeviceSynchronize();
        EXPECT_TRUE(got.applied) << what;
        EXPECT_EQ(got.grad_norm, want.grad_norm) << what;
        EXPECT_TRUE(opt.Snapshot() == plain.Snapshot()) << what;
      }
      EXPECT_EQ(m.ReadParams(), ref.ReadParams()) << what;
      cudaStreamDestroy(producer);
    }
  }
}

TEST(GradReleaseGpu, GradientsCountedOnTheDeviceAndPredicted) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: GPU-mode test skipped";
  DeviceModel m(3);
  const OptimizerConfig c = GpuConfig(0.5, 0.5, true, false);
  HybridOptimizer opt(m.Specs(), c);
  EXPECT_GT(opt.memory().device.grads, 0u);
  EXPECT_GT(opt.memory().host.grads, 0u);
  const MemoryReport pred = PredictMemory(m.Specs(), c, ExecutionMode::kGpu);
  EXPECT_EQ(pred.device.grads, opt.memory().device.grads);
  EXPECT_EQ(pred.host.grads, opt.memory().host.grads);
}

}  // namespace
}  // namespace tandem
