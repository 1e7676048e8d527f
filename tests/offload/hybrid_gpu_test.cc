// HybridOptimizer in GPU mode (skipped without a CUDA device): the same random,
// model-shaped problem stepped 20 times at fractions 0, 0.25, 0.5, 0.75 and 1, under each
// placement policy, chunk size and thread count, gives byte-identical parameters and state,
// equal to host mode's; a non-finite gradient changes nothing; device pointers and the
// sizes of their allocations are checked;
// speculative early start (BeginStep) gives the same bits as plain steps.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>

#include "offload/gpu/device_range.h"
#include "tandem/faults.h"
#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tests/offload/device_model.h"
#include "tests/offload/hybrid_fixture.h"

namespace tandem {
namespace {

using testing::DeviceModel;
using testing::QuantizedConfig;
using testing::Model;

#define SKIP_WITHOUT_GPU()                                                        \
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: GPU-mode test skipped"

std::pair<OptimizerSnapshot, std::vector<std::vector<uint8_t>>> RunGpu(const OptimizerConfig& c,
                                                                       bool early = false,
                                                                       double clip = 5.0) {
  DeviceModel m(7);
  HybridOptimizer opt(m.Specs(), c);
  for (int t = 1; t <= 20; ++t) {
    m.FillGrads(t);
    if (early)
      for (size_t i = m.params.size(); i-- > 0;) opt.GradReady(i);
    EXPECT_TRUE(opt.Step(1e-3 * (1.0 + 0.01 * t), {.max_grad_norm = clip}).applied);
  }
  return {opt.Snapshot(), m.ReadParams()};
}

TEST(HybridGpu, BitIdenticalAcrossFractionsAndEqualToHostMode) {
  SKIP_WITHOUT_GPU();
  const auto base = RunGpu(QuantizedConfig(ExecutionMode::kGpu, 0.0, PlacementPolicy::kBackwardOrder,
                                  4096, 4));
  for (double f : {0.25, 0.5, 0.75, 1.0})
    for (PlacementPolicy pol : {PlacementPolicy::kBackwardOrder, PlacementPolicy::kForwardOrder,
                                PlacementPolicy::kLargestFirst})
      for (uint64_t chunk : {uint64_t{64}, uint64_t{4096}})
        for (int threads : {1, 4}) {
          const auto got = RunGpu(QuantizedConfig(ExecutionMode::kGpu, f, pol, chunk, threads));
          ASSERT_EQ(got.second, base.second) << "f=" << f << " " << Name(pol) << " chunk="
                                             << chunk << " threads=" << threads;
          ASSERT_TRUE(got.first == base.first);
        }
  // Early start gives the same bits.
  const auto early = RunGpu(QuantizedConfig(ExecutionMode::kGpu, 0.5, PlacementPolicy::kBackwardOrder,
                                   256, 4), true);
  EXPECT_EQ(early.second, base.second);
  // Host mode, same problem, no clipping: the same bits as the GPU. (With clipping, the
  // GPU's and the host's norm reductions may round differently, and the clip coefficient
  // enters every update; within one mode the norm is deterministic.)
  const auto gpu_noclip = RunGpu(QuantizedConfig(ExecutionMode::kGpu, 0.5,
                                        PlacementPolicy::kBackwardOrder, 256, 4), false, 0.0);
  Model h;
  h.Init(7);
  HybridOptimizer host(h.Specs(2), QuantizedConfig(ExecutionMode::kHost, 0.5,
                                          PlacementPolicy::kBackwardOrder, 256, 2));
  for (int t = 1; t <= 20; ++t) {
    h.FillGrads(t);
    host.Step(1e-3 * (1.0 + 0.01 * t));
  }
  EXPECT_EQ(h.params, gpu_noclip.second);
  EXPECT_TRUE(host.Snapshot() == gpu_noclip.first);
}

TEST(HybridGpu, NonFiniteGradientChangesNothing) {
  SKIP_WITHOUT_GPU();
  DeviceModel m(7);
  HybridOptimizer opt(m.Specs(), QuantizedConfig(ExecutionMode::kGpu, 0.5,
                                        PlacementPolicy::kBackwardOrder, 256, 4));
  m.FillGrads(1);
  ASSERT_TRUE(opt.Step(1e-3).applied);
  const OptimizerSnapshot before = opt.Snapshot();
  const auto params_before = m.ReadParams();
  for (size_t k : {size_t{0}, size_t{7}}) {  // a hot tensor, then an offloaded one
    m.FillGrads(2);
    Model::Store(m.host.grads[k].data(), m.host.grad_dtype, 3, NAN);
    cudaMemcpy(m.grads[k], m.host.grads[k].data(), m.host.grads[k].size(),
               cudaMemcpyHostToDevice);
    EXPECT_FALSE(opt.Step(1e-3).applied);
    EXPECT_TRUE(opt.Snapshot() == before);
    EXPECT_EQ(m.ReadParams(), params_before);
  }
}

// Speculative early start on the GPU: BeginStep before "backward", GradReady in backward
// order, with non-finite and clipped steps mixed in, gives the bits of plain steps.
std::pair<OptimizerSnapshot, std::vector<std::vector<uint8_t>>> RunGpuMixed(
    const OptimizerConfig& c, bool speculative, std::vector<StepResult>* results,
    uint64_t* speculated) {
  DeviceModel m(7);
  HybridOptimizer opt(m.Specs(), c);
  for (int t = 1; t <= 14; ++t) {
    const double lr = 1e-3 * (1.0 + 0.01 * t);
    const StepOptions o{.max_grad_norm = 100.0, .loss_scale = t % 2 == 0 ? 4.0 : 1.0};
    if (speculative) opt.BeginStep(lr, o);
    m.host.FillGrads(t, t % 4 == 2 ? 1.0f : 0.1f);  // x10: clipping triggers
    if (t % 5 == 3) Model::Store(m.host.grads[t % 2 == 0 ? 7 : 0].data(), m.host.grad_dtype, 3, NAN);
    // "Backward": each gradient is written on the compute stream, then announced.
    for (size_t k = m.grads.size(); k-- > 0;) {
      cudaMemcpyAsync(m.grads[k], m.host.grads[k].data(), m.host.grads[k].size(),
                      cudaMemcpyHostToDevice, nullptr);
      if (speculative) opt.GradReady(k);
    }
    results->push_back(opt.Step(lr, o));
    *speculated += opt.last_step_times().speculated_chunks;
  }
  return {opt.Snapshot(), m.ReadParams()};
}

TEST(HybridGpu, SpeculativeEarlyStartIsBitIdentical) {
  SKIP_WITHOUT_GPU();
  for (double f : {0.0, 0.25, 0.5, 1.0}) {
    OptimizerConfig c = QuantizedConfig(ExecutionMode::kGpu, f, PlacementPolicy::kBackwardOrder,
                                        256, 4);
    std::vector<StepResult> plain_r, spec_r;
    uint64_t none = 0, speculated = 0;
    const auto plain = RunGpuMixed(c, false, &plain_r, &none);
    c.speculative_early_start = true;
    const auto spec = RunGpuMixed(c, true, &spec_r, &speculated);
    ASSERT_EQ(plain_r.size(), spec_r.size());
    for (size_t i = 0; i < plain_r.size(); ++i) {
      EXPECT_EQ(spec_r[i].applied, plain_r[i].applied) << "f=" << f << " step " << i + 1;
      EXPECT_EQ(spec_r[i].grad_norm, plain_r[i].grad_norm) << "f=" << f << " step " << i + 1;
    }
    EXPECT_EQ(spec.second, plain.second) << "f=" << f;
    EXPECT_TRUE(spec.first == plain.first) << "f=" << f;
    if (f > 0) {
      EXPECT_GT(speculated, 0u) << "f=" << f;
    }
  }
}

// A copy that fails mid-step (injected at the enqueue, as a failing cudaMemcpyAsync would)
// is reported as kCuda; restoring the snapshot from before the step and stepping again
// gives the bits of the run that never failed.
TEST(HybridGpu, CopyFailureMidStepIsReportedAndRecoverable) {
  SKIP_WITHOUT_GPU();
  OptimizerConfig c =
      QuantizedConfig(ExecutionMode::kGpu, 0.5, PlacementPolicy::kBackwardOrder, 256, 4);
  const auto want = RunGpu(c);
  DeviceModel m(7);
  const auto faults = std::make_shared<FaultPlan>();
  c.faults = faults;
  HybridOptimizer opt(m.Specs(), c);
  for (int t = 1; t <= 20; ++t) {
    m.FillGrads(t);
    auto step = [&] { return opt.Step(1e-3 * (1.0 + 0.01 * t), {.max_grad_norm = 5.0}); };
    if (t == 10) {
      const OptimizerSnapshot before = opt.Snapshot();
      for (uint64_t nth : {1u, 6u}) {
        faults->FailCopy(nth);
        try {
          step();
          FAIL() << "no error for failed copy " << nth;
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), ErrorKind::kCuda);
          EXPECT_NE(std::string(e.what()).find("chunks applied"), std::string::npos)
              << e.what();
        }
        EXPECT_EQ(opt.step_count(), 9);
        opt.Restore(before);
      }
    }
    ASSERT_TRUE(step().applied);
  }
  EXPECT_EQ(m.ReadParams(), want.second);
  EXPECT_TRUE(opt.Snapshot() == want.first);
}

