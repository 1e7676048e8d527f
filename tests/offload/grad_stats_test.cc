// StepOptions::combine_grad_stats, the hook sharded training takes the whole model's
// gradient statistics through: a model split into two optimizers (two "ranks") whose
// hooks add both partials (AddGradStats) steps bit for bit as one optimizer over the
// whole model, clipping included (the exact sum of squares: Note [Exact sum of squares]),
// takes the same skip decisions on both shards, and a hook that throws changes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "engine/fp_bits.h"
#include "hybrid_fixture.h"
#include "offload/prepass/grad_stats.h"
#include "tandem/error.h"
#include "tandem/optimizer.h"

namespace tandem {
namespace {

using testing::Model;

OptimizerConfig Config(double fraction) {
  OptimizerConfig c;
  c.algorithm = Algorithm::kAdamW;
  c.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  c.offload_fraction = fraction;
  c.mode = ExecutionMode::kHost;
  c.chunk_elements = 1024;
  c.host_threads = 2;
  return c;
}

// The specs of tensors [begin, end) of `m`.
std::vector<TensorSpec> Slice(Model& m, size_t begin, size_t end) {
  std::vector<TensorSpec> all = m.Specs(1);
  return {all.begin() + static_cast<std::ptrdiff_t>(begin),
          all.begin() + static_cast<std::ptrdiff_t>(end)};
}

// Two optimizers over the two halves of one model; each Step exchanges the partials
// through `partial` (this step's, by rank) the way an all-gather would.
struct TwoRanks {
  Model m;
  std::unique_ptr<HybridOptimizer> rank[2];
  GradStats partial[2];
  int calls[2] = {0, 0};
  size_t split = 5;

