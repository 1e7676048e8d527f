// torch.optim's semantics in the engine, host mode (the GPU variants run through
// tests/python/test_gpu.py): tensors without a gradient are not stepped, each tensor keeps
// its own step count, the parameter is the source of truth (ReloadParams), and a second
// GradReady in one step (gradient accumulation) gives the bits of a step without early
// start. Every comparison is byte for byte, across offload fractions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/dtype_io.h"
#include "engine/fp_bits.h"
#include "engine/master_codec.h"
#include "hybrid_fixture.h"
#include "tandem/error.h"
#include "tandem/optimizer.h"

namespace tandem {
namespace {

using testing::Model;

OptimizerConfig Config(double fraction, StateFormats f = {MasterFormat::kBF16Ecc8,
                                                           MomentFormat::kQ8, MomentFormat::kQ8}) {
  OptimizerConfig c;
  c.algorithm = Algorithm::kAdamW;
  c.formats = f;
  c.offload_fraction = fraction;
  c.mode = ExecutionMode::kHost;
  c.chunk_elements = 1024;
  c.host_threads = 2;
  c.groups.resize(2);
  c.groups[0].weight_decay = 0.01;
  c.groups[1].lr_scale = 0.5;
  return c;
}

// Steps `steps` times; at step t tensor k is active iff active(t, k).
template <typename ActiveFn>
OptimizerSnapshot RunMasked(double fraction, ActiveFn active, int steps, Model* out_model = nullptr) {
  Model m;
  m.Init(7);
  HybridOptimizer opt(m.Specs(2), Config(fraction));
  for (int t = 0; t < steps; ++t) {
    m.FillGrads(t);
    std::vector<uint8_t> mask(m.sizes.size());
    for (size_t k = 0; k < mask.size(); ++k) {
      mask[k] = active(t, k) ? 1 : 0;
      if (!mask[k])  // an inactive tensor's gradient is never read
        for (uint64_t i = 0; i < m.sizes[k]; ++i)
          Model::Store(m.grads[k].data(), m.grad_dtype, i, std::numeric_limits<float>::quiet_NaN());
    }
    StepOptions o;
    o.active = mask;
    const StepResult r = opt.Step(1e-2, o);
    EXPECT_TRUE(r.applied) << "step " << t;
  }
  if (out_model != nullptr) *out_model = m;
  return opt.Snapshot();
}

TEST(TorchSemantics, InactiveTensorsAreNotSteppedAndKeepTheirStepCount) {
  auto active = [](int t, size_t k) { return !(k == 2 && t >= 1) && !(k == 7 && t % 2 == 0); };
  Model m;
  const OptimizerSnapshot s = RunMasked(0.5, active, 4, &m);
  Model fresh;
  fresh.Init(7);
  // Tensor 2 was stepped once (step 0) only; tensor 7 at steps 1 and 3.
  EXPECT_EQ(s.tensors[2].step, 1);
  EXPECT_EQ(s.tensors[7].step, 2);
  EXPECT_EQ(s.tensors[0].step, 4);
  EXPECT_EQ(s.step, 4);
  // A tensor never active keeps its parameter bit for bit.
  auto never = [](int, size_t k) { return k != 9; };
  Model m2;
  const OptimizerSnapshot s2 = RunMasked(0.5, never, 3, &m2);
  EXPECT_EQ(m2.params[9], fresh.params[9]);
  EXPECT_EQ(s2.tensors[9].step, 0);
}

TEST(TorchSemantics, ActiveMasksGiveTheSameBitsAtEveryFraction) {
  auto active = [](int t, size_t k) { return (t + k) % 3 != 0; };
  Model ref_model;
  const OptimizerSnapshot ref = RunMasked(0.0, active, 5, &ref_model);
  for (double f : {0.25, 0.5, 1.0}) {
    Model m;
    const OptimizerSnapshot s = RunMasked(f, active, 5, &m);
    EXPECT_EQ(s, ref) << "fraction " << f;
    EXPECT_EQ(m.params, ref_model.params) << "fraction " << f;
  }
}

TEST(TorchSemantics, AFirstUpdateAfterSkippedStepsUsesTheTensorsOwnStep) {
  // Tensor 5 skips steps 0-2 and is stepped at step 3: its update must be the one a fresh
  // optimizer makes on its first step with the same gradient.
  auto late = [](int t, size_t k) { return k != 5 || t == 3; };
  Model m;
  const OptimizerSnapshot s = RunMasked(0.5, late, 4, &m);
  // Tensor 5 is in group 1 (5 % 2) of the run: compare with a fresh optimizer whose one
  // group has group 1's hyper-parameters.
  OptimizerConfig c1 = Config(0.0);
  c1.groups = {Config(0.0).groups[1]};
  Model g;
  g.Init(7);
  g.FillGrads(3);
  std::vector<TensorSpec> one1 = {g.Specs(2)[5]};
  one1[0].group = 0;
  HybridOptimizer fresh1(one1, c1);
  ASSERT_TRUE(fresh1.Step(1e-2).applied);
  EXPECT_EQ(m.params[5], g.params[5]);
  EXPECT_EQ(s.tensors[5].step, 1);
}

TEST(TorchSemantics, AStepWithNoActiveTensorChangesNothingButTheCount) {
  Model m;
  m.Init(3);
  HybridOptimizer opt(m.Specs(2), Config(0.5));
  const OptimizerSnapshot before = opt.Snapshot();
  const auto params = m.params;
  std::vector<uint8_t> none(m.sizes.size(), 0);
  StepOptions o;
  o.active = none;
  const StepResult r = opt.Step(1e-2, o);
  EXPECT_TRUE(r.applied);
  EXPECT_EQ(r.stepped_tensors, 0u);
  EXPECT_EQ(m.params, params);
  OptimizerSnapshot after = opt.Snapshot();
  EXPECT_EQ(after.step, 1);
  after.step = 0;
  EXPECT_EQ(after, before);
}

TEST(TorchSemantics, AWrongSizedMaskIsRefusedAndChangesNothing) {
  Model m;
  m.Init(3);
  m.FillGrads(0);
  HybridOptimizer opt(m.Specs(2), Config(0.5));
  std::vector<uint8_t> mask(3, 1);
  StepOptions o;
  o.active = mask;
  EXPECT_THROW(opt.Step(1e-2, o), Error);
  EXPECT_EQ(opt.step_count(), 0);
}

// ---- ReloadParams --------------------------------------------------------------------

struct Pairing {
  MasterFormat master;
  DType param;
};

class Reload : public ::testing::TestWithParam<Pairing> {};

TEST_P(Reload, WrittenParametersBecomeTheMasterAndTheRestStays) {
  const Pairing pr = GetParam();
  for (double fraction : {0.0, 0.5, 1.0}) {
    Model m;
    m.param_dtype = pr.param;
    m.Init(11);
    OptimizerConfig c = Config(fraction, {pr.master, MomentFormat::kQ8, MomentFormat::kQ8});
    HybridOptimizer opt(m.Specs(2), c);
    for (int t = 0; t < 2; ++t) {
      m.FillGrads(t);
      ASSERT_TRUE(opt.Step(1e-2).applied);
    }
    const OptimizerSnapshot before = opt.Snapshot();
    // The caller writes 0.5 into every element of tensor 0 and nothing else.
    for (uint64_t i = 0; i < m.sizes[0]; ++i) Model::Store(m.params[0].data(), pr.param, i, 0.5f);
    const size_t which[] = {0, 1};
    opt.ReloadParams(which);
    const OptimizerSnapshot after = opt.Snapshot();
    // Every element now gives the written parameter; an fp32 parameter (whose every bit
    // the master carries) is the master exactly. A bf16 element that already held 0.5
    // was not changed by the write and keeps its finer master (the contract).
    for (uint64_t i = 0; i < m.sizes[0]; ++i) {
      const TensorSnapshot& t = after.tensors[0];
      const float w = num::DecodeMaster(pr.master, t.master_f32.data(), t.master_bf16.data(),
                                        t.ecc8.data(), t.ecc16.data(), i);
      const float gives = pr.param == DType::kBF16 && pr.master != MasterFormat::kF32
                              ? num::Bf16ToF32(t.master_bf16[i])
                              : w;
      uint8_t stored[4] = {0, 0, 0, 0};
      num::StoreFromF32(stored, pr.param, 0, gives);
      ASSERT_EQ(num::LoadAsF32(stored, pr.param, 0), 0.5f)
          << "fraction " << fraction << " element " << i;
      if (pr.param == DType::kF32) {
        ASSERT_EQ(w, 0.5f) << "fraction " << fraction << " element " << i;
      }
    }
    // Tensor 1 was reloaded but not written: its master is unchanged except where the
    // master's bf16 array is the parameter (bf16 parameters, bf16+ecc masters), whose
    // corrections are reset by contract.
    const bool aliased_ecc = pr.param == DType::kBF16 && pr.master != MasterFormat::kF32 &&
                             pr.master != MasterFormat::kBF16;
    if (!aliased_ecc || fraction == 1.0) {
      EXPECT_EQ(after.tensors[1], before.tensors[1]) << "fraction " << fraction;
    }
    // Moments and step counts stay.
    EXPECT_EQ(after.tensors[0].m_codes, before.tensors[0].m_codes);
    EXPECT_EQ(after.tensors[0].v_codes, before.tensors[0].v_codes);
    EXPECT_EQ(after.tensors[0].step, before.tensors[0].step);
    // The next step starts from 0.5: after it, the parameter is within a few lr of 0.5.
    m.FillGrads(5);
    ASSERT_TRUE(opt.Step(1e-6).applied);
    for (uint64_t i = 0; i < m.sizes[0]; ++i)
      ASSERT_NEAR(num::LoadAsF32(m.params[0].data(), pr.param, i), 0.5f, 5e-3)
          << "fraction " << fraction << " element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllPairings, Reload,
    ::testing::Values(Pairing{MasterFormat::kF32, DType::kF32},
                      Pairing{MasterFormat::kF32, DType::kBF16},
                      Pairing{MasterFormat::kBF16, DType::kBF16},
                      Pairing{MasterFormat::kBF16Ecc8, DType::kF32},
                      Pairing{MasterFormat::kBF16Ecc8, DType::kBF16},
                      Pairing{MasterFormat::kBF16Ecc16, DType::kF32},
                      Pairing{MasterFormat::kBF16Ecc16, DType::kBF16}));

TEST(TorchSemantics, ReloadParamsRefusesABadIndexAndChangesNothing) {
  Model m;
  m.Init(3);
  HybridOptimizer opt(m.Specs(2), Config(0.5));
  const OptimizerSnapshot before = opt.Snapshot();
  const size_t bad[] = {0, 99};
  EXPECT_THROW(opt.ReloadParams(bad), Error);
  EXPECT_EQ(opt.Snapshot(), before);
}

// ---- A second GradReady (gradient accumulation) --------------------------------------

OptimizerSnapshot Accumulate(int micro_batches, bool early, bool speculative,
                             std::vector<std::vector<uint8_t>>* params) {
  Model m;
  m.Init(21);
  OptimizerConfig c = Config(0.5);
  c.speculative_early_start = speculative;
  HybridOptimizer opt(m.Specs(2), c);
  for (int step = 0; step < 3; ++step) {
    if (speculative) opt.BeginStep(1e-2);
    for (int b = 0; b < micro_batches; ++b) {
      m.FillGrads(10 * step + b);  // the last micro-batch's gradient is the final one
      if (early)
        for (size_t k = m.sizes.size(); k-- > 0;) opt.GradReady(k);
    }
    EXPECT_TRUE(opt.Step(1e-2).applied);
  }
  *params = m.params;
  return opt.Snapshot();
}

TEST(TorchSemantics, RepeatedGradReadyGivesTheBitsOfAStepWithoutEarlyStart) {
  for (int k = 1; k <= 4; ++k) {
    std::vector<std::vector<uint8_t>> ref_params, params;
    const OptimizerSnapshot ref = Accumulate(k, false, false, &ref_params);
    for (bool speculative : {false, true}) {
      const OptimizerSnapshot s = Accumulate(k, true, speculative, &params);
      EXPECT_EQ(s, ref) << k << " micro-batches, speculative " << speculative;
      EXPECT_EQ(params, ref_params) << k << " micro-batches, speculative " << speculative;
    }
  }
}

// ---- Restore ----------------------------------------------------------------------------

TEST(TorchSemantics, RestoreComparesGradDtypeShapeAndTensorStepsAndChangesNothing) {
  Model m;
  m.Init(3);
  std::vector<TensorSpec> specs = m.Specs(2);
  specs[1].shape = {m.sizes[1]};
  HybridOptimizer opt(specs, Config(0.5));
  m.FillGrads(0);
  ASSERT_TRUE(opt.Step(1e-2).applied);
  const OptimizerSnapshot good = opt.Snapshot();
  auto refused = [&](OptimizerSnapshot bad, const std::string& needle) {
    try {
      opt.Restore(bad);
      ADD_FAILURE() << "restored a snapshot with " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(opt.Snapshot(), good);
  };
  OptimizerSnapshot b = good;
  b.tensors[2].grad_dtype = DType::kF32;
  refused(b, "grad dtype");
  b = good;
  b.tensors[1].shape = {m.sizes[1] / 2, 2};
  refused(b, "shape");
  b = good;
  b.tensors[0].step = 2;  // more updates than steps taken
  refused(b, "step");
  opt.Restore(good);
  EXPECT_EQ(opt.Snapshot(), good);
}

// ---- Arguments -------------------------------------------------------------------------

TEST(TorchSemantics, HostThreadsBeyondTheLimitAreRefused) {
  Model m;
  m.Init(3);
  OptimizerConfig c = Config(0.5);
  c.host_threads = MaxHostThreads() + 1;
  try {
    HybridOptimizer opt(m.Specs(2), c);
    FAIL() << "accepted host_threads " << c.host_threads;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("host_threads"), std::string::npos) << e.what();
  }
  c.host_threads = 100000;
  EXPECT_THROW(HybridOptimizer(m.Specs(2), c), Error);
}

TEST(TorchSemantics, AShapeThatIsNotTheElementCountIsRefused) {
  Model m;
  m.Init(3);
  std::vector<TensorSpec> specs = m.Specs(2);
  specs[0].shape = {7, 3};
  try {
    HybridOptimizer opt(specs, Config(0.5));
    FAIL() << "accepted a wrong shape";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'layer0': shape has 21 elements"), std::string::npos)
        << e.what();
  }
  specs[0].shape = {m.sizes[0]};
  HybridOptimizer opt(specs, Config(0.5));
  EXPECT_EQ(opt.Snapshot().tensors[0].shape, std::vector<uint64_t>{m.sizes[0]});
}

}  // namespace
}  // namespace tandem