TEST(HybridGpu, HostPointersAreRejectedInGpuMode) {
  SKIP_WITHOUT_GPU();
  DeviceModel m(7);
  auto specs = m.Specs();
  specs[2].grad = m.host.grads[2].data();
  try {
    HybridOptimizer opt(specs, QuantizedConfig(ExecutionMode::kGpu, 0.5, PlacementPolicy::kBackwardOrder,
                                      256, 4));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'layer2': grad is not device memory"),
              std::string::npos)
        << e.what();
  }
}

// A size or dtype that promises more bytes than the buffer has is caught at construction
// (from the driver's record of the allocation), before any kernel runs past its end.
TEST(HybridGpu, SizesBeyondTheDeviceAllocationAreRejected) {
  SKIP_WITHOUT_GPU();
  DeviceModel m(7);
  const OptimizerConfig c =
      QuantizedConfig(ExecutionMode::kGpu, 0.5, PlacementPolicy::kBackwardOrder, 256, 4);
  auto expect = [&](const std::vector<TensorSpec>& specs, const std::string& needle) {
    try {
      HybridOptimizer opt(specs, c);
      FAIL() << "no error; expected '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // The driver's record of layer7's parameter buffer (9000 bf16 elements, 18000 bytes,
  // perhaps rounded up by the allocator): every check below is relative to it.
  const std::optional<uint64_t> have = offload::DeviceBytesFrom(m.params[7]);
  ASSERT_TRUE(have.has_value());
  ASSERT_GE(*have, 18000u);
  uint8_t* p7 = static_cast<uint8_t*>(m.params[7]);
  EXPECT_EQ(offload::DeviceBytesFrom(p7 + 100), *have - 100);
  const uint64_t fits = *have / 2;  // bf16 elements that fit from the start
  auto specs = m.Specs();
  specs[7].numel = fits + 1;
  expect(specs, "'layer7': param needs " + std::to_string(2 * (fits + 1)) + " bytes (" +
                    std::to_string(fits + 1) + " elements of bf16) but its device allocation "
                    "holds only " + std::to_string(*have) + " bytes");
  // A gradient declared fp32 where 18000 bytes (9000 bf16 elements) remain.
  specs = m.Specs();
  const std::optional<uint64_t> have_g = offload::DeviceBytesFrom(m.grads[7]);
  ASSERT_TRUE(have_g.has_value());
  specs[7].grad = static_cast<uint8_t*>(m.grads[7]) + (*have_g - 18000);
  specs[7].grad_dtype = DType::kF32;
  expect(specs, "'layer7': grad needs 36000 bytes (9000 elements of f32) but its device "
                "allocation holds only 18000 bytes");
  // A view that starts inside an allocation counts only what lies after it.
  specs = m.Specs();
  specs[7].param = p7 + *have - 1000;
  specs[7].grad = static_cast<uint8_t*>(m.grads[7]) + 17000;
  specs[7].numel = 501;
  expect(specs, "'layer7': param needs 1002 bytes (501 elements of bf16) but its device "
                "allocation holds only 1000 bytes");
  specs[7].numel = 500;  // ends exactly at the end of the allocation: accepted
  EXPECT_NO_THROW(HybridOptimizer(specs, c));
}

TEST(HybridGpu, MemoryReportMatchesDeviceAllocations) {
  SKIP_WITHOUT_GPU();
  DeviceModel m(7);
  size_t free0 = 0, total = 0;
  cudaDeviceSynchronize();
  cudaMemGetInfo(&free0, &total);
  HybridOptimizer opt(m.Specs(), QuantizedConfig(ExecutionMode::kGpu, 0.5,
                                        PlacementPolicy::kBackwardOrder, 256, 4));
  size_t free1 = 0;
  cudaMemGetInfo(&free1, &total);
  const MemoryReport r = opt.memory();
  // cudaMalloc rounds each allocation up to its page (2 MiB): the report is within that.
  EXPECT_GE(free0 - free1 + (2u << 20) * 4, r.device.total());
  EXPECT_GT(r.device.total(), 0u);
  EXPECT_GT(r.host.total(), 0u);
}

}  // namespace
}  // namespace tandem