  explicit TwoRanks(double fraction) {
    m.Init(7);
    rank[0] = std::make_unique<HybridOptimizer>(Slice(m, 0, split), Config(fraction));
    rank[1] = std::make_unique<HybridOptimizer>(Slice(m, split, m.sizes.size()),
                                                Config(fraction));
  }
  GradStats Local(int r) {
    // This rank's own statistics: a step whose hook only records them and skips.
    GradStats seen;
    StepOptions o;
    o.combine_grad_stats = [&seen](const GradStats& s) {
      seen = s;
      GradStats skip;
      skip.nonfinite = 1;  // nothing changes
      return skip;
    };
    EXPECT_FALSE(rank[r]->Step(1e-2, o).applied);
    return seen;
  }
  // Steps both ranks with the partials combined in rank order.
  StepResult Step(int r, double lr, double clip) {
    StepOptions o;
    o.max_grad_norm = clip;
    o.combine_grad_stats = [this, r](const GradStats& local) {
      ++calls[r];
      EXPECT_EQ(local.exact, partial[r].exact);
      EXPECT_EQ(local.nonfinite, partial[r].nonfinite);
      GradStats whole;
      for (const GradStats& p : partial) AddGradStats(whole, p);
      return whole;
    };
    return rank[r]->Step(lr, o);
  }
};

TEST(GradStats, TwoShardsStepLikeOneOptimizer) {
  for (double fraction : {0.0, 0.5, 1.0}) {
    TwoRanks ranks(fraction);
    Model whole;
    whole.Init(7);
    HybridOptimizer one(whole.Specs(1), Config(fraction));
    for (int t = 0; t < 3; ++t) {
      ranks.m.FillGrads(t);
      whole.FillGrads(t);
      ranks.partial[0] = ranks.Local(0);
      ranks.partial[1] = ranks.Local(1);
      // Clipping triggers (the norms are ~10): the whole model's norm decides it.
      const StepResult a = ranks.Step(0, 1e-2, 1.0);
      const StepResult b = ranks.Step(1, 1e-2, 1.0);
      const StepResult r = one.Step(1e-2, {.max_grad_norm = 1.0});
      ASSERT_TRUE(a.applied && b.applied && r.applied);
      EXPECT_GT(r.grad_norm, 1.0);
      EXPECT_EQ(a.grad_norm, b.grad_norm);  // the same decision on both ranks
      EXPECT_EQ(a.grad_norm, r.grad_norm);  // and the unsharded one's, to the bit
    }
    EXPECT_EQ(ranks.calls[0], 3);
    EXPECT_EQ(ranks.calls[1], 3);
    EXPECT_EQ(ranks.m.params, whole.params) << "fraction " << fraction;
  }
}

TEST(GradStats, ShardsCutBetweenRunsSumExactly) {
  // A [37, 96] bf16 tensor cut between rows and a 1-D f32 vector cut anywhere: the parts'
  // exact sums add up to the whole's, to the bit, at every cut.
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<uint16_t> m(37 * 96);
  std::vector<float> v(1001);
  for (auto& x : m) x = num::F32ToBf16(nd(rng));
  for (auto& x : v) x = nd(rng) * 1e-3f;
  auto stats = [&](size_t r0, size_t r1, size_t e0, size_t e1) {
    return offload::ToGradStats(offload::HostGradNorm(
        {{m.data() + r0 * 96, (r1 - r0) * 96, DType::kBF16, 96},
         {v.data() + e0, e1 - e0, DType::kF32, 1}}));
  };
  const GradStats whole = stats(0, 37, 0, 1001);
  for (size_t cut = 0; cut <= 37; cut += 6) {
    GradStats sum;
    AddGradStats(sum, stats(cut, 37, cut * 27, 1001));  // any order
    AddGradStats(sum, stats(0, cut, 0, cut * 27));
    EXPECT_EQ(sum.exact, whole.exact) << "cut at row " << cut;
    EXPECT_EQ(sum.sum_squares, whole.sum_squares);
  }
}

TEST(GradStats, ClippingUsesTheWholeModelsNorm) {
  TwoRanks ranks(0.5);
  ranks.m.FillGrads(1);
  ranks.partial[0] = ranks.Local(0);
  ranks.partial[1] = ranks.Local(1);
  GradStats both;
  AddGradStats(both, ranks.partial[0]);
  AddGradStats(both, ranks.partial[1]);
  const double norm = std::sqrt(both.sum_squares);
  const StepResult a = ranks.Step(0, 1e-2, norm / 4);
  const StepResult b = ranks.Step(1, 1e-2, norm / 4);
  EXPECT_EQ(a.grad_norm, norm);
  EXPECT_EQ(b.grad_norm, norm);
  // Rank 0 alone would see a smaller norm; its clip follows the whole model's.
  EXPECT_LT(std::sqrt(ranks.partial[0].sum_squares), norm);
}

TEST(GradStats, ANonFiniteGradientOnOneRankSkipsBoth) {
  TwoRanks ranks(0.5);
  ranks.m.FillGrads(1);
  ASSERT_TRUE(ranks.rank[0]->Step(1e-2).applied);
  ASSERT_TRUE(ranks.rank[1]->Step(1e-2).applied);
  const OptimizerSnapshot before = ranks.rank[0]->Snapshot();
  const auto params = ranks.m.params;
  ranks.m.FillGrads(2);
  Model::Store(ranks.m.grads[7].data(), ranks.m.grad_dtype, 100,
               std::numeric_limits<float>::quiet_NaN());  // on rank 1
  ranks.partial[0] = ranks.Local(0);
  ranks.partial[1] = ranks.Local(1);
  EXPECT_EQ(ranks.partial[0].nonfinite, 0u);
  EXPECT_NE(ranks.partial[1].nonfinite, 0u);
  EXPECT_FALSE(ranks.Step(0, 1e-2, 0).applied);
  EXPECT_FALSE(ranks.Step(1, 1e-2, 0).applied);
  EXPECT_TRUE(ranks.rank[0]->Snapshot() == before);
  EXPECT_EQ(ranks.m.params, params);
}

TEST(GradStats, AHookThatThrowsChangesNothing) {
  Model m;
  m.Init(7);
  HybridOptimizer opt(m.Specs(1), Config(0.5));
  m.FillGrads(1);
  ASSERT_TRUE(opt.Step(1e-2).applied);
  const OptimizerSnapshot before = opt.Snapshot();
  const auto params = m.params;
  m.FillGrads(2);
  StepOptions o;
  o.combine_grad_stats = [](const GradStats&) -> GradStats {
    throw std::runtime_error("collective timed out");
  };
  EXPECT_THROW(opt.Step(1e-2, o), std::runtime_error);
  EXPECT_TRUE(opt.Snapshot() == before);
  EXPECT_EQ(m.params, params);
  EXPECT_EQ(opt.step_count(), 1);
  EXPECT_TRUE(opt.Step(1e-2).applied);  // and it goes on
}

}  // namespace
}  // namespace tandem
