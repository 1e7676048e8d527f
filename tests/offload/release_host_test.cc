// Gradient release (OptimizerConfig::release_grads, Note [Gradient release] in
// tandem/optimizer.h) in host mode: once GradConsumed(i) says so, the caller overwrites
// tensor i's gradient with garbage (as a freed and reused gradient would read), and the
// steps still give the bits of plain steps that read the gradients at Step: at every
// fraction, offload_compute share (the host stream device models the GPU's streamed
// chunks), with and without speculation, through steps that clip and a non-finite step.
// The refusals (a second GradReady, GradConsumed without release) change nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tests/offload/hybrid_fixture.h"
#include "tests/offload/release_config.h"

namespace tandem {
namespace {

using testing::Model;

OptimizerConfig Config(double fraction, double share, bool release, bool speculative,
                       uint64_t in_place = 0) {
  return testing::ReleaseTestConfig(ExecutionMode::kHost, fraction, share, release, speculative,
                                    in_place);
}

constexpr double kMaxNorm = 100.0;  // normal steps: norm ~ 58; steps 2, 6, 10: ~146

struct Outcome {
  OptimizerSnapshot snap;
  std::vector<std::vector<uint8_t>> params;
  std::vector<StepResult> results;
};

// 12 steps; steps 2, 6 and 10 clip, step 7 has a NaN in the first tensor handed over
// (backward order: the last one), and the loss scale alternates. With early: GradReady in
// backward order; with release, each gradient is clobbered as soon as it is consumed.
Outcome Train(const OptimizerConfig& c, bool early) {
  Model m;
  m.Init(11);
  HybridOptimizer opt(m.Specs(2), c);
  Outcome run;
  const size_t n = m.sizes.size();
  for (int t = 1; t <= 12; ++t) {
    const double lr = 1e-3 * (1.0 + 0.01 * t);
    const StepOptions o{.max_grad_norm = kMaxNorm, .loss_scale = t % 2 == 0 ? 4.0 : 1.0};
    if (c.speculative_early_start) opt.BeginStep(lr, o);
    m.FillGrads(t, t % 4 == 2 ? 1.0f : 0.1f);
    if (t == 7) Model::Store(m.grads[n - 1].data(), m.grad_dtype, 5, NAN);
    for (size_t i = n; early && i-- > 0;) {
      opt.GradReady(i);
      if (!c.release_grads) continue;
      opt.WaitGradConsumed(i, nullptr);  // host mode: blocks until the reads completed
      EXPECT_TRUE(opt.GradConsumed(i)) << "step " << t << " tensor " << i;
      for (uint8_t& b : m.grads[i]) b = 0x7f;  // the memory is reused: 0x7f7f, huge
    }
    run.results.push_back(opt.Step(lr, o));
  }
  run.snap = opt.Snapshot();
  run.params = m.params;
  return run;
}

void ExpectSameRun(const Outcome& got, const Outcome& want, const std::string& what) {
  ASSERT_EQ(got.results.size(), want.results.size());
  for (size_t i = 0; i < got.results.size(); ++i) {
    EXPECT_EQ(got.results[i].applied, want.results[i].applied) << what << " step " << i + 1;
    EXPECT_EQ(got.results[i].grad_norm, want.results[i].grad_norm) << what << " step " << i + 1;
  }
  EXPECT_EQ(got.params, want.params) << what << ": parameters differ";
  EXPECT_TRUE(got.snap == want.snap) << what << ": state differs";
}

TEST(GradRelease, BitIdenticalAtEveryFractionAndShare) {
  for (double f : {0.0, 0.5, 1.0}) {
    for (double share : {0.0, 0.5, 1.0}) {
      const std::string what = "f=" + std::to_string(f) + " share=" + std::to_string(share);
      const Outcome plain = Train(Config(f, share, false, false), false);
      int applied = 0, clipped = 0;
      for (const StepResult& r : plain.results) {
        applied += r.applied ? 1 : 0;
        clipped += r.applied && r.grad_norm > kMaxNorm ? 1 : 0;
      }
      ASSERT_EQ(applied, 11) << what << ": the NaN step is skipped, the others applied";
      ASSERT_GT(clipped, 0) << what << ": clipping never triggered";
      ExpectSameRun(Train(Config(f, share, true, false), true), plain, what + " release");
      ExpectSameRun(Train(Config(f, share, true, true), true), plain,
                    what + " release+speculation");
      // Every gradient read in place, then a budget that keeps one or two at a time.
      for (const uint64_t in_place : {uint64_t{1} << 20, testing::kSomeInPlaceBytes})
        ExpectSameRun(Train(Config(f, share, true, true, in_place), true), plain,
                      what + " release+speculation, in place " + std::to_string(in_place));
      ExpectSameRun(Train(Config(f, share, false, true), true), plain, what + " speculation");
    }
  }
}

TEST(GradRelease, TheGradientsAreCountedAndPredicted) {
  Model m;
  m.Init(3);
  for (double share : {0.0, 1.0}) {
    const OptimizerConfig with = Config(0.5, share, true, false);
    const OptimizerConfig without = Config(0.5, share, false, false);
    HybridOptimizer a(m.Specs(2), with), b(m.Specs(2), without);
    // Host mode: the hot part's copy in `host` too.
    EXPECT_GT(a.memory().host.grads, 0u) << "share " << share;
    EXPECT_EQ(b.memory().host.grads, 0u);
    const MemoryReport pred = PredictMemory(m.Specs(2), with, ExecutionMode::kHost);
    EXPECT_EQ(pred.host.grads, a.memory().host.grads);
    EXPECT_EQ(pred.host.total(), a.memory().host.total());
  }
}

// Note [Reading the handed gradient in place] (offload/executors/gpu_stream.h): every
// element streamed, with an in-place budget the chunks speculated during backward read the
// gradient whose hand-over completed them where it was handed over, so a step that keeps
// its speculation uploads fewer released gradient bytes than a step without speculation
// (every chunk's gradient area, at least the gradients' bytes) or without the budget; a
// clipped step uploads them all again at Step. The caller clobbers each gradient once
// consumed, so a kernel that read it after its fence would change the bits
// (GradRelease.BitIdenticalAtEveryFractionAndShare checks them).
TEST(GradRelease, SpeculatedChunksReadTheHandedGradientInPlace) {
  Model m;
  m.Init(7);
  uint64_t grad_bytes = 0;
  for (uint64_t n : m.sizes) grad_bytes += n * DTypeSize(m.grad_dtype);
  uint64_t all = 0;                  // what a step without speculation uploads
  for (const int run : {0, 1, 2}) {  // release only; speculation without, with a budget
    const bool speculative = run > 0;
    HybridOptimizer opt(m.Specs(2), Config(1.0, 1.0, true, speculative, run == 2 ? 1 << 20 : 0));
    for (int t = 1; t <= 4; ++t) {
      const bool clips = t == 3;
      const StepOptions o{.max_grad_norm = kMaxNorm};
      if (speculative) opt.BeginStep(1e-3, o);
      m.FillGrads(t, clips ? 1.0f : 0.1f);
      for (size_t i = m.sizes.size(); i-- > 0;) {
        opt.GradReady(i);
        opt.WaitGradConsumed(i, nullptr);
        for (uint8_t& b : m.grads[i]) b = 0x7f;
      }
      const StepResult r = opt.Step(1e-3, o);
      const StageTimes st = opt.last_step_times();
      const std::string what = "run " + std::to_string(run) + ", step " + std::to_string(t);
      ASSERT_TRUE(r.applied) << what;
      EXPECT_EQ(r.grad_norm > kMaxNorm, clips) << what << ": norm " << r.grad_norm;
      if (!speculative) {
        if (t == 1) all = st.released_grad_up_bytes;
        EXPECT_GE(st.released_grad_up_bytes, grad_bytes) << what;
        EXPECT_EQ(st.released_grad_up_bytes, all) << what;
      } else if (clips) {
        EXPECT_EQ(st.speculated_stream_chunks, 0u) << what;
        EXPECT_GE(st.released_grad_up_bytes, all) << what;
      } else {
        EXPECT_GT(st.speculated_stream_chunks, 0u) << what;
        if (run == 1)  // kept chunks uploaded their gradients during backward
          EXPECT_EQ(st.released_grad_up_bytes, all) << what;
        else
          EXPECT_LT(st.released_grad_up_bytes, all) << what;
      }
    }
  }
}

TEST(GradRelease, ASecondGradReadyIsRefusedAndChangesNothing) {
  Model m, ref;
  m.Init(5);
  ref.Init(5);
  HybridOptimizer opt(m.Specs(2), Config(0.5, 0.5, true, false));
  HybridOptimizer plain(ref.Specs(2), Config(0.5, 0.5, false, false));
  m.FillGrads(1);
  ref.FillGrads(1);
  for (size_t i = m.sizes.size(); i-- > 0;) opt.GradReady(i);
  try {
    opt.GradReady(3);
    FAIL() << "a second GradReady under release_grads was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("layer3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos) << e.what();
  }
  const StepResult got = opt.Step(1e-3), want = plain.Step(1e-3);
  EXPECT_EQ(got.grad_norm, want.grad_norm);
  EXPECT_EQ(m.params, ref.params);
  EXPECT_TRUE(opt.Snapshot() == plain.Snapshot());
}

// DiscardStep drops a step's early work (hand-overs, released copies, speculated chunks
// rolled back): the optimizer is as before, and the step taken again from other gradients
// gives the bits of an optimizer that never saw the discarded ones.
TEST(GradRelease, DiscardStepForgetsTheHandedGradients) {
  for (const bool speculative : {false, true}) {
    for (const bool release : {false, true}) {
      const std::string what = std::string(release ? "release" : "early start") +
                                (speculative ? "+speculation" : "");
      Model m, ref;
      m.Init(5);
      ref.Init(5);
      HybridOptimizer opt(m.Specs(2), Config(0.5, 0.5, release, speculative));
      HybridOptimizer plain(ref.Specs(2), Config(0.5, 0.5, false, false));
      const OptimizerSnapshot before = opt.Snapshot();
      opt.DiscardStep();  // nothing under way: a no-op
      if (speculative) opt.BeginStep(1e-3);
      m.FillGrads(1, 1.0f);
      for (size_t i = m.sizes.size(); i-- > 0;) opt.GradReady(i);
      opt.DiscardStep();
      EXPECT_FALSE(opt.step_begun()) << what;
      EXPECT_TRUE(opt.Snapshot() == before) << what << ": the discarded step changed the state";
      m.FillGrads(2, 0.1f);
      ref.FillGrads(2, 0.1f);
      if (speculative) opt.BeginStep(1e-3);
      for (size_t i = m.sizes.size(); i-- > 0;) opt.GradReady(i);  // no "second time" now
      const StepResult got = opt.Step(1e-3), want = plain.Step(1e-3);
      EXPECT_EQ(got.grad_norm, want.grad_norm) << what;
      EXPECT_EQ(m.params, ref.params) << what;
      EXPECT_TRUE(opt.Snapshot() == plain.Snapshot()) << what;
    }
  }
}

// A Restore between the hand-overs and Step (a checkpoint loaded after backward) keeps
// the step's released gradients: the caller has freed them, and the engine's copies are
// all that is left. The Step then steps the restored state with them, as an optimizer
// restored before backward steps it with the same gradients. A begun step (speculation)
// refuses the Restore and keeps going.
TEST(GradRelease, RestoreKeepsTheHandedGradientsForTheStep) {
  for (double f : {0.0, 0.5, 1.0}) {
    for (double share : {0.0, 1.0}) {
      const std::string what = "f=" + std::to_string(f) + " share=" + std::to_string(share);
      Model m, ref;
      m.Init(9);
      ref.Init(9);
      HybridOptimizer opt(m.Specs(2), Config(f, share, true, false));
      HybridOptimizer plain(ref.Specs(2), Config(f, share, false, false));
      for (int t = 1; t <= 2; ++t) {  // both at the state to restore
        m.FillGrads(t);
        ref.FillGrads(t);
        for (size_t i = m.sizes.size(); i-- > 0;) opt.GradReady(i);
        opt.Step(1e-3);
        plain.Step(1e-3);
      }
      const OptimizerSnapshot saved = opt.Snapshot();
      m.FillGrads(3);
      for (size_t i = m.sizes.size(); i-- > 0;) opt.GradReady(i);
      opt.Step(1e-3);  // moves on; the restore brings it back
      m.FillGrads(4);
      for (size_t i = m.sizes.size(); i-- > 0;) {
        opt.GradReady(i);
        opt.WaitGradConsumed(i, nullptr);
        for (uint8_t& b : m.grads[i]) b = 0x7f;  // freed and reused
      }
      opt.Restore(saved);
      ref.FillGrads(4);
      const StepResult got = opt.Step(1e-3), want = plain.Step(1e-3);
      EXPECT_TRUE(got.applied) << what;
      EXPECT_EQ(got.grad_norm, want.grad_norm) << what;
      EXPECT_EQ(m.params, ref.params) << what;
      EXPECT_TRUE(opt.Snapshot() == plain.Snapshot()) << what;
    }
  }
  Model m;
  m.Init(9);
  HybridOptimizer opt(m.Specs(2), Config(0.5, 0.5, true, true));
  const OptimizerSnapshot saved = opt.Snapshot();
  opt.BeginStep(1e-3);
  m.FillGrads(1);
  for (size_t i = m.sizes.size(); i-- > 0;) opt.GradReady(i);
  EXPECT_THROW(opt.Restore(saved), Error);
  EXPECT_TRUE(opt.Step(1e-3).applied);
}

TEST(GradRelease, GradConsumedNeedsReleaseAndAValidIndex) {
  Model m;
  m.Init(5);
  HybridOptimizer plain(m.Specs(2), Config(0.5, 0.0, false, false));
  EXPECT_THROW((void)plain.GradConsumed(0), Error);
  HybridOptimizer rel(m.Specs(2), Config(0.5, 0.0, true, false));
  EXPECT_TRUE(rel.GradConsumed(0));  // never handed over
  try {
    (void)rel.GradConsumed(m.sizes.size());
    FAIL() << "a bad index was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

}  // namespace
}  // namespace tandem
