// StepOptions::combine_grad_stats, the hook sharded training takes the whole model's
// gradient statistics through: a model split into two optimizers (two "ranks") whose
// hooks combine both partials in rank order steps exactly as one optimizer over the whole
// model when clipping does not trigger, takes the same clip and skip decisions on both
// shards, and a hook that throws changes nothing.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "hybrid_fixture.h"
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
      return GradStats{0.0, 1};  // skip: nothing changes
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
      EXPECT_EQ(std::bit_cast<uint64_t>(local.sum_squares),  // NaN included
                std::bit_cast<uint64_t>(partial[r].sum_squares));
      GradStats whole;
      for (const GradStats& p : partial) {
        whole.sum_squares += p.sum_squares;
        whole.nonfinite += p.nonfinite;
      }
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
      const StepResult a = ranks.Step(0, 1e-2, 1e9);
      const StepResult b = ranks.Step(1, 1e-2, 1e9);
      const StepResult r = one.Step(1e-2, {.max_grad_norm = 1e9});
      ASSERT_TRUE(a.applied && b.applied && r.applied);
      EXPECT_EQ(a.grad_norm, b.grad_norm);  // the same decision on both ranks
      EXPECT_NEAR(a.grad_norm, r.grad_norm, 1e-13 * r.grad_norm);
    }
    EXPECT_EQ(ranks.calls[0], 3);
    EXPECT_EQ(ranks.calls[1], 3);
    EXPECT_EQ(ranks.m.params, whole.params) << "fraction " << fraction;
  }
}

TEST(GradStats, ClippingUsesTheWholeModelsNorm) {
  TwoRanks ranks(0.5);
  ranks.m.FillGrads(1);
  ranks.partial[0] = ranks.Local(0);
  ranks.partial[1] = ranks.Local(1);
  const double norm =
      std::sqrt(ranks.partial[0].sum_squares + ranks.partial[1].sum_squares);
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
