// The GPU-stream executor's data path in host mode (host memory standing in for the
// device's): every share of host-resident elements computed "on the GPU" gives the same
// bits as the host pipeline, at any fraction, chunk size and slot count, with inactive
// tensors and clipping; snapshots, restores and ReloadParams see streamed elements; the
// memory report and its prediction agree; bad settings are refused by name.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "tandem/error.h"
#include "tandem/faults.h"
#include "tandem/optimizer.h"
#include "tests/offload/hybrid_fixture.h"

namespace tandem {
namespace {

using testing::Model;

OptimizerConfig Config(double fraction, double share, uint64_t chunk_bytes, int slots,
                       StateFormats f = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8,
                                         MomentFormat::kQ8}) {
  OptimizerConfig c = testing::QuantizedConfig(ExecutionMode::kHost, fraction,
                                               PlacementPolicy::kBackwardOrder, 96, 2);
  c.formats = f;
  c.offload_compute = share;
  c.stream_chunk_bytes = chunk_bytes;
  c.stream_slots = slots;
  c.pipeline_slots = 3;
  return c;
}

struct Trained {
  OptimizerSnapshot snap;
  std::vector<std::vector<uint8_t>> params;
  uint64_t streamed = 0, stream_chunks = 0;
};

// 12 steps; tensor 2 has no gradient at steps 3 and 7; clipping triggers on some steps.
Trained Train(const OptimizerConfig& c, DType param = DType::kBF16, DType grad = DType::kBF16) {
  Model m;
  m.param_dtype = param;
  m.grad_dtype = grad;
  m.Init(7);
  HybridOptimizer opt(m.Specs(2), c);
  Trained r;
  for (int t = 1; t <= 12; ++t) {
    m.FillGrads(t, t % 4 == 0 ? 3.0f : 0.1f);
    std::vector<uint8_t> active(m.sizes.size(), 1);
    if (t == 3 || t == 7) active[2] = 0;
    EXPECT_TRUE(opt.Step(1e-3 * (1.0 + 0.01 * t), {.max_grad_norm = 5.0, .active = active})
                    .applied);
    r.stream_chunks = std::max(r.stream_chunks, opt.last_step_times().stream_chunks);
  }
  r.snap = opt.Snapshot();
  r.params = m.params;
  r.streamed = opt.placement().streamed;
  return r;
}

TEST(StreamHost, EveryShareGivesTheBitsOfTheHostPipeline) {
  struct Setup {
    StateFormats f;
    DType param, grad;
  };
  const Setup setups[] = {
      {{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}, DType::kBF16, DType::kBF16},
      {{MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kF32}, DType::kF32, DType::kF32},
      {{MasterFormat::kBF16Ecc16, MomentFormat::kQ8, MomentFormat::kF32}, DType::kF16, DType::kBF16},
      {{MasterFormat::kF32, MomentFormat::kQ8, MomentFormat::kQ8}, DType::kBF16, DType::kF32},
  };
  for (const Setup& s : setups) {
    const Trained base = Train(Config(0.0, 0.0, 1 << 20, 2, s.f), s.param, s.grad);
    for (double f : {0.5, 1.0})
      for (double share : {0.0, 0.3, 1.0})
        for (uint64_t chunk : {uint64_t{4096}, uint64_t{1} << 20})
          for (int slots : {2, 3}) {
            const Trained got = Train(Config(f, share, chunk, slots, s.f), s.param, s.grad);
            const std::string at = Name(s.f) + " f=" + std::to_string(f) + " share=" +
                                   std::to_string(share) + " chunk=" + std::to_string(chunk) +
                                   " slots=" + std::to_string(slots);
            ASSERT_EQ(got.params, base.params) << at;
            ASSERT_TRUE(got.snap == base.snap) << at;
            if (share > 0) {
              EXPECT_GT(got.streamed, 0u) << at;
              EXPECT_GT(got.stream_chunks, chunk == 4096 ? 1u : 0u) << at;
            } else {
              EXPECT_EQ(got.streamed, 0u) << at;
            }
          }
  }
}

TEST(StreamHost, PlacementSplitsTheHostResidentElements) {
  Model m;
  m.Init(7);
  HybridOptimizer opt(m.Specs(2), Config(0.8, 0.5, 1 << 20, 2));
  const Placement& p = opt.placement();
  EXPECT_EQ(p.stream_share, 0.5);
  EXPECT_LE(std::abs(double(p.streamed) - 0.5 * double(p.offloaded)), 32.0);
  // No rates: the split is not modelled.
  EXPECT_EQ(opt.compute_split().step_ms, 0.0);
  // auto in host mode computes everything on the host.
  OptimizerConfig c = Config(0.8, kOffloadComputeAuto, 1 << 20, 2);
  HybridOptimizer host(m.Specs(2), c);
  EXPECT_EQ(host.placement().streamed, 0u);
}

TEST(StreamHost, ModelsTheSplitWithGivenRates) {
  Model m;
  m.Init(7);
  OptimizerConfig c = Config(1.0, 0.5, 1 << 20, 2);
  c.machine_rates = MachineRates{50, 50, 6, 270};
  HybridOptimizer opt(m.Specs(2), c);
  EXPECT_EQ(opt.compute_split().share, 0.5);
  EXPECT_GT(opt.compute_split().step_ms, 0.0);
}

TEST(StreamHost, SnapshotsRestoreAcrossShares) {
  Model m;
  m.Init(7);
  HybridOptimizer streamed(m.Specs(2), Config(1.0, 1.0, 4096, 2));
  for (int t = 1; t <= 3; ++t) {
    m.FillGrads(t);
    ASSERT_TRUE(streamed.Step(1e-3).applied);
  }
  const OptimizerSnapshot snap = streamed.Snapshot();
  // Into an optimizer that computes everything on the host, and back.
  Model m2;
  m2.Init(99);
  HybridOptimizer host(m2.Specs(2), Config(0.5, 0.0, 4096, 2));
  host.Restore(snap);
  EXPECT_TRUE(host.Snapshot() == snap);
  EXPECT_EQ(m2.params, m.params);
  for (int t = 4; t <= 6; ++t) {
    m.FillGrads(t);
    m2.FillGrads(t);
    ASSERT_TRUE(streamed.Step(1e-3).applied);
    ASSERT_TRUE(host.Step(1e-3).applied);
  }
  EXPECT_TRUE(host.Snapshot() == streamed.Snapshot());
  EXPECT_EQ(m2.params, m.params);
}

// A copy of a streamed chunk that fails (injected through the FaultPlan, as a failed CUDA
// copy would) fails the step with kCuda naming the chunk and the streamed chunks applied
// before it; the step count stays, restoring the snapshot from before the step and
// stepping again gives the bits of a run that never failed, and without a restore the
// next step runs normally.
TEST(StreamHost, AStreamedCopyFailureIsReportedAndRecoverable) {
  OptimizerConfig c = Config(1.0, 1.0, 4096, 2);
  auto step = [](HybridOptimizer& opt, int t) {
    return opt.Step(1e-3 * (1.0 + 0.01 * t), {.max_grad_norm = 5.0});
  };
  Model ref;
  ref.Init(7);
  HybridOptimizer want(ref.Specs(2), c);
  for (int t = 1; t <= 3; ++t) {
    ref.FillGrads(t);
    ASSERT_TRUE(step(want, t).applied);
  }
  const uint64_t chunks = want.last_step_times().stream_chunks;
  ASSERT_GE(chunks, 3u);
  ASSERT_EQ(want.last_step_times().chunks, 0u);  // everything streamed: no pipeline copies

  Model m;
  m.Init(7);
  const auto faults = std::make_shared<FaultPlan>();
  c.faults = faults;
  HybridOptimizer opt(m.Specs(2), c);
  m.FillGrads(1);
  ASSERT_TRUE(step(opt, 1).applied);
  m.FillGrads(2);
  const OptimizerSnapshot before = opt.Snapshot();
  // Chunk k's upload is copy 2k+1, its download copy 2k+2.
  for (uint64_t nth : {1u, 2u, 5u}) {
    faults->FailCopy(nth);
    const uint64_t chunk = (nth - 1) / 2;
    const std::string which = nth % 2 == 1 ? "upload" : "download";
    try {
      step(opt, 2);
      ADD_FAILURE() << "no error for failed copy " << nth;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kCuda);
      EXPECT_NE(e.message().find("injected failure of " + which + " copy of streamed chunk " +
                                 std::to_string(chunk) + " of " + std::to_string(chunks)),
                std::string::npos)
          << e.message();
      EXPECT_NE(e.message().find("(" + std::to_string(chunk) + " streamed chunks applied)"),
                std::string::npos)
          << e.message();
    }
    EXPECT_EQ(opt.step_count(), 1);
    opt.Restore(before);
    EXPECT_TRUE(opt.Snapshot() == before);
  }
  ASSERT_TRUE(step(opt, 2).applied);
  m.FillGrads(3);
  ASSERT_TRUE(step(opt, 3).applied);
  EXPECT_EQ(m.params, ref.params);
  EXPECT_TRUE(opt.Snapshot() == want.Snapshot());

