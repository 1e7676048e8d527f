// The GPU variant of checkpoint_roundtrip_test.cc (offload_gpu_tests): a HybridOptimizer
// in GPU mode saves at one offload fraction, another loads at another fraction, policy,
// chunk size and thread count, and the next steps give bit-identical state.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "tandem/checkpoint.h"
#include "tandem/optimizer.h"
#include "tests/offload/device_model.h"
#include "tests/offload/checkpoint_resume.h"
#include "tests/offload/hybrid_fixture.h"

namespace tandem {
namespace {

using testing::QuantizedConfig;

using testing::Resume;
using testing::TempPath;

TEST(CheckpointRoundTrip, AcrossFractionsOnTheGpu) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: GPU-mode test skipped";
  const std::pair<double, double> pairs[] = {{0.0, 1.0}, {0.5, 0.25}, {1.0, 0.0}};
  for (const auto& [from, to] : pairs) {
    testing::DeviceModel a(7), b(8);
    HybridOptimizer oa(a.Specs(), QuantizedConfig(ExecutionMode::kGpu, from,
                                         PlacementPolicy::kBackwardOrder, 64, 4));
    for (int t = 1; t <= 3; ++t) {
      a.FillGrads(t);
      oa.Step(1e-3);
    }
    const std::string path = TempPath("gpu_roundtrip.tdm");
    SaveCheckpoint(oa.Snapshot(), path);
    HybridOptimizer ob(b.Specs(), QuantizedConfig(ExecutionMode::kGpu, to,
                                         PlacementPolicy::kLargestFirst, 4096, 2));
    Resume(ob, path);
    for (int t = 4; t <= 6; ++t) {
      a.FillGrads(t);
      b.FillGrads(t);
      oa.Step(1e-3);
      ob.Step(1e-3);
    }
    EXPECT_TRUE(oa.Snapshot() == ob.Snapshot()) << from << " -> " << to;
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace tandem
