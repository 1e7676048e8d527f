// The GPU-stream executor on a GPU (skipped without one): host-resident state streamed
// through the fused kernel in chunks gives the bits of every other placement. 20 steps at
// fractions 0, 0.25, 0.5, 0.75 and 1 x offload_compute host / gpu / a share / auto x
// early start off / speculative give byte-identical parameters and states (equal to host
// mode's: hybrid_gpu_test.cc compares share 0 with host mode); non-finite steps change nothing; snapshots taken right after a step see the
// streamed state; the stage times count the chunks; speculated chunks leave the
// parameters alone until Step and fail cleanly.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "tandem/error.h"
#include "tandem/faults.h"
#include "tandem/optimizer.h"
#include "tests/offload/device_model.h"
#include "tests/offload/hybrid_fixture.h"

namespace tandem {
namespace {

using testing::DeviceModel;
using testing::Model;
using testing::QuantizedConfig;

#define SKIP_WITHOUT_GPU()                                                        \
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: GPU-mode test skipped"

struct Trained {
  OptimizerSnapshot snap;
  std::vector<std::vector<uint8_t>> params;
  uint64_t stream_chunks = 0;
  uint64_t stream_speculated = 0, stream_rolled_back = 0;
};

// 20 steps with a NaN at steps 5 and 13 (skipped), clipping at every fourth step, tensor
// 2 without a gradient at step 7; speculative: BeginStep before "backward" and GradReady
// in backward order; twice: also a first "micro-batch" of other gradients announced before
// the real ones (Note [Speculating streamed chunks]: its chunks are redone).
Trained RunStreamed(OptimizerConfig c, bool speculative, bool twice = false) {
  c.speculative_early_start = speculative;
  DeviceModel m(7);
  HybridOptimizer opt(m.Specs(), c);
  Trained r;
  for (int t = 1; t <= 20; ++t) {
    const double lr = 1e-3 * (1.0 + 0.01 * t);
    std::vector<uint8_t> active(m.params.size(), 1);
    if (t == 7) active[2] = 0;
    // Plain steps' norm is about 58: only the x30 steps clip (and roll a speculation back).
    const StepOptions o{.max_grad_norm = 100.0, .active = active};
    if (speculative) opt.BeginStep(lr, o);
    if (speculative && twice) {
      m.FillGrads(t + 100);
      for (size_t i = m.params.size(); i-- > 0;) opt.GradReady(i);
    }
    m.host.FillGrads(t, t % 4 == 0 ? 3.0f : 0.1f);
    if (t == 5 || t == 13) Model::Store(m.host.grads[t == 5 ? 0 : 7].data(), m.host.grad_dtype, 3, NAN);
    for (size_t k = 0; k < m.grads.size(); ++k)
      cudaMemcpy(m.grads[k], m.host.grads[k].data(), m.host.grads[k].size(), cudaMemcpyHostToDevice);
    if (speculative)
      for (size_t i = m.params.size(); i-- > 0;) opt.GradReady(i);
    const StepResult res = opt.Step(lr, o);
    EXPECT_EQ(res.applied, t != 5 && t != 13) << t;
    const StageTimes st = opt.last_step_times();
    r.stream_chunks = std::max(r.stream_chunks, st.stream_chunks);
    r.stream_speculated += st.speculated_stream_chunks;
    r.stream_rolled_back += st.rolled_back_stream_chunks;
  }
  r.snap = opt.Snapshot();
  r.params = m.ReadParams();
  return r;
}

OptimizerConfig Cfg(ExecutionMode mode, double f, double share, uint64_t chunk_bytes) {
  OptimizerConfig c = QuantizedConfig(mode, f, PlacementPolicy::kBackwardOrder, 96, 4);
  c.offload_compute = share;
  c.stream_chunk_bytes = chunk_bytes;
  return c;
}

TEST(StreamGpu, EveryPlacementClassGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  const Trained base = RunStreamed(Cfg(ExecutionMode::kGpu, 0.0, 0.0, 4096), false);
  for (double f : {0.25, 0.5, 0.75, 1.0})
    for (double share : {0.0, 0.4, 1.0, kOffloadComputeAuto})
      for (uint64_t chunk : {uint64_t{4096}, uint64_t{1} << 20})
        for (int drive : {0, 1, 2}) {  // early start off, speculative, speculative twice
          const bool spec = drive > 0;
          if (chunk != 4096 && spec) continue;
          const Trained got =
              RunStreamed(Cfg(ExecutionMode::kGpu, f, share, chunk), spec, drive == 2);
          const std::string at = "f=" + std::to_string(f) + " compute=" +
                                 OffloadComputeName(share) + " chunk=" + std::to_string(chunk) +
                                 (spec ? " speculative" : "") + (drive == 2 ? " twice" : "");
          ASSERT_EQ(got.params, base.params) << at;
          ASSERT_TRUE(got.snap == base.snap) << at;
          if (share == 1.0) {
            EXPECT_GT(got.stream_chunks, chunk == 4096 ? 1u : 0u) << at;
            if (spec) {
              EXPECT_GT(got.stream_speculated, 0u) << at;
              EXPECT_GT(got.stream_rolled_back, 0u) << at;
            }
          }
        }
}

TEST(StreamGpu, AutoMeasuresTheMachineAndReportsItsChoice) {
  SKIP_WITHOUT_GPU();
  DeviceModel m(7);
  HybridOptimizer opt(m.Specs(), Cfg(ExecutionMode::kGpu, 1.0, kOffloadComputeAuto, 1 << 20));
  const ComputeSplit& s = opt.compute_split();
  EXPECT_GE(s.share, 0.0);
  EXPECT_LE(s.share, 1.0);
  EXPECT_GT(s.step_ms, 0.0);
  EXPECT_EQ(opt.placement().stream_share, s.share);
}

TEST(StreamGpu, StreamedStepTimesAndWaitParam) {
  SKIP_WITHOUT_GPU();
  DeviceModel m(7);
  HybridOptimizer opt(m.Specs(), Cfg(ExecutionMode::kGpu, 1.0, 1.0, 4096));
  m.FillGrads(1);
  ASSERT_TRUE(opt.Step(1e-3).applied);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  for (size_t i = 0; i < m.params.size(); ++i) opt.WaitParam(i, s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
  const StageTimes t = opt.last_step_times();
  EXPECT_GT(t.stream_chunks, 1u);
  EXPECT_GT(t.stream_ms, 0.0);
  EXPECT_EQ(t.chunks, 0u);  // nothing computed on the host
}

// A streamed copy that fails on the GPU is reported naming the chunk; the caller's stream
// is still ordered after what was queued, and restoring the snapshot taken before the step
// then stepping again gives the bits of a run that never failed.
TEST(StreamGpu, AStreamedCopyFailureIsReportedAndRecoverable) {
  SKIP_WITHOUT_GPU();
  OptimizerConfig c = Cfg(ExecutionMode::kGpu, 1.0, 1.0, 4096);
  auto step = [](HybridOptimizer& opt, int t) {
    return opt.Step(1e-3 * (1.0 + 0.01 * t), {.max_grad_norm = 5.0});
  };
  DeviceModel ref(7);
  HybridOptimizer want(ref.Specs(), c);
  for (int t = 1; t <= 3; ++t) {
    ref.FillGrads(t);
    ASSERT_TRUE(step(want, t).applied);
  }
  DeviceModel m(7);
  const auto faults = std::make_shared<FaultPlan>();
  c.faults = faults;
  HybridOptimizer opt(m.Specs(), c);
  m.FillGrads(1);
  ASSERT_TRUE(step(opt, 1).applied);
  m.FillGrads(2);
  const OptimizerSnapshot before = opt.Snapshot();
  for (uint64_t nth : {1u, 4u, 7u}) {  // chunk 0's upload, chunk 1's download, chunk 3's upload
    faults->FailCopy(nth);
    try {
      step(opt, 2);
      ADD_FAILURE() << "no error for failed copy " << nth;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kCuda);
      EXPECT_NE(e.message().find("streamed chunk " + std::to_string((nth - 1) / 2)),
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
  EXPECT_EQ(m.ReadParams(), ref.ReadParams());
  EXPECT_TRUE(opt.Snapshot() == want.Snapshot());
}

// Note [Speculating streamed chunks]: the speculation runs during "backward" without
// touching a parameter; Step keeps it (no chunk streams) and gives the plain step's bits.
// A failed speculative copy fails the Step, which then changes nothing.
TEST(StreamGpu, SpeculatedChunksWaitForStepAndFailCleanly) {
  SKIP_WITHOUT_GPU();
  OptimizerConfig c = Cfg(ExecutionMode::kGpu, 1.0, 1.0, 4096);
  DeviceModel ref(7);
  HybridOptimizer want(ref.Specs(), c);
  c.speculative_early_start = true;
  const auto faults = std::make_shared<FaultPlan>();
  c.faults = faults;
  DeviceModel m(7);
  HybridOptimizer opt(m.Specs(), c);
  const OptimizerSnapshot before = opt.Snapshot();
  const std::vector<std::vector<uint8_t>> params_before = m.ReadParams();
  // A failed download of the second speculated chunk (upload 1, download 2, upload 3, ...).
  opt.BeginStep(1e-3);
  m.FillGrads(1);
  faults->FailCopy(4);
  for (size_t i = m.params.size(); i-- > 0;) opt.GradReady(i);
  try {
    opt.Step(1e-3);
    ADD_FAILURE() << "the failed speculative copy was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCuda);
    EXPECT_NE(e.message().find("speculative"), std::string::npos) << e.message();
  }
  EXPECT_TRUE(opt.Snapshot() == before);
  EXPECT_EQ(m.ReadParams(), params_before);
  for (int t = 1; t <= 3; ++t) {
    ref.FillGrads(t);
    ASSERT_TRUE(want.Step(1e-3).applied);
    opt.BeginStep(1e-3);
    m.FillGrads(t);
    const std::vector<std::vector<uint8_t>> at_begin = m.ReadParams();
    for (size_t i = m.params.size(); i-- > 0;) opt.GradReady(i);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(m.ReadParams(), at_begin) << "a speculation wrote a parameter before Step";
    ASSERT_TRUE(opt.Step(1e-3).applied);
    const StageTimes st = opt.last_step_times();
    EXPECT_GT(st.speculated_stream_chunks, 1u);
    EXPECT_EQ(st.stream_chunks, 0u) << "every chunk was kept from the speculation";
    EXPECT_EQ(st.rolled_back_stream_chunks, 0u);
  }
  EXPECT_EQ(m.ReadParams(), ref.ReadParams());
  EXPECT_TRUE(opt.Snapshot() == want.Snapshot());
}

// Every chunk kept from the speculation queues only its parameter copies, after its
// speculative kernel, which still reads the gradients when chunks this large are still in
// flight at Step: the caller's stream is ordered after both, so a copy of the parameters
// and a zeroing of the gradients queued there right after Step (as a training loop's next
// forward and zero_grad are) see the step's parameters and leave its update alone.
TEST(StreamGpu, KeptChunksOrderTheCallersStream) {
  SKIP_WITHOUT_GPU();
  const std::vector<uint64_t> sizes = {uint64_t{8} << 20, (uint64_t{4} << 20) + 5};
  OptimizerConfig c = Cfg(ExecutionMode::kGpu, 1.0, 1.0, uint64_t{4} << 20);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  c.cuda_stream = s;
  DeviceModel ref(7, sizes);
  HybridOptimizer want(ref.Specs(), c);
  c.speculative_early_start = true;
  DeviceModel m(7, sizes);
  HybridOptimizer opt(m.Specs(), c);
  std::vector<void*> seen(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k)
    ASSERT_EQ(cudaMalloc(&seen[k], m.host.params[k].size()), cudaSuccess);
  for (int t = 1; t <= 2; ++t) {
    ref.FillGrads(t);
    ASSERT_TRUE(want.Step(1e-3).applied);
    opt.BeginStep(1e-3);
    m.FillGrads(t);
    for (size_t i = m.params.size(); i-- > 0;) opt.GradReady(i);
    ASSERT_TRUE(opt.Step(1e-3).applied);
    for (size_t k = 0; k < sizes.size(); ++k) {
      cudaMemcpyAsync(seen[k], m.params[k], m.host.params[k].size(), cudaMemcpyDeviceToDevice, s);
      cudaMemsetAsync(m.grads[k], 0, m.host.grads[k].size(), s);
    }
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const StageTimes st = opt.last_step_times();
    EXPECT_EQ(st.stream_chunks, 0u) << "every chunk was kept from the speculation";
    EXPECT_GT(st.speculated_stream_chunks, 1u);
    const std::vector<std::vector<uint8_t>> want_params = ref.ReadParams();
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<uint8_t> got(want_params[k].size());
      cudaMemcpy(got.data(), seen[k], got.size(), cudaMemcpyDeviceToHost);
      EXPECT_EQ(got, want_params[k]) << "step " << t << ", tensor " << k
                                     << ": the caller's stream ran before the kept chunks";
    }
  }
  EXPECT_EQ(m.ReadParams(), ref.ReadParams());
  EXPECT_TRUE(opt.Snapshot() == want.Snapshot());
  for (void* p : seen) cudaFree(p);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace tandem