  // Without a restore: the failed step leaves the count, the next one runs.
  m.FillGrads(4);
  faults->FailCopy(4);
  EXPECT_THROW(step(opt, 4), Error);
  EXPECT_EQ(opt.step_count(), 3);
  EXPECT_TRUE(step(opt, 4).applied);
  EXPECT_EQ(opt.step_count(), 4);
}

TEST(StreamHost, ReloadParamsSeesStreamedElements) {
  for (double share : {0.0, 1.0}) {
    Model m;
    m.param_dtype = DType::kF32;
    m.Init(7);
    HybridOptimizer opt(m.Specs(2), Config(1.0, share, 4096, 2));
    m.FillGrads(1);
    ASSERT_TRUE(opt.Step(1e-3).applied);
    Model::Store(m.params[7].data(), DType::kF32, 100, 42.0f);
    const size_t which[] = {7};
    opt.ReloadParams(which);
    const OptimizerSnapshot s = opt.Snapshot();
    EXPECT_EQ(s.tensors[7].master_bf16[100], 0x4228) << share;  // bf16(42)
    EXPECT_EQ(s.tensors[7].ecc8[100], 0) << share;
  }
}

TEST(StreamHost, MemoryReportMatchesThePrediction) {
  Model m;
  m.Init(7);
  for (double share : {0.0, 0.5, 1.0}) {
    const OptimizerConfig c = Config(1.0, share, 4096, 3);
    HybridOptimizer opt(m.Specs(2), c);
    const MemoryReport got = opt.memory(), want = PredictMemory(m.Specs(2), c, ExecutionMode::kHost);
    EXPECT_EQ(got.host.total(), want.host.total()) << share;
    EXPECT_EQ(got.device.total(), want.device.total()) << share;
  }
  // GPU mode, bf16 parameters with a bf16-based master: streamed elements keep no bf16
  // master in host memory (the parameter is it), but their chunks need device slots.
  const MemoryReport host = PredictMemory(m.Specs(2), Config(1.0, 0.0, 4096, 3), ExecutionMode::kGpu);
  const MemoryReport gpu = PredictMemory(m.Specs(2), Config(1.0, 1.0, 4096, 3), ExecutionMode::kGpu);
  EXPECT_LT(gpu.host.master, host.host.master);
  EXPECT_EQ(host.device.staging, 0u);
  EXPECT_GE(gpu.device.staging, 3u * 4096 / 2);
  // By class: everything host-resident, streamed or host-computed.
  EXPECT_EQ(host.classes.streamed, 0u);
  EXPECT_EQ(host.classes.stream_slots, 0u);
  EXPECT_EQ(host.classes.gpu_resident, 0u);
  EXPECT_GT(host.classes.host_computed, 0u);
  EXPECT_EQ(gpu.classes.host_computed, 0u);
  EXPECT_EQ(gpu.classes.stream_slots, gpu.device.staging);
  EXPECT_EQ(gpu.classes.streamed + gpu.classes.host_computed,
            gpu.host.master + gpu.host.correction + gpu.host.momentum + gpu.host.variance +
                gpu.host.scales);
}

void ExpectInvalid(const OptimizerConfig& c, const char* needle) {
  Model m;
  m.Init(7);
  try {
    HybridOptimizer opt(m.Specs(2), c);
    FAIL() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(StreamHost, RefusesBadSettingsByName) {
  ExpectInvalid(Config(0.5, 1.5, 4096, 2), "offload_compute");
  ExpectInvalid(Config(0.5, -0.5, 4096, 2), "offload_compute");
  ExpectInvalid(Config(0.5, 1.0, 1000, 2), "stream_chunk_bytes");
  ExpectInvalid(Config(0.5, 1.0, 4096, 1), "stream_slots");
  OptimizerConfig c = Config(0.5, kOffloadComputeAuto, 4096, 2);
  c.machine_rates = MachineRates{50, 0, 6, 270};
  ExpectInvalid(c, "machine_rates");
}

}  // namespace
}  // namespace tandem
