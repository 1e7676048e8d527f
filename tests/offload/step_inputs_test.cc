// What a step is handed, host mode: each group's learning rate and hyper-parameters as
// torch.optim and Megatron hand them (Step(group_lrs), StepOptions::group_hyper), and the
// gradient of each tensor (StepOptions::grads, GradReady(i, grad)). Each new form is
// compared byte for byte with the form it replaces (lr_scale, SetHyperParams, the
// construction's gradient buffers), across placement classes, with and without
// speculative early start; bad inputs change nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "hybrid_fixture.h"
#include "tandem/error.h"
#include "tests/expect_error.h"
#include "tandem/optimizer.h"

namespace tandem {
namespace {

using testing::Model;

struct Case {
  const char* name;
  double fraction;
  double share;  // offload_compute
  bool speculative;
};
// Every placement class (GPU-resident stands in as host-resident here), streamed chunks
// and the host pipeline, with and without speculative early start.
const Case kCases[] = {{"resident", 0.0, 0.0, false},  {"pipeline", 0.6, 0.0, false},
                       {"streamed", 0.6, 1.0, false},  {"split", 1.0, 0.5, false},
                       {"split_spec", 1.0, 0.5, true}, {"pipeline_spec", 0.6, 0.0, true}};

OptimizerConfig Config(const Case& s, std::vector<HyperParams> groups) {
  OptimizerConfig c;
  c.algorithm = Algorithm::kAdamW;
  c.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  c.offload_fraction = s.fraction;
  c.offload_compute = s.share;
  c.mode = ExecutionMode::kHost;
  c.chunk_elements = 1024;
  c.stream_chunk_bytes = 8192;
  c.host_threads = 2;
  c.speculative_early_start = s.speculative;
  c.groups = std::move(groups);
  return c;
}

std::vector<HyperParams> TwoGroups(double scale1 = 1.0) {
  std::vector<HyperParams> g(2);
  g[0].weight_decay = 0.01;
  g[1].lr_scale = scale1;
  g[1].weight_decay = 0.1;
  return g;
}

// The parameters and every tensor's state, without the groups (which record lr_scale).
struct Result {
  std::vector<std::vector<uint8_t>> params;
  std::vector<TensorSnapshot> tensors;
  int64_t step = 0;
};
Result Take(const Model& m, const HybridOptimizer& opt) {
  return {m.params, opt.Snapshot().tensors, opt.step_count()};
}
void ExpectSame(const Result& a, const Result& b, const std::string& what) {
  EXPECT_EQ(a.step, b.step) << what;
  ASSERT_EQ(a.params.size(), b.params.size()) << what;
  for (size_t k = 0; k < a.params.size(); ++k)
    EXPECT_TRUE(a.params[k] == b.params[k]) << what << ": parameter " << k;
  ASSERT_EQ(a.tensors.size(), b.tensors.size()) << what;
  for (size_t k = 0; k < a.tensors.size(); ++k)
    EXPECT_TRUE(a.tensors[k] == b.tensors[k]) << what << ": state of tensor " << k;
}

// Steps `opt` over m's gradients of steps 0..steps-1 with step(t, opt); with early start
// (setup.speculative) each step is announced by begin(t, opt) and the gradients are marked
// ready in backward order by ready(k, opt).
void Train(Model& m, HybridOptimizer& opt, const Case& setup, int steps,
           const std::function<void(int, HybridOptimizer&)>& begin,
           const std::function<void(size_t, HybridOptimizer&)>& ready,
           const std::function<StepResult(int, HybridOptimizer&)>& step) {
  for (int t = 0; t < steps; ++t) {
    if (setup.speculative) begin(t, opt);
    m.FillGrads(t);
    if (setup.speculative)
      for (size_t k = m.sizes.size(); k-- > 0;) ready(k, opt);
    EXPECT_TRUE(step(t, opt).applied) << setup.name << " step " << t;
  }
}

double LrAt(int t) { return 1e-2 * (1.0 + 0.25 * t); }
double RatioAt(int t) { return 0.3 + 0.2 * t; }  // group 1's lr / group 0's, moving

// Per-group learning rates that move differently at every step give the bits of the one-lr
// form with each step's ratio set as lr_scale (the path the binding takes today).
TEST(StepInputs, PerGroupLrsAreTheOneLrFormWithItsRatio) {
  for (const Case& s : kCases) {
    Model ma, mb;
    ma.Init(3);
    mb.Init(3);
    HybridOptimizer a(ma.Specs(2), Config(s, TwoGroups()));
    HybridOptimizer b(mb.Specs(2), Config(s, TwoGroups()));
    auto set_ratio = [](int t, HybridOptimizer& o) {
      HyperParams h = o.hyper_params(1);
      h.lr_scale = RatioAt(t);
      o.SetHyperParams(1, h);
    };
    auto lrs = [](int t) { return std::vector<double>{LrAt(t), LrAt(t) * RatioAt(t)}; };
    Train(
        ma, a, s, 4,
        [&](int t, HybridOptimizer& o) {
          set_ratio(t, o);
          o.BeginStep(LrAt(t));
        },
        [](size_t k, HybridOptimizer& o) { o.GradReady(k); },
        [&](int t, HybridOptimizer& o) {
          if (!s.speculative) set_ratio(t, o);
          return o.Step(LrAt(t));
        });
    Train(
        mb, b, s, 4, [&](int t, HybridOptimizer& o) { o.BeginStep(lrs(t)); },
        [](size_t k, HybridOptimizer& o) { o.GradReady(k); },
        [&](int t, HybridOptimizer& o) { return o.Step(lrs(t)); });
    ExpectSame(Take(ma, a), Take(mb, b), s.name);
    // lr_scale is the one-lr form's alone: b's groups kept theirs.
    EXPECT_EQ(b.hyper_params(1).lr_scale, 1.0) << s.name;
  }
}

// lr_scale multiplies the one-lr form's lr and is ignored by the per-group form.
TEST(StepInputs, LrScaleAppliesToTheOneLrFormOnly) {
  const Case& s = kCases[3];
  Model ma, mb;
  ma.Init(4);
  mb.Init(4);
  HybridOptimizer a(ma.Specs(2), Config(s, TwoGroups(0.5)));
  HybridOptimizer b(mb.Specs(2), Config(s, TwoGroups(0.5)));
  for (int t = 0; t < 3; ++t) {
    ma.FillGrads(t);
    mb.FillGrads(t);
    a.Step(LrAt(t));
    const std::vector<double> lrs{LrAt(t), LrAt(t) * 0.5};
    b.Step(lrs);
  }
  ExpectSame(Take(ma, a), Take(mb, b), "lr_scale 0.5");
}

std::vector<HyperParams> HyperAt(int t) {
  std::vector<HyperParams> g = TwoGroups();
  g[0].beta1 = 0.9 - 0.01 * t;
  g[0].weight_decay = 0.01 * (t + 1);
  g[1].beta2 = 0.99 + 0.001 * t;
  g[1].eps = 1e-8 * (t + 1);
  return g;
}

// Hyper-parameters handed with each step give the bits of SetHyperParams before it, and
// stay in force after the step.
TEST(StepInputs, GroupHyperPerStepIsSetHyperParams) {
  for (const Case& s : kCases) {
    Model ma, mb;
    ma.Init(5);
    mb.Init(5);
    HybridOptimizer a(ma.Specs(2), Config(s, TwoGroups()));
    HybridOptimizer b(mb.Specs(2), Config(s, TwoGroups()));
    auto set_all = [](int t, HybridOptimizer& o) {
      const std::vector<HyperParams> h = HyperAt(t);
      for (size_t g = 0; g < h.size(); ++g) o.SetHyperParams(g, h[g]);
    };
    std::vector<HyperParams> hyper;  // must outlive each call
    auto opts = [&](int t) {
      hyper = HyperAt(t);
      StepOptions o;
      o.group_hyper = hyper;
      return o;
    };
    Train(
        ma, a, s, 4,
        [&](int t, HybridOptimizer& o) {
          set_all(t, o);
          o.BeginStep(LrAt(t));
        },
        [](size_t k, HybridOptimizer& o) { o.GradReady(k); },
        [&](int t, HybridOptimizer& o) {
          if (!s.speculative) set_all(t, o);
          return o.Step(LrAt(t));
        });
    Train(
        mb, b, s, 4, [&](int t, HybridOptimizer& o) { o.BeginStep(LrAt(t), opts(t)); },
        [](size_t k, HybridOptimizer& o) { o.GradReady(k); },
        [&](int t, HybridOptimizer& o) { return o.Step(LrAt(t), opts(t)); });
    ExpectSame(Take(ma, a), Take(mb, b), s.name);
    for (size_t g = 0; g < 2; ++g) EXPECT_EQ(b.hyper_params(g), HyperAt(3)[g]) << s.name;
    EXPECT_EQ(b.Snapshot().groups, HyperAt(3)) << s.name;
  }
}

// A step skipped for a non-finite gradient keeps the hyper-parameters it was handed (the
// step returned); nothing else changes.
TEST(StepInputs, SkippedStepKeepsItsHyperParams) {
  Model m;
  m.Init(6);
  HybridOptimizer opt(m.Specs(2), Config(kCases[3], TwoGroups()));
  m.FillGrads(0);
  opt.Step(1e-2);
  const OptimizerSnapshot before = opt.Snapshot();
  Model::Store(m.grads[7].data(), m.grad_dtype, 5, std::numeric_limits<float>::infinity());
  const std::vector<HyperParams> h = HyperAt(2);
  StepOptions o;
  o.group_hyper = h;
  EXPECT_FALSE(opt.Step(1e-2, o).applied);
  OptimizerSnapshot after = opt.Snapshot();
  EXPECT_EQ(after.groups, h);
  after.groups = before.groups;
  EXPECT_EQ(after, before);
}

using testing::ExpectInvalid;

// Every bad learning rate, hyper-parameter or gradient is refused before anything changes.
TEST(StepInputs, BadInputsChangeNothing) {
  for (const Case& s : kCases) {
    Model m;
    m.Init(8);
    std::vector<HyperParams> groups = TwoGroups();
    HybridOptimizer opt(m.Specs(2), Config(s, groups));
    m.FillGrads(0);
    opt.Step(1e-2);
    m.FillGrads(1);
    const OptimizerSnapshot before = opt.Snapshot();
    const std::vector<std::vector<uint8_t>> params = m.params;
    const std::vector<double> one{1e-2}, three{1e-2, 1e-2, 1e-2}, negative{1e-2, -1.0},
        nan{std::numeric_limits<double>::quiet_NaN(), 1e-2}, good{1e-2, 2e-2};
    ExpectInvalid([&] { opt.Step(one); }, "1 learning rates given for 2 groups");
    ExpectInvalid([&] { opt.Step(three); }, "3 learning rates given for 2 groups");
    ExpectInvalid([&] { opt.Step(negative); }, "group 1: learning rate");
    ExpectInvalid([&] { opt.Step(nan); }, "group 0: learning rate");
    ExpectInvalid([&] { opt.Step(-1.0); }, "learning rate must be finite");
    std::vector<HyperParams> h1(1), bad = TwoGroups();
    bad[1].beta1 = 1.5;
    StepOptions o;
    o.group_hyper = h1;
    ExpectInvalid([&] { opt.Step(good, o); }, "group_hyper has 1 entries for 2 groups");
    o.group_hyper = bad;
    ExpectInvalid([&] { opt.Step(good, o); }, "group_hyper[1]");
    std::vector<const void*> grads(m.sizes.size(), nullptr);
    StepOptions og;
    og.grads = std::span<const void* const>(grads.data(), 3);
    ExpectInvalid([&] { opt.Step(good, og); }, "StepOptions::grads has 3 entries for 10");
    EXPECT_EQ(opt.step_count(), 1) << s.name;
    EXPECT_EQ(opt.Snapshot(), before) << s.name;
    EXPECT_TRUE(m.params == params) << s.name;
    for (size_t g = 0; g < 2; ++g) EXPECT_EQ(opt.hyper_params(g), groups[g]) << s.name;
  }
}

// SGD's momentum buffer exists or not from construction on: a step cannot switch it.
TEST(StepInputs, SgdMomentumCannotBeSwitchedPerStep) {
  Model m;
  m.Init(9);
  OptimizerConfig c = Config(kCases[1], std::vector<HyperParams>(2));
  c.algorithm = Algorithm::kSGD;
  c.formats = {MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kF32};
  c.groups[0].momentum = 0.9;
  HybridOptimizer opt(m.Specs(2), c);
  std::vector<HyperParams> h = c.groups;
  h[1].momentum = 0.5;  // group 1 keeps no buffer
  StepOptions o;
  o.group_hyper = h;
  m.FillGrads(0);
  ExpectInvalid([&] { opt.Step(1e-2, o); }, "group_hyper[1]: momentum cannot be switched");
  EXPECT_EQ(opt.step_count(), 0);
}

// Gradient buffers that hold a copy of m's gradients of step t, a fresh set each step (so
// every step hands other pointers), kept alive until the end.
struct GradBuffers {
  std::vector<std::vector<std::vector<uint8_t>>> sets;
  std::vector<const void*> Next(const Model& m) {
    sets.push_back(m.grads);
    std::vector<const void*> ptrs;
    for (const std::vector<uint8_t>& g : sets.back()) ptrs.push_back(g.data());
    return ptrs;
  }
};

// Gradients handed per step give the bits of gradients in the construction's buffers,
// whatever those hold: through StepOptions::grads, or through GradReady(i, grad) (early
// start; with BeginStep where the setup speculates) and then Step without pointers or with
// the same ones.
TEST(StepInputs, GradientsHandedPerStep) {
  for (const Case& s : kCases)
    for (int early = 0; early < 2; ++early) {
      const std::string what = std::string(s.name) + (early ? " GradReady" : " Step");
      Model ma, mb;
      ma.Init(10);
      mb.Init(10);
      HybridOptimizer a(ma.Specs(2), Config(s, TwoGroups()));
      // b's own buffers hold NaN: a step that read them would be skipped.
      for (size_t k = 0; k < mb.sizes.size(); ++k)
        for (uint64_t i = 0; i < mb.sizes[k]; ++i)
          Model::Store(mb.grads[k].data(), mb.grad_dtype, i,
                       std::numeric_limits<float>::quiet_NaN());
      HybridOptimizer b(mb.Specs(2), Config(s, TwoGroups()));
      Train(
          ma, a, s, 4, [](int t, HybridOptimizer& o) { o.BeginStep(LrAt(t)); },
          [](size_t k, HybridOptimizer& o) { o.GradReady(k); },
          [](int t, HybridOptimizer& o) { return o.Step(LrAt(t)); });
      GradBuffers buffers;
      Model source;  // produces the gradients b is handed
      source.Init(10);
      for (int t = 0; t < 4; ++t) {
        if (s.speculative && early) b.BeginStep(LrAt(t));
        source.FillGrads(t);
        const std::vector<const void*> grads = buffers.Next(source);
        if (early)
          for (size_t k = grads.size(); k-- > 0;) b.GradReady(k, grads[k]);
        StepOptions o;
        if (!early || t % 2 == 1) o.grads = grads;  // the same pointers again, or none
        EXPECT_TRUE(b.Step(LrAt(t), o).applied) << what << " step " << t;
      }
      ExpectSame(Take(ma, a), Take(mb, b), what);
    }
}

// A gradient pointer is checked where it is handed; nothing changes on a bad one.
TEST(StepInputs, GradientPointersAreChecked) {
  const Case& s = kCases[5];  // the host pipeline with speculation
  Model m;
  m.Init(11);
  HybridOptimizer opt(m.Specs(2), Config(s, TwoGroups()));
  m.FillGrads(0);
  opt.Step(1e-2);
  m.FillGrads(1);
  const OptimizerSnapshot before = opt.Snapshot();
  // Step may not contradict the pointer GradReady was given for this step.
  std::vector<uint8_t> other = m.grads[2];
  opt.BeginStep(1e-2);
  opt.GradReady(2, other.data());
  std::vector<const void*> grads(m.sizes.size(), nullptr);
  grads[2] = m.grads[2].data();
  StepOptions o;
  o.grads = grads;
  ExpectInvalid([&] { opt.Step(1e-2, o); },
                "tensor 2 'layer2': StepOptions::grads hands another gradient than GradReady");
  EXPECT_FALSE(opt.step_begun());  // the speculation was undone with the failed call
  EXPECT_EQ(opt.Snapshot(), before);
  EXPECT_EQ(opt.step_count(), 1);
  ExpectInvalid([&] { opt.GradReady(10, m.grads[0].data()); }, "tensor index 10 of 10");
  // The step is taken again with the tensors' own buffers.
  EXPECT_TRUE(opt.Step(1e-2).applied);
}

// WaitGradConsumed is for a gradient of the last Step: refused while a step is under way.
TEST(StepInputs, WaitGradConsumedAfterStepOnly) {
  Model m;
  m.Init(12);
  HybridOptimizer opt(m.Specs(2), Config(kCases[5], TwoGroups()));
  opt.WaitGradConsumed(0, nullptr);  // nothing read yet: a no-op (host mode)
  m.FillGrads(0);
  opt.GradReady(9);
  ExpectInvalid([&] { opt.WaitGradConsumed(9, nullptr); }, "a step is under way");
  opt.WaitGradConsumed(0, nullptr);  // tensor 0 not marked ready yet
  opt.BeginStep(1e-2);
  ExpectInvalid([&] { opt.WaitGradConsumed(0, nullptr); }, "a step is under way");
  opt.Step(1e-2);
  for (size_t k = 0; k < m.sizes.size(); ++k) opt.WaitGradConsumed(k, nullptr);
  ExpectInvalid([&] { opt.WaitGradConsumed(10, nullptr); }, "tensor index 10 of 10");
}

}  // namespace
}  // namespace tandem
