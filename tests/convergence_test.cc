// Every state-format combination with an fp32 or bf16+ecc master trains the toy problems
// (minibatch gradients) to within 2% of the loss its all-fp32 counterpart reaches after
// the same number of steps; plain bf16 masters are held to their documented gap.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "tools/toy_problem.h"

namespace tandem {
namespace {

struct AlgoCase {
  const char* label;
  Algorithm algo;
  HyperParams hyper;
  double lr;
};

std::vector<AlgoCase> Cases() {
  HyperParams adam;
  adam.weight_decay = 1e-4;
  HyperParams lion;
  lion.beta1 = 0.9;
  lion.beta2 = 0.99;
  HyperParams sgd;
  sgd.momentum = 0.9;
  return {{"adamw", Algorithm::kAdamW, adam, 2e-2},
          {"adam", Algorithm::kAdam, adam, 2e-2},
          {"lion", Algorithm::kLion, lion, 3e-3},
          {"sgd", Algorithm::kSGD, sgd, 5e-2}};
}

void CheckAllFormats(const toy::Problem& p) {
  for (const AlgoCase& c : Cases()) {
    toy::RunConfig base{c.algo, c.hyper, {}, c.lr, 400};
    const double ref = toy::Train(p, base);
    const double start = p.Loss(p.Init());
    ASSERT_LT(ref, 0.8 * start) << c.label << " did not train: " << start << " -> " << ref;
    for (MasterFormat mf : {MasterFormat::kF32, MasterFormat::kBF16, MasterFormat::kBF16Ecc8,
                            MasterFormat::kBF16Ecc16}) {
      for (MomentFormat mm : {MomentFormat::kF32, MomentFormat::kQ8}) {
        for (MomentFormat vv : {MomentFormat::kF32, MomentFormat::kQ8}) {
          if (!HasVariance(c.algo) && vv == MomentFormat::kQ8) continue;
          toy::RunConfig cfg = base;
          cfg.formats = {mf, mm, vv};
          const double loss = toy::Train(p, cfg);
          std::printf("%-13s %-6s %-30s loss %.6f (f32 %.6f, %+.3f%%)\n", p.name().c_str(),
                      c.label, Name(cfg.formats).c_str(), loss, ref, 100 * (loss / ref - 1));
          if (mf == MasterFormat::kBF16) {
            // Plain bf16 masters lose every update below half a bf16 ulp (round to
            // nearest), so they stall short of the fp32 loss: the reason the ecc formats
            // exist (docs/numerics.md, "Plain bf16 master"). The gap is bounded, not hidden.
            EXPECT_LE(loss / ref - 1, 0.60) << p.name() << " " << c.label;
          } else {
            EXPECT_LE(std::fabs(loss / ref - 1), 0.02)
                << p.name() << " " << c.label << " " << Name(cfg.formats);
          }
        }
      }
    }
  }
}

TEST(Convergence, IllConditionedLeastSquares) {
  CheckAllFormats(*toy::LeastSquares(100, 400, 10.0, 3));
}

TEST(Convergence, LogisticRegression) { CheckAllFormats(*toy::Logistic(100, 400, 5)); }

}  // namespace
}  // namespace tandem
