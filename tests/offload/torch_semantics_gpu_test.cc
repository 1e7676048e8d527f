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

// A host model's parameters and gradients where `mode` wants them: the model's own host
// buffers (host mode) or device copies (GPU mode), with the specs pointing there.
class Placed {
 public:
  Placed(ExecutionMode mode, Model* h, uint32_t groups)
      : gpu_(mode == ExecutionMode::kGpu), h_(h), specs_(h->Specs(groups)) {
    if (!gpu_) return;
    for (size_t k = 0; k < specs_.size(); ++k) {
      void *p = nullptr, *g = nullptr;
      cudaMalloc(&p, std::max<size_t>(1, h->params[k].size()));
      cudaMalloc(&g, std::max<size_t>(1, h->grads[k].size()));
      cudaMemcpy(p, h->params[k].data(), h->params[k].size(), cudaMemcpyHostToDevice);
      specs_[k].param = p;
      specs_[k].grad = g;
    }
  }
  ~Placed() {
    if (!gpu_) return;
    for (const TensorSpec& s : specs_) {
      cudaFree(s.param);
      cudaFree(const_cast<void*>(s.grad));
    }
  }
  Placed(const Placed&) = delete;
  Placed& operator=(const Placed&) = delete;

  const std::vector<TensorSpec>& specs() const { return specs_; }
  // Copies the host gradients to where the optimizer reads them.
  void PutGrads() {
    if (gpu_)
      for (size_t k = 0; k < specs_.size(); ++k)
        cudaMemcpy(const_cast<void*>(specs_[k].grad), h_->grads[k].data(), h_->grads[k].size(),
                   cudaMemcpyHostToDevice);
  }
  // Writes tensor k's parameter where the optimizer keeps it (the caller's own write).
  void PutParam(size_t k, const std::vector<uint8_t>& bytes) {
    if (gpu_)
      cudaMemcpy(specs_[k].param, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
    else
      h_->params[k] = bytes;
  }
  // The parameters as the optimizer left them.
  std::vector<std::vector<uint8_t>> Params() const {
    std::vector<std::vector<uint8_t>> out = h_->params;
    if (gpu_) {
      cudaDeviceSynchronize();
      for (size_t k = 0; k < out.size(); ++k)
        cudaMemcpy(out[k].data(), specs_[k].param, out[k].size(), cudaMemcpyDeviceToHost);
    }
    return out;
  }

 private:
  bool gpu_;
  Model* h_;
  std::vector<TensorSpec> specs_;
};

using Result = std::pair<OptimizerSnapshot, std::vector<std::vector<uint8_t>>>;

// 80 small tensors (tensor k in group k % groups), six steps with masks.
Result RunMasked(ExecutionMode mode, double fraction, size_t groups) {
  Model h;
  h.sizes.clear();
  for (int k = 0; k < 80; ++k) h.sizes.push_back(1 + (k * 997) % 3000);
  h.Init(5);
  Placed placed(mode, &h, static_cast<uint32_t>(groups));
  HybridOptimizer opt(placed.specs(), Config(mode, fraction, groups));
  for (int t = 0; t < 6; ++t) {
    h.FillGrads(t);
    std::vector<uint8_t> mask(h.sizes.size());
    for (size_t k = 0; k < mask.size(); ++k) {
      mask[k] = Active(t, k) ? 1 : 0;
      if (!mask[k])  // never read: a NaN there must not skip the step
        Model::Store(h.grads[k].data(), h.grad_dtype, 0, std::numeric_limits<float>::quiet_NaN());
    }
    placed.PutGrads();
    StepOptions o;
    o.active = mask;
    EXPECT_TRUE(opt.Step(1e-2, o).applied) << "step " << t;
  }
  return {opt.Snapshot(), placed.Params()};
}

TEST(TorchSemanticsGpu, MasksAndManySlotsMatchHostModeAtEveryFraction) {
  SKIP_WITHOUT_GPU();
  for (size_t groups : {size_t{2}, size_t{40}}) {  // 40 groups x steps: several launches
    const Result host = RunMasked(ExecutionMode::kHost, 0.5, groups);
    for (double f : {0.0, 0.5, 1.0}) {
      const Result gpu = RunMasked(ExecutionMode::kGpu, f, groups);
      EXPECT_EQ(gpu.second, host.second) << groups << " groups, fraction " << f;
      EXPECT_TRUE(gpu.first == host.first) << groups << " groups, fraction " << f;
    }
  }
}

// Host mode and GPU mode agree after a reload: the same write, the same reload, steps.
Result RunReload(ExecutionMode mode, double fraction) {
  Model h;
  h.Init(9);
  Placed placed(mode, &h, 2);
  HybridOptimizer opt(placed.specs(), Config(mode, fraction, 2));
  for (int t = 0; t < 3; ++t) {
    h.FillGrads(t);
    placed.PutGrads();
    EXPECT_TRUE(opt.Step(1e-2).applied);
    if (t == 1) {
      std::vector<uint8_t> quarter(h.params[3].size());
      for (uint64_t i = 0; i < h.sizes[3]; ++i) Model::Store(quarter.data(), h.param_dtype, i, 0.25f);
      placed.PutParam(3, quarter);
      const size_t which[] = {3};
      opt.ReloadParams(which);
    }
  }
  return {opt.Snapshot(), placed.Params()};
}

TEST(TorchSemanticsGpu, ReloadParamsReadsTheDeviceParameters) {
  SKIP_WITHOUT_GPU();
  const Result host = RunReload(ExecutionMode::kHost, 0.5);
  for (double f : {0.0, 0.5, 1.0}) {
    const Result gpu = RunReload(ExecutionMode::kGpu, f);
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
