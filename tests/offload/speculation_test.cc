// Speculative early start (BeginStep + GradReady) over host memory: the Speculator alone
// (over the host device's copy queues, with delays and failed copies), then the whole optimizer, whose
// results must be bit-identical to plain steps whatever happens in the step: committed
// speculation, a non-finite gradient (rollback, skip), clipping (rollback, normal path),
// gradients marked ready only in part or before BeginStep, a mismatched Step, forbidden
// calls mid-speculation, destruction mid-speculation, and the memory it reports.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "engine/reference_step.h"
#include "engine/tensor_state.h"
#include "offload/devices/host_stream_device.h"
#include "offload/speculation/speculator.h"
#include "engine/layout/state_layout.h"
#include "tandem/error.h"
#include "tandem/faults.h"
#include "tandem/optimizer.h"
#include "tests/offload/hybrid_fixture.h"

namespace tandem {
namespace {

using testing::Model;

// ---------------------------------------------------------------------------------------
// The Speculator alone: one f32-master tensor cut into chunks, bf16 parameters held.

struct SpecFixture {
  static constexpr size_t kN = 1000, kChunk = 96;
  StateFormats f{MasterFormat::kF32, MomentFormat::kQ8, MomentFormat::kQ8};
  HyperParams h;
  std::vector<float> w0 = std::vector<float>(kN), grad = std::vector<float>(kN);
  std::vector<float> early = std::vector<float>(kN);  // where downloads land
  std::vector<uint16_t> hold = std::vector<uint16_t>(kN);
  SpecFixture() {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    for (auto& x : w0) x = nd(rng);
    for (auto& x : grad) x = nd(rng);
  }
  std::vector<offload::OffloadChunk> Chunks(TensorState& st) {
    std::vector<offload::OffloadChunk> cs;
    for (size_t off = 0; off < kN; off += kChunk) {
      const size_t n = std::min(kChunk, kN - off);
      offload::OffloadChunk c;
      c.device_grad = grad.data() + off;
      c.grad_bytes = 4 * n;
      c.param_bytes = 2 * n;
      c.span = st.Span(off, n, nullptr, DType::kF32, nullptr, DType::kBF16);
      cs.push_back(c);
    }
    return cs;
  }
  std::unique_ptr<offload::Speculator> Make(const std::vector<offload::OffloadChunk>& cs,
                                            TensorState& backup, offload::StreamDevice* tr) {
    std::vector<StepSpan> b;
    std::vector<void*> hp;
    std::vector<const void*> eg;
    for (size_t i = 0; i < cs.size(); ++i) {
      const size_t off = i * kChunk;
      b.push_back(backup.Span(off, cs[i].span.n, nullptr, DType::kF32, nullptr, DType::kBF16));
      hp.push_back(hold.data() + off);
      eg.push_back(early.data() + off);
    }
    return std::make_unique<offload::Speculator>(&cs, b, hp, eg, tr, 2);
  }
};

// Chunk i's gradient down into the early buffer; returns the copy's ticket.
offload::Event Download(offload::StreamDevice& tr, float* early, const offload::OffloadChunk& c) {
  tr.Copy(offload::StreamDevice::Queue::kDown, early, c.device_grad, c.grad_bytes,
          offload::StreamDevice::CopyKind::kDown, {0, 1, c.grad_bytes, "gradient download"});
  return tr.Ticket(offload::StreamDevice::Queue::kDown);
}

bool SameState(const TensorState& a, const TensorState& b) {
  return a.master_f32 == b.master_f32 && a.m_codes == b.m_codes && a.m_scales == b.m_scales &&
         a.v_codes == b.v_codes && a.v_scales == b.v_scales;
}

TEST(Speculator, StepsLikeTheReferenceAndRollsBackExactly) {
  SpecFixture fx;
  TensorState st(Algorithm::kAdamW, fx.h, fx.f, fx.w0.data(), SpecFixture::kN);
  // One reference step first, so that the state rolled back to is not the initial one.
  const StepScalars s1 = ComputeStepScalars(Algorithm::kAdamW, fx.h, 1e-3, 1, 1.0);
  ReferenceStep(s1, st.Span(0, SpecFixture::kN, fx.grad.data(), DType::kF32));
  const TensorState before = st;
  TensorState ref = st, backup = st;
  std::vector<uint16_t> ref_param(SpecFixture::kN);
  const StepScalars s2 = ComputeStepScalars(Algorithm::kAdamW, fx.h, 1e-3, 2, 0.5);
  ReferenceStep(s2, ref.Span(0, SpecFixture::kN, fx.grad.data(), DType::kF32, ref_param.data(),
                             DType::kBF16));
  offload::HostStreamDevice tr(nullptr, {}, offload::kCopyQueues);
  tr.SetDelayUs(300);  // chunks are queued long before their gradients land
  std::vector<offload::OffloadChunk> cs = fx.Chunks(st);
  auto spec = fx.Make(cs, backup, &tr);
  for (int round = 0; round < 2; ++round) {  // roll back, then commit
    spec->Begin({s2}, 0);
    for (size_t i = 0; i < cs.size(); ++i)
      spec->Enqueue(i, Download(tr, fx.early.data() + i * SpecFixture::kChunk, cs[i]));
    EXPECT_EQ(spec->WaitIdle(), nullptr);
    EXPECT_EQ(spec->stepped_count(), cs.size());
    EXPECT_TRUE(SameState(st, ref)) << "round " << round;
    EXPECT_EQ(fx.hold, ref_param);
    if (round == 0) {
      EXPECT_EQ(spec->Rollback(), cs.size());
      EXPECT_TRUE(SameState(st, before));
    }
    spec->End();
  }
  EXPECT_TRUE(SameState(st, ref));
}

TEST(Speculator, AFailedDownloadIsReportedAndLeavesItsChunkUnwritten) {
  for (uint64_t fail_at : {1u, 5u, 11u}) {
    SpecFixture fx;
    TensorState st(Algorithm::kAdamW, fx.h, fx.f, fx.w0.data(), SpecFixture::kN);
    TensorState backup = st;
    const TensorState before = st;
    const auto faults = std::make_shared<FaultPlan>();
    offload::HostStreamDevice tr(nullptr, {}, offload::kCopyQueues, faults);
    std::vector<offload::OffloadChunk> cs = fx.Chunks(st);
    auto spec = fx.Make(cs, backup, &tr);
    spec->Begin({ComputeStepScalars(Algorithm::kAdamW, fx.h, 1e-3, 1, 1.0)}, 0);
    faults->FailCopy(fail_at);
    for (size_t i = 0; i < cs.size(); ++i)
      spec->Enqueue(i, Download(tr, fx.early.data() + i * SpecFixture::kChunk, cs[i]));
    const std::exception_ptr err = spec->WaitIdle();
    ASSERT_NE(err, nullptr) << fail_at;
    try {
      std::rethrow_exception(err);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kCuda);
      EXPECT_NE(std::string(e.what()).find("speculative update of tensor 0 chunk " +
                                           std::to_string(fail_at - 1)),
                std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(spec->stepped(fail_at - 1));
    EXPECT_LT(spec->stepped_count(), cs.size());
    spec->Rollback();
    spec->End();
    EXPECT_TRUE(SameState(st, before));
  }
}

TEST(Speculator, DestroyedWithChunksQueued) {
  SpecFixture fx;
  TensorState st(Algorithm::kAdamW, fx.h, fx.f, fx.w0.data(), SpecFixture::kN);
  TensorState backup = st;
  offload::HostStreamDevice tr(nullptr, {}, offload::kCopyQueues);
  tr.SetDelayUs(2000);
  std::vector<offload::OffloadChunk> cs = fx.Chunks(st);
  {
    auto spec = fx.Make(cs, backup, &tr);
    spec->Begin({ComputeStepScalars(Algorithm::kAdamW, fx.h, 1e-3, 1, 1.0)}, 0);
    for (size_t i = 0; i < cs.size(); ++i)
      spec->Enqueue(i, Download(tr, fx.early.data() + i * SpecFixture::kChunk, cs[i]));
  }  // joins after at most the chunk in progress
  tr.Drain();
}

// ---------------------------------------------------------------------------------------
// The whole optimizer in host mode.

struct Formats {
  Algorithm algo;
  StateFormats formats;
  DType param, grad;
};

const Formats kSetups[] = {
    // bf16 parameters with a bf16-based master: chunks upload from the master itself.
    {Algorithm::kAdamW,
     {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8},
     DType::kBF16,
     DType::kBF16},
    // f32 master with bf16 parameters: parameters are held until Step commits.
    {Algorithm::kAdam,
     {MasterFormat::kF32, MomentFormat::kQ8, MomentFormat::kF32},
     DType::kBF16,
     DType::kF16},
    {Algorithm::kLion,
     {MasterFormat::kBF16Ecc16, MomentFormat::kQ8, MomentFormat::kF32},
     DType::kF16,
     DType::kBF16},
    {Algorithm::kSGD,
     {MasterFormat::kBF16, MomentFormat::kQ8, MomentFormat::kF32},
     DType::kBF16,
     DType::kF32},
};

// share > 0: that share of the host-resident elements streams through host slots, in
// chunks of at most stream_bytes, of which the last spec_stream_bytes may be speculated.
OptimizerConfig Config(const Formats& s, double fraction, uint64_t chunk, bool speculative,
                       double share = 0.0, uint64_t stream_bytes = 4096,
                       uint64_t spec_stream_bytes = uint64_t{2} << 30) {
  OptimizerConfig c;
  c.offload_compute = share;
  c.stream_chunk_bytes = stream_bytes;
  c.speculative_stream_bytes = spec_stream_bytes;
  c.algorithm = s.algo;
  c.formats = s.formats;
  c.offload_fraction = fraction;
  c.chunk_elements = chunk;
  c.host_threads = 2;
  c.mode = ExecutionMode::kHost;
  c.pipeline_slots = 2;
  c.speculative_early_start = speculative;
  HyperParams g0, g1;
  g0.weight_decay = 0.01;
  g1.lr_scale = 0.5;
  if (s.algo == Algorithm::kSGD) g0.momentum = g1.momentum = 0.9;
  c.groups = {g0, g1};
  return c;
}

enum class Kind { kNormal, kNaN, kClip };
// What step t does: the same for every run compared.
Kind KindOf(int t) {
  if (t % 5 == 3) return Kind::kNaN;
  if (t % 4 == 2) return Kind::kClip;
  return Kind::kNormal;
}
constexpr double kMaxNorm = 100.0;  // normal steps: norm ~ 58; clip steps (x10, loss scale 4): ~146

// How early start is driven in a run.
enum class Drive {
  kPlain,        // Step only
  kSpeculative,  // BeginStep, GradReady for every tensor in backward order, Step
  kPartial,      // BeginStep, GradReady for two tensors of three, Step
  kLateBegin,    // GradReady for the last few tensors, then BeginStep, then the rest
  kTwice,        // BeginStep, GradReady for all on other gradients, then again on the real ones
};

struct Outcome {
  OptimizerSnapshot snap;
  std::vector<std::vector<uint8_t>> params;
  std::vector<StepResult> results;
  uint64_t speculated = 0, rolled_back = 0;
  uint64_t stream_speculated = 0, stream_rolled_back = 0;
  uint64_t stopped = 0;  // steps whose speculation stopped early (StageTimes::speculation_stopped)
};

Outcome Train(const Formats& s, const OptimizerConfig& c, Drive drive, int steps) {
  Model m;
  m.param_dtype = s.param;
  m.grad_dtype = s.grad;
  m.Init(7);
  HybridOptimizer opt(m.Specs(2), c);
  Outcome run;
  const size_t n = m.sizes.size();
  for (int t = 1; t <= steps; ++t) {
    const Kind kind = KindOf(t);
    const double lr = 1e-3 * (1.0 + 0.01 * t);
    const StepOptions o{.max_grad_norm = kMaxNorm, .loss_scale = t % 2 == 0 ? 4.0 : 1.0};
    if (drive == Drive::kSpeculative || drive == Drive::kPartial || drive == Drive::kTwice)
      opt.BeginStep(lr, o);
    if (drive == Drive::kTwice) {  // a first micro-batch whose gradients are not final
      m.FillGrads(t + 100, 0.1f);
      for (size_t i = n; i-- > 0;) opt.GradReady(i);
    }
    // "Backward": gradients become final in backward order, each announced at once.
    m.FillGrads(t, kind == Kind::kClip ? 1.0f : 0.1f);
    if (kind == Kind::kNaN) Model::Store(m.grads[t % 2 == 0 ? 7 : 0].data(), m.grad_dtype, 3, NAN);
    for (size_t i = n; i-- > 0;) {
      if (drive == Drive::kLateBegin && i == n - 4) opt.BeginStep(lr, o);
      if (drive == Drive::kPartial && i % 3 == 1) continue;
      if (drive != Drive::kPlain) opt.GradReady(i);
    }
    run.results.push_back(opt.Step(lr, o));
    EXPECT_FALSE(opt.step_begun());
    const StageTimes st = opt.last_step_times();
    run.speculated += st.speculated_chunks;
    run.rolled_back += st.rolled_back_chunks;
    run.stream_speculated += st.speculated_stream_chunks;
    run.stream_rolled_back += st.rolled_back_stream_chunks;
    run.stopped += st.speculation_stopped ? 1 : 0;
    if (kind != Kind::kNormal) {
      EXPECT_EQ(st.speculated_chunks, 0u) << "step " << t;
      EXPECT_EQ(st.speculated_stream_chunks, 0u) << "step " << t;
    }
  }
  run.snap = opt.Snapshot();
  run.params = m.params;
  return run;
}

void ExpectSameRun(const Outcome& got, const Outcome& want, const std::string& what) {
  ASSERT_EQ(got.results.size(), want.results.size());
  for (size_t i = 0; i < got.results.size(); ++i) {
    EXPECT_EQ(got.results[i].applied, want.results[i].applied) << what << " step " << i + 1;
    EXPECT_EQ(got.results[i].step, want.results[i].step) << what << " step " << i + 1;
    EXPECT_EQ(got.results[i].grad_norm, want.results[i].grad_norm) << what;
  }
  EXPECT_EQ(got.params, want.params) << what << ": parameters differ";
  EXPECT_TRUE(got.snap == want.snap) << what << ": state differs";
}

TEST(SpeculativeEarlyStart, BitIdenticalWithNonFiniteAndClippedStepsMixedIn) {
  constexpr int kSteps = 14;
  for (const Formats& s : kSetups) {
    for (double f : {0.0, 0.25, 0.5, 1.0}) {
      for (uint64_t chunk : {uint64_t{64}, uint64_t{4096}}) {
        const std::string what = std::string(Name(s.algo)) + " " + Name(s.formats) +
                                 " f=" + std::to_string(f) + " chunk=" + std::to_string(chunk);
        const Outcome plain = Train(s, Config(s, f, chunk, false), Drive::kPlain, kSteps);
        int applied = 0, skipped = 0;
        for (const StepResult& r : plain.results) (r.applied ? applied : skipped)++;
        ASSERT_GT(skipped, 0);
        ASSERT_GT(applied, skipped);
        for (Drive d : {Drive::kSpeculative, Drive::kPartial, Drive::kLateBegin}) {
          const Outcome got = Train(s, Config(s, f, chunk, true), d, kSteps);
          ExpectSameRun(got, plain, what + " drive " + std::to_string(int(d)));
          // A speculation stops taking chunks once the partials handed so far say the step
          // clips or skips; chunks still queued then are dropped, not rolled back (how many
          // depends on the worker's pace). Drive::kPartial never hands tensor 7, which holds
          // the non-finite value of step 8: every chunk speculated then is rolled back.
          if (f > 0) {
            EXPECT_GT(got.speculated, 0u) << what << ": nothing was speculated";
            if (d == Drive::kPartial)
              EXPECT_GT(got.rolled_back, 0u) << what << ": nothing was rolled back";
            else
              EXPECT_GT(got.rolled_back + got.stopped, 0u)
                  << what << " drive " << int(d) << ": neither rolled back nor stopped";
          }
        }
      }
    }
  }
}

// Note [Speculating streamed chunks]: the streamed chunks' speculation (host slots
// standing in for the device's) gives the bits of plain steps at every share, chunk size
// and speculation budget, whatever each step does.
TEST(SpeculativeEarlyStart, StreamedChunksBitIdentical) {
  constexpr int kSteps = 10;
  for (const Formats& s : kSetups) {
    for (double f : {0.5, 1.0}) {
      for (double share : {0.5, 1.0}) {
        for (uint64_t budget : {uint64_t{2} << 30, uint64_t{4096}}) {
          const std::string what = std::string(Name(s.algo)) + " " + Name(s.formats) +
                                   " f=" + std::to_string(f) + " share=" + std::to_string(share) +
                                   " budget=" + std::to_string(budget);
          const Outcome plain =
              Train(s, Config(s, f, 256, false, share), Drive::kPlain, kSteps);
          for (Drive d : {Drive::kSpeculative, Drive::kPartial, Drive::kLateBegin, Drive::kTwice}) {
            const Outcome got =
                Train(s, Config(s, f, 256, true, share, 4096, budget), d, kSteps);
            ExpectSameRun(got, plain, what + " drive " + std::to_string(int(d)));
            if (d == Drive::kPartial) continue;  // chunks of unannounced tensors never go
            EXPECT_GT(got.stream_speculated, 0u) << what << " drive " << int(d) << ": nothing was speculated";
            EXPECT_GT(got.stream_rolled_back, 0u) << what << " drive " << int(d) << ": nothing was rolled back";
          }
        }
      }
    }
  }
}

// The budget takes whole chunks from the last: the first streamed chunks never speculate.
TEST(SpeculativeEarlyStart, StreamedBudgetTakesTheLastChunks) {
  const Formats& s = kSetups[0];
  Model m;
  m.Init(7);
  HybridOptimizer opt(m.Specs(2), Config(s, 1.0, 256, true, 1.0, 4096, 3 * 4096));
  for (int t = 1; t <= 2; ++t) {
    opt.BeginStep(1e-3);
    m.FillGrads(t);
    for (size_t i = m.sizes.size(); i-- > 0;) opt.GradReady(i);
    ASSERT_TRUE(opt.Step(1e-3).applied);
    const StageTimes st = opt.last_step_times();
    EXPECT_GE(st.speculated_stream_chunks, 1u);
    EXPECT_LE(st.speculated_stream_chunks, 3u);
    EXPECT_GT(st.stream_chunks, 0u) << "chunks outside the budget stream at Step";
    EXPECT_EQ(st.rolled_back_stream_chunks, 0u);
  }
  // Budget 0: nothing speculates, nothing is allocated for it.
  OptimizerConfig none = Config(s, 1.0, 256, true, 1.0, 4096, 0);
  HybridOptimizer off(m.Specs(2), none);
  off.BeginStep(1e-3);
  m.FillGrads(3);
  for (size_t i = m.sizes.size(); i-- > 0;) off.GradReady(i);
  off.Step(1e-3);
  EXPECT_EQ(off.last_step_times().speculated_stream_chunks, 0u);
  // The spares and holding places are reported, predicted, and within the budget: at
  // most 3 chunks of state plus their bf16 parameters (2 bytes per element).
  const uint64_t extra = opt.memory().host.speculation - off.memory().host.speculation;
  EXPECT_GT(extra, 0u);
  EXPECT_LE(extra, 2 * 3 * 4096u);
  const MemoryReport pred =
      PredictMemory(m.Specs(2), Config(s, 1.0, 256, true, 1.0, 4096, 3 * 4096), ExecutionMode::kHost);
  EXPECT_EQ(pred.host.speculation, opt.memory().host.speculation);
  EXPECT_EQ(pred.host.total(), opt.memory().host.total());
  EXPECT_EQ(PredictMemory(m.Specs(2), none, ExecutionMode::kHost).host.speculation,
            off.memory().host.speculation);
}

// A speculative copy that fails fails the Step, which changes nothing; the next step
// runs normally and gives the plain run's bits.
TEST(SpeculativeEarlyStart, AFailedStreamedSpeculationChangesNothing) {
  const Formats& s = kSetups[0];
  Model a, b;
  a.Init(7);
  b.Init(7);
  OptimizerConfig cp = Config(s, 1.0, 256, false, 1.0), cs = Config(s, 1.0, 256, true, 1.0);
  auto faults = std::make_shared<FaultPlan>();
  cs.faults = faults;
  HybridOptimizer plain(a.Specs(2), cp), spec(b.Specs(2), cs);
  const OptimizerSnapshot before = spec.Snapshot();
  const std::vector<std::vector<uint8_t>> params_before = b.params;
  spec.BeginStep(1e-3);
  b.FillGrads(1);
  faults->FailCopy(4);  // the second speculated chunk's download (upload 1, download 2, ...)
  for (size_t i = b.sizes.size(); i-- > 0;) spec.GradReady(i);
  try {
    spec.Step(1e-3);
    FAIL() << "the failed speculative copy was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCuda);
    EXPECT_NE(std::string(e.what()).find("speculative update"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(spec.step_begun());
  EXPECT_TRUE(spec.Snapshot() == before) << "the failed step changed the state";
  EXPECT_EQ(b.params, params_before) << "the failed step changed the parameters";
  for (int t = 1; t <= 3; ++t) {
    a.FillGrads(t);
    plain.Step(1e-3);
    spec.BeginStep(1e-3);
    b.FillGrads(t);
    for (size_t i = b.sizes.size(); i-- > 0;) spec.GradReady(i);
    spec.Step(1e-3);
  }
  EXPECT_EQ(a.params, b.params);
  EXPECT_TRUE(plain.Snapshot() == spec.Snapshot());
}

// The clip multiplier is exactly 1 on committed steps: a speculation whose options make
// clipping impossible (max_grad_norm 0) always commits.
TEST(SpeculativeEarlyStart, CommitsEveryChunkWithoutClipping) {
  const Formats& s = kSetups[0];
  Model a, b;
  a.Init(7);
  b.Init(7);
  HybridOptimizer plain(a.Specs(2), Config(s, 0.5, 64, false));
  HybridOptimizer spec(b.Specs(2), Config(s, 0.5, 64, true));
  for (int t = 1; t <= 4; ++t) {
    a.FillGrads(t);
    plain.Step(1e-3, {.loss_scale = 8.0});
    spec.BeginStep(1e-3, {.loss_scale = 8.0});
    b.FillGrads(t);
    for (size_t i = b.sizes.size(); i-- > 0;) spec.GradReady(i);
    ASSERT_TRUE(spec.Step(1e-3, {.loss_scale = 8.0}).applied);
    const StageTimes st = spec.last_step_times();
    EXPECT_GT(st.speculated_chunks, 0u);
    EXPECT_EQ(st.rolled_back_chunks, 0u);
    EXPECT_EQ(st.chunks, st.speculated_chunks) << "every offloaded chunk was speculated";
    EXPECT_GT(st.speculative_host_ms, 0.0);
    // The hand-over's own time (BeginStep and GradReady), this step's only.
    EXPECT_GT(st.handover_ms, 0.0);
    EXPECT_EQ(plain.last_step_times().handover_ms, 0.0) << "no hand-over, no time";
  }
  EXPECT_EQ(a.params, b.params);
  EXPECT_TRUE(plain.Snapshot() == spec.Snapshot());
}

// Note [Speculating streamed chunks]: a committed chunk's state is the spare its
// speculative update wrote, so the chunk's bytes alternate between two places. Snapshot
// and Restore follow them after any number of commits, and a restored optimizer goes on
// with the bits of one never speculated.
TEST(SpeculativeEarlyStart, CommittedStreamedChunksMoveAndStateFollows) {
  const Formats& s = kSetups[0];
  Model a, b;
  a.Init(7);
  b.Init(7);
  HybridOptimizer plain(a.Specs(2), Config(s, 1.0, 256, false, 1.0));
  HybridOptimizer spec(b.Specs(2), Config(s, 1.0, 256, true, 1.0));
  auto step_both = [&](int t) {
    a.FillGrads(t);
    plain.Step(1e-3);
    spec.BeginStep(1e-3);
    b.FillGrads(t);
    for (size_t i = b.sizes.size(); i-- > 0;) spec.GradReady(i);
    ASSERT_TRUE(spec.Step(1e-3).applied);
    const StageTimes st = spec.last_step_times();
    EXPECT_GT(st.speculated_stream_chunks, 0u) << "step " << t;
    EXPECT_EQ(st.rolled_back_stream_chunks, 0u) << "step " << t;
  };
  for (int t = 1; t <= 3; ++t) {  // an odd number of commits: every chunk in its spare
    step_both(t);
    EXPECT_EQ(a.params, b.params) << "step " << t;
    EXPECT_TRUE(plain.Snapshot() == spec.Snapshot()) << "step " << t;
  }
  // Restore writes where the chunks are now; the next steps read it from there.
  Model c;
  c.Init(11);
  HybridOptimizer other(c.Specs(2), Config(s, 1.0, 256, false, 1.0));
  for (int t = 1; t <= 2; ++t) {
    c.FillGrads(t + 50);
    other.Step(1e-3);
  }
  const OptimizerSnapshot elsewhere = other.Snapshot();
  plain.Restore(elsewhere);
  spec.Restore(elsewhere);
  EXPECT_TRUE(plain.Snapshot() == spec.Snapshot());
  for (int t = 4; t <= 5; ++t) step_both(t);
  EXPECT_EQ(a.params, b.params);
  EXPECT_TRUE(plain.Snapshot() == spec.Snapshot());
}

void ExpectInvalid(const std::function<void()>& fn, const char* needle) {
  try {
    fn();
    FAIL() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SpeculativeEarlyStart, MisuseIsRefusedAndChangesNothing) {
  const Formats& s = kSetups[1];  // held parameters
  Model m, ref;
  m.param_dtype = ref.param_dtype = s.param;
  m.grad_dtype = ref.grad_dtype = s.grad;
  m.Init(7);
  ref.Init(7);
  HybridOptimizer opt(m.Specs(2), Config(s, 0.5, 64, true));
  HybridOptimizer plain(ref.Specs(2), Config(s, 0.5, 64, false));
  m.FillGrads(1);
  ref.FillGrads(1);
  opt.Step(1e-3);
  plain.Step(1e-3);
  const OptimizerSnapshot before = opt.Snapshot();
  const auto params_before = m.params;

  // Without the configuration flag, and with bad arguments: refused, nothing begun.
  ExpectInvalid([&] { plain.BeginStep(1e-3); }, "speculative_early_start");
  ExpectInvalid([&] { opt.BeginStep(NAN); }, "learning rate");
  ExpectInvalid([&] { opt.BeginStep(1e-3, {.loss_scale = -1}); }, "loss_scale");
  EXPECT_FALSE(opt.step_begun());

  // Begun and speculated on: forbidden calls change nothing.
  m.FillGrads(2);
  ref.FillGrads(2);
  opt.BeginStep(2e-3, {.max_grad_norm = 1e6});
  EXPECT_TRUE(opt.step_begun());
  for (size_t i = m.sizes.size(); i-- > 0;) opt.GradReady(i);
  ExpectInvalid([&] { opt.BeginStep(2e-3); }, "already begun");
  ExpectInvalid([&] { opt.SetHyperParams(0, opt.hyper_params(0)); },
                "SetHyperParams: a step is begun");
  ExpectInvalid([&] { opt.Snapshot(); }, "Snapshot: a step is begun");
  ExpectInvalid([&] { opt.Restore(before); }, "Restore: a step is begun");
  EXPECT_EQ(m.params, params_before) << "parameters written before Step";

  // A Step that does not match undoes everything: as before BeginStep.
  ExpectInvalid([&] { opt.Step(3e-3, {.max_grad_norm = 1e6}); }, "does not match BeginStep");
  EXPECT_FALSE(opt.step_begun());
  EXPECT_TRUE(opt.Snapshot() == before);
  EXPECT_EQ(m.params, params_before);
  ExpectInvalid(
      [&] {
        opt.BeginStep(2e-3);
        opt.Step(2e-3, {.loss_scale = 2.0});
      },
      "does not match");
  EXPECT_TRUE(opt.Snapshot() == before);
  // An invalid Step undoes it too.
  ExpectInvalid(
      [&] {
        opt.BeginStep(2e-3);
        opt.Step(-1.0);
      },
      "learning rate");
  EXPECT_TRUE(opt.Snapshot() == before);
  EXPECT_FALSE(opt.step_begun());

  // And the optimizer goes on exactly like one that never saw any of it.
  EXPECT_TRUE(opt.Step(3e-3).applied);
  EXPECT_TRUE(plain.Step(3e-3).applied);
  EXPECT_EQ(m.params, ref.params);
  EXPECT_TRUE(opt.Snapshot() == plain.Snapshot());
}

TEST(SpeculativeEarlyStart, DestroyedMidSpeculationLeavesTheParameters) {
  for (const Formats& s : {kSetups[0], kSetups[1]}) {
    Model m;
    m.param_dtype = s.param;
    m.grad_dtype = s.grad;
    m.sizes = {1 << 16, 3 << 15, 1 << 16, 77};
    m.Init(3);
    const auto params_before = m.params;
    {
      HybridOptimizer opt(m.Specs(2), Config(s, 0.75, 256, true));
      opt.BeginStep(1e-3);
      m.FillGrads(1);
      for (size_t i = m.sizes.size(); i-- > 0;) opt.GradReady(i);
    }
    EXPECT_EQ(m.params, params_before);
  }
}

// The closed form of docs/user_guide.md ("Memory") for the speculation, computed
// independently, and PredictMemory equal to the engine's report.
constexpr auto A = testing::Align256;

TEST(SpeculativeEarlyStart, MemoryReportFollowsTheClosedForm) {
  for (const Formats& s : kSetups) {
    for (double f : {0.0, 0.3, 1.0}) {
      Model m;
      m.param_dtype = s.param;
      m.grad_dtype = s.grad;
      m.Init(7);
      const OptimizerConfig off = Config(s, f, 256, false), on = Config(s, f, 256, true);
      HybridOptimizer plain(m.Specs(2), off), spec(m.Specs(2), on);
      const Placement& p = spec.placement();
      uint64_t early = 0, hold = 0;
      for (size_t t = 0; t < m.sizes.size(); ++t) {
        const uint64_t n = p.tensors[t].host_count();
        early += A(n * DTypeSize(s.grad));
        if (n > 0 && !layout::MasterAliases(s.formats.master, s.param))
          hold += A(n * DTypeSize(s.param));
      }
      const MemoryReport a = plain.memory(), b = spec.memory();
      const std::string what = std::string(Name(s.formats)) + " f=" + std::to_string(f);
      EXPECT_EQ(a.host.speculation, 0u) << what;
      // The backup is the offloaded state again; in host mode the hot state is host memory
      // too, so take the offloaded part from a GPU-mode prediction.
      const MemoryReport g = PredictMemory(m.Specs(2), off, ExecutionMode::kGpu);
      const uint64_t cold_state =
          g.host.master + g.host.correction + g.host.momentum + g.host.variance + g.host.scales;
      EXPECT_EQ(b.host.speculation, cold_state + hold) << what;
      EXPECT_EQ(b.host.staging, a.host.staging + early) << what;
      EXPECT_EQ(b.host.total(), a.host.total() + cold_state + hold + early) << what;
      EXPECT_EQ(b.device.total(), a.device.total());
      const MemoryReport pred = PredictMemory(m.Specs(2), on, ExecutionMode::kHost);
      EXPECT_EQ(pred.host.speculation, b.host.speculation) << what;
      EXPECT_EQ(pred.host.staging, b.host.staging) << what;
      EXPECT_EQ(pred.host.total(), b.host.total()) << what;
      const MemoryReport gpu_on = PredictMemory(m.Specs(2), on, ExecutionMode::kGpu);
      EXPECT_EQ(gpu_on.host.speculation, cold_state + hold) << what;
      // GradReady never allocates once the buffer exists: the report does not move.
      spec.BeginStep(1e-3);
      m.FillGrads(1);
      for (size_t i = m.sizes.size(); i-- > 0;) spec.GradReady(i);
      spec.Step(1e-3);
      EXPECT_EQ(spec.memory().host.total(), b.host.total()) << what;
    }
  }
}

TEST(SpeculativeEarlyStart, FailedBackupAllocationIsAClearError) {
  const Formats& s = kSetups[0];
  Model m;
  m.Init(7);
  // Host slabs in order: hot state, offloaded state, staging, early-start gradients, backup.
  OptimizerConfig c = Config(s, 0.5, 64, true);
  c.faults = std::make_shared<FaultPlan>();
  c.faults->FailAllocation(MemoryKind::kHost, 5);
  try {
    HybridOptimizer opt(m.Specs(2), c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("speculation backup"), std::string::npos) << e.what();
  }
  c.faults->FailAllocation(MemoryKind::kHost, 0);
  EXPECT_NO_THROW(HybridOptimizer(m.Specs(2), c));
}

}  // namespace
}  // namespace tandem
