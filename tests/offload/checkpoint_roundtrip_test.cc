// Checkpoints of a running HybridOptimizer: save at one offload fraction, load into an
// optimizer at another (and another policy, chunk size and thread count), and the next
// steps are bit-identical to those of the optimizer that saved. A damaged file or a
// mismatched layout is refused and the optimizer in memory is unchanged. Host mode
// here; the GPU variant is checkpoint_roundtrip_gpu_test.cc (offload_gpu_tests).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tests/offload/checkpoint_resume.h"
#include "tests/offload/hybrid_fixture.h"

namespace tandem {
namespace {

using testing::Model;
using testing::QuantizedConfig;

using testing::Resume;
using testing::TempPath;

TEST(CheckpointRoundTrip, AcrossFractionsInHostMode) {
  const std::pair<double, double> pairs[] = {{0.0, 1.0}, {0.5, 0.25}, {1.0, 0.0}};
  for (const auto& [from, to] : pairs) {
    Model a, b;
    a.Init(7);
    b.Init(8);
    HybridOptimizer oa(a.Specs(2), QuantizedConfig(ExecutionMode::kHost, from,
                                          PlacementPolicy::kBackwardOrder, 64, 2));
    for (int t = 1; t <= 3; ++t) {
      a.FillGrads(t);
      oa.Step(1e-3, {.max_grad_norm = 5.0});
    }
    const std::string path = TempPath("roundtrip.tdm");
    SaveCheckpoint(oa.Snapshot(), path);
    HybridOptimizer ob(b.Specs(2), QuantizedConfig(ExecutionMode::kHost, to,
                                          PlacementPolicy::kLargestFirst, 4096, 1));
    Resume(ob, path);
    EXPECT_EQ(ob.step_count(), 3);
    for (int t = 4; t <= 6; ++t) {
      a.FillGrads(t);
      b.FillGrads(t);
      oa.Step(1e-3, {.max_grad_norm = 5.0});
      ob.Step(1e-3, {.max_grad_norm = 5.0});
    }
    EXPECT_EQ(a.params, b.params) << from << " -> " << to;
    EXPECT_TRUE(oa.Snapshot() == ob.Snapshot()) << from << " -> " << to;
    std::remove(path.c_str());
  }
}

TEST(CheckpointRoundTrip, DamagedOrForeignFileLeavesTheOptimizerUntouched) {
  Model a, b;
  a.Init(7);
  b.Init(8);
  HybridOptimizer oa(a.Specs(2), QuantizedConfig(ExecutionMode::kHost, 0.5,
                                        PlacementPolicy::kBackwardOrder, 64, 2));
  a.FillGrads(1);
  oa.Step(1e-3);
  const std::string path = TempPath("damaged.tdm");
  SaveCheckpoint(oa.Snapshot(), path);
  HybridOptimizer ob(b.Specs(2), QuantizedConfig(ExecutionMode::kHost, 0.25,
                                        PlacementPolicy::kBackwardOrder, 64, 2));
  const OptimizerSnapshot before = ob.Snapshot();
  const auto params_before = b.params;
  // A flipped bit in the middle of the file.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const auto size = f.tellg();
    f.seekg(size / 2);
    char c;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(size / 2);
    f.write(&c, 1);
  }
  try {
    Resume(ob, path);
    FAIL() << "damaged checkpoint accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCorruption) << e.what();
  }
  EXPECT_TRUE(ob.Snapshot() == before);
  EXPECT_EQ(b.params, params_before);
  // A checkpoint of another model layout.
  Model c;
  c.sizes.pop_back();
  c.Init(7);
  HybridOptimizer oc(c.Specs(2), QuantizedConfig(ExecutionMode::kHost, 0.5,
                                        PlacementPolicy::kBackwardOrder, 64, 2));
  SaveCheckpoint(oc.Snapshot(), path);
  try {
    Resume(ob, path);
    FAIL() << "foreign checkpoint accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
  }
  EXPECT_TRUE(ob.Snapshot() == before);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tandem
