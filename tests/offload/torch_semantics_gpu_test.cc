// torch.optim's semantics in GPU mode (skipped without a CUDA device): tensors without a
// gradient are left out of the fused launch, the pre-pass and the pipeline; per-tensor
// step counts; more distinct (group, step) pairs than one launch takes; ReloadParams on
// device parameters; a second GradReady (gradient accumulation) with and without
// speculation. Every run is compared byte for byte with host mode and across fractions.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "engine/dtype_io.h"
#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tests/offload/hybrid_fixture.h"

namespace tandem {
namespace {

using testing::DeviceModel;
using testing::Model;

#define SKIP_WITHOUT_GPU()                                                        \
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: GPU-mode test skipped"

// `groups` groups with distinct hyper-parameters (more than 32 exercises several launches).
OptimizerConfig Config(ExecutionMode mode, double fraction, size_t groups, bool spec = false) {
  OptimizerConfig c;
  c.algorithm = Algorithm::kAdamW;
  c.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  c.offload_fraction = fraction;
  c.mode = mode;
  c.chunk_elements = 1024;
  c.host_threads = 2;
  c.speculative_early_start = spec;
  c.groups.resize(groups);
  for (size_t g = 0; g < groups; ++g) {
    c.groups[g].weight_decay = 0.001 * double(g % 5);
    c.groups[g].lr_scale = 1.0 / double(1 + g % 3);
  }
  return c;
}

bool Active(int t, size_t k) { return (t * 7 + k) % 4 != 0; }

// Steps a model of many small tensors (tensor k in group k % groups) with masks.
template <typename Steps>
std::pair<OptimizerSnapshot, std::vector<std::vector<uint8_t>>> RunModel(ExecutionMode mode,
                                                                         double fraction,
                                                                         size_t groups,
                                                                         Steps steps) {
  Model shape;
  shape.sizes.clear();
  for (int k = 0; k < 80; ++k) shape.sizes.push_back(1 + (k * 997) % 3000);
  Model h = shape;
  h.Init(5);
  std::vector<void*> dp, dg;
  std::vector<TensorSpec> specs = h.Specs(static_cast<uint32_t>(groups));
  if (mode == ExecutionMode::kGpu)
    for (size_t k = 0; k < specs.size(); ++k) {
      void *p = nullptr, *g = nullptr;
      cudaMalloc(&p, std::max<size_t>(1, h.params[k].size()));
      cudaMalloc(&g, std::max<size_t>(1, h.grads[k].size()));
      cudaMemcpy(p, h.params[k].data(), h.params[k].size(), cudaMemcpyHostToDevice);
      specs[k].param = p;
      specs[k].grad = g;
      dp.push_back(p);
      dg.push_back(g);
    }
  auto upload_grads = [&] {
    if (mode == ExecutionMode::kGpu)
      for (size_t k = 0; k < dg.size(); ++k)
        cudaMemcpy(dg[k], h.grads[k].data(), h.grads[k].size(), cudaMemcpyHostToDevice);
  };
  OptimizerSnapshot snap;
  {
    HybridOptimizer opt(specs, Config(mode, fraction, groups));
    steps(opt, h, upload_grads);
    snap = opt.Snapshot();
  }
  if (mode == ExecutionMode::kGpu) {
    cudaDeviceSynchronize();
    for (size_t k = 0; k < dp.size(); ++k) {
      cudaMemcpy(h.params[k].data(), dp[k], h.params[k].size(), cudaMemcpyDeviceToHost);
      cudaFree(dp[k]);
      cudaFree(dg[k]);
    }
  }
  return {snap, h.params};
}

auto MaskedSteps = [](HybridOptimizer& opt, Model& h, auto upload_grads) {
  for (int t = 0; t < 6; ++t) {
    h.FillGrads(t);
    std::vector<uint8_t> mask(h.sizes.size());
    for (size_t k = 0; k < mask.size(); ++k) {
      mask[k] = Active(t, k) ? 1 : 0;
      if (!mask[k])  // never read: a NaN there must not skip the step
        Model::Store(h.grads[k].data(), h.grad_dtype, 0, std::numeric_limits<float>::quiet_NaN());
    }
    upload_grads();
    StepOptions o;
    o.active = mask;
    EXPECT_TRUE(opt.Step(1e-2, o).applied) << "step " << t;
  }
};

TEST(TorchSemanticsGpu, MasksAndManySlotsMatchHostModeAtEveryFraction) {
  SKIP_WITHOUT_GPU();
  for (size_t groups : {size_t{2}, size_t{40}}) {  // 40 groups x steps: several launches
    const auto host = RunModel(ExecutionMode::kHost, 0.5, groups, MaskedSteps);
    for (double f : {0.0, 0.5, 1.0}) {
      const auto gpu = RunModel(ExecutionMode::kGpu, f, groups, MaskedSteps);
      EXPECT_EQ(gpu.second, host.second) << groups << " groups, fraction " << f;
      EXPECT_TRUE(gpu.first == host.first) << groups << " groups, fraction " << f;
    }
  }
}

TEST(TorchSemanticsGpu, ReloadParamsReadsTheDeviceParameters) {
  SKIP_WITHOUT_GPU();
  // Host mode and GPU mode must agree after a reload: write the same values, reload, step.
  auto run = [](ExecutionMode mode, double fraction) {
    Model h;
    h.Init(9);
    std::vector<TensorSpec> specs = h.Specs(2);
    std::vector<void*> dp, dg;
    if (mode == ExecutionMode::kGpu)
      for (size_t k = 0; k < specs.size(); ++k) {
        void *p = nullptr, *g = nullptr;
        cudaMalloc(&p, std::max<size_t>(1, h.params[k].size()));
        cudaMalloc(&g, std::max<size_t>(1, h.grads[k].size()));
        cudaMemcpy(p, h.params[k].data(), h.params[k].size(), cudaMemcpyHostToDevice);
        specs[k].param = p;
        specs[k].grad = g;
        dp.push_back(p);
        dg.push_back(g);
      }
    auto put = [&](size_t k, const std::vector<uint8_t>& bytes, bool grad) {
      if (mode == ExecutionMode::kGpu)
        cudaMemcpy(grad ? dg[k] : dp[k], bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
      else
        (grad ? h.grads[k] : h.params[k]) = bytes;
    };
    HybridOptimizer opt(specs, Config(mode, fraction, 2));
    for (int t = 0; t < 3; ++t) {
      h.FillGrads(t);
      for (size_t k = 0; k < specs.size(); ++k) put(k, h.grads[k], true);
      EXPECT_TRUE(opt.Step(1e-2).applied);
      if (t == 1) {
        std::vector<uint8_t> quarter(h.params[3].size());
        for (uint64_t i = 0; i < h.sizes[3]; ++i)
          Model::Store(quarter.data(), h.param_dtype, i, 0.25f);
        put(3, quarter, false);
        const size_t which[] = {3};
        opt.ReloadParams(which);
      }
    }
    OptimizerSnapshot s = opt.Snapshot();
    if (mode == ExecutionMode::kGpu) {
      for (size_t k = 0; k < dp.size(); ++k) {
        cudaMemcpy(h.params[k].data(), dp[k], h.params[k].size(), cudaMemcpyDeviceToHost);
        cudaFree(dp[k]);
        cudaFree(dg[k]);
      }
    }
    return std::make_pair(s, h.params);
  };
  const auto host = run(ExecutionMode::kHost, 0.5);
  for (double f : {0.0, 0.5, 1.0}) {
    const auto gpu = run(ExecutionMode::kGpu, f);
    EXPECT_EQ(gpu.second, host.second) << "fraction " << f;
    EXPECT_TRUE(gpu.first == host.first) << "fraction " << f;
  }
}

TEST(TorchSemanticsGpu, RepeatedGradReadyGivesTheBitsOfAStepWithoutEarlyStart) {
  SKIP_WITHOUT_GPU();
  auto run = [](int micro, bool early, bool spec) {
    DeviceModel m(21);
    OptimizerConfig c = Config(ExecutionMode::kGpu, 0.5, 2, spec);
    HybridOptimizer opt(m.Specs(), c);
    for (int step = 0; step < 3; ++step) {
      if (spec) opt.BeginStep(1e-2);
      for (int b = 0; b < micro; ++b) {
        m.FillGrads(10 * step + b);
        if (early)
          for (size_t k = m.params.size(); k-- > 0;) opt.GradReady(k);
      }
      EXPECT_TRUE(opt.Step(1e-2).applied);
    }
    return std::make_pair(opt.Snapshot(), m.ReadParams());
  };
  for (int k = 1; k <= 4; ++k) {
    const auto ref = run(k, false, false);
    for (bool spec : {false, true}) {
      const auto got = run(k, true, spec);
      EXPECT_EQ(got.second, ref.second) << k << " micro-batches, speculative " << spec;
      EXPECT_TRUE(got.first == ref.first) << k << " micro-batches, speculative " << spec;
    }
  }
}

}  // namespace
}  // namespace tandem
