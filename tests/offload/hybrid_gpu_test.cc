// HybridOptimizer in GPU mode (skipped without a CUDA device): the same random,
// model-shaped problem stepped 20 times at fractions 0, 0.25, 0.5, 0.75 and 1, under each
// placement policy, chunk size and thread count, gives byte-identical parameters and state,
// equal to host mode's; a non-finite gradient changes nothing; device pointers are checked.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tandem/error.h"
#include "tandem/optimizer.h"
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
