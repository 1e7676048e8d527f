// HybridOptimizer in host mode, which runs the whole hybrid path (placement, chunked
// pipeline, staging, per-tensor parts) over host memory. The offload fraction, placement
// policy, chunk size and thread count never change one bit of the result.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "engine/reference_step.h"
#include "engine/tensor_state.h"
#include "offload/memory/slab.h"
#include "engine/layout/state_layout.h"
#include "tandem/error.h"
#include "tandem/faults.h"
#include "tandem/optimizer.h"
#include "tests/offload/hybrid_fixture.h"

namespace tandem {
namespace {

using testing::Model;

struct Case {
  Algorithm algo;
  StateFormats formats;
  DType param, grad;
};

OptimizerConfig Config(const Case& s, double fraction, PlacementPolicy pol, uint64_t chunk,
                       int threads) {
  OptimizerConfig c;
  c.algorithm = s.algo;
  c.formats = s.formats;
  c.offload_fraction = fraction;
  c.placement = pol;
  c.chunk_elements = chunk;
  c.host_threads = threads;
  c.mode = ExecutionMode::kHost;
  c.pipeline_slots = 3;
  HyperParams g0, g1;
  g0.weight_decay = 0.01;
  g1.lr_scale = 0.5;
  g1.beta2 = 0.99;
  if (s.algo == Algorithm::kSGD) {
    g0.momentum = g1.momentum = 0.9;
    g1.nesterov = true;
  }
  c.groups = {g0, g1};
  return c;
}

// Runs `steps` steps and returns the snapshot and the final parameters.
std::pair<OptimizerSnapshot, std::vector<std::vector<uint8_t>>> Train(const Case& s,
                                                                    const OptimizerConfig& c,
                                                                    int steps,
                                                                    bool early = false) {
  Model m;
  m.param_dtype = s.param;
  m.grad_dtype = s.grad;
  m.Init(7);
  HybridOptimizer opt(m.Specs(2), c);
  for (int t = 1; t <= steps; ++t) {
    m.FillGrads(t);
    if (early)
      for (size_t i = m.sizes.size(); i-- > 0;) opt.GradReady(i);
    const StepResult r = opt.Step(1e-3 * (1.0 + 0.01 * t), {.max_grad_norm = 5.0});
    EXPECT_TRUE(r.applied);
  }
  return {opt.Snapshot(), m.params};
}

const Case kSetups[] = {
    {Algorithm::kAdamW, {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8},
     DType::kBF16, DType::kBF16},
    {Algorithm::kAdamW, {MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kF32},
     DType::kF32, DType::kF32},
    {Algorithm::kAdam, {MasterFormat::kF32, MomentFormat::kQ8, MomentFormat::kF32},
     DType::kBF16, DType::kF16},
    {Algorithm::kLion, {MasterFormat::kBF16Ecc16, MomentFormat::kQ8, MomentFormat::kF32},
     DType::kF16, DType::kBF16},
    {Algorithm::kSGD, {MasterFormat::kBF16, MomentFormat::kQ8, MomentFormat::kF32},
     DType::kBF16, DType::kF32},
};

TEST(HybridHost, BitIdenticalAcrossFractionsPoliciesChunksAndThreads) {
  for (const Case& s : kSetups) {
    const auto base = Train(s, Config(s, 0.0, PlacementPolicy::kBackwardOrder, 4096, 1), 20);
    const bool full_sweep = &s == &kSetups[0];
    for (double f : {0.25, 0.5, 0.75, 1.0}) {
      for (PlacementPolicy pol : {PlacementPolicy::kBackwardOrder, PlacementPolicy::kForwardOrder,
                                  PlacementPolicy::kLargestFirst}) {
        for (uint64_t chunk : {uint64_t{64}, uint64_t{4096}}) {
          for (int threads : {1, 2}) {
            if (!full_sweep && (chunk != 64 || threads != 2 ||
                                pol != PlacementPolicy::kBackwardOrder))
              continue;
            const auto got = Train(s, Config(s, f, pol, chunk, threads), 20);
            ASSERT_EQ(got.second, base.second)
                << Name(s.algo) << " " << Name(s.formats) << " params differ at f=" << f << " "
                << Name(pol) << " chunk=" << chunk << " threads=" << threads;
            ASSERT_TRUE(got.first == base.first) << "state differs at f=" << f;
          }
        }
      }
    }
  }
}

TEST(HybridHost, EqualsTheScalarReference) {
  const Case s = kSetups[0];
  const OptimizerConfig c = Config(s, 0.5, PlacementPolicy::kBackwardOrder, 96, 2);
  const auto got = Train(s, c, 5);
  Model m;
  m.Init(7);
  std::vector<TensorState> ref;
  auto specs = m.Specs(2);
  for (const TensorSpec& sp : specs) {
    std::vector<float> w(sp.numel);
    for (size_t i = 0; i < sp.numel; ++i)
      w[i] = num::Bf16ToF32(reinterpret_cast<const uint16_t*>(sp.param)[i]);
    ref.emplace_back(s.algo, c.groups[sp.group], s.formats, w.data(), sp.numel);
  }
  for (int t = 1; t <= 5; ++t) {
    m.FillGrads(t);
    double ss = 0;
    for (size_t k = 0; k < specs.size(); ++k)
      for (size_t i = 0; i < specs[k].numel; ++i) {
        const double g = num::Bf16ToF32(reinterpret_cast<const uint16_t*>(specs[k].grad)[i]);
        ss += g * g;
      }
    const double norm = std::sqrt(ss);
    const double mul = norm > 5.0 ? 5.0 / (norm + 1e-6) : 1.0;
    for (size_t k = 0; k < specs.size(); ++k) {
      const StepScalars sc =
          ComputeStepScalars(s.algo, c.groups[specs[k].group], 1e-3 * (1.0 + 0.01 * t), t, mul);
      ReferenceStep(sc, ref[k].Span(0, specs[k].numel, specs[k].grad, DType::kBF16,
                                    specs[k].param, DType::kBF16));
    }
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    EXPECT_EQ(got.first.tensors[k].master_bf16, ref[k].master_bf16) << k;
    EXPECT_EQ(got.first.tensors[k].ecc8, ref[k].ecc8) << k;
    EXPECT_EQ(got.first.tensors[k].m_codes, ref[k].m_codes) << k;
    EXPECT_EQ(got.first.tensors[k].v_scales, ref[k].v_scales) << k;
    EXPECT_EQ(got.second[k], m.params[k]) << k;
  }
}

TEST(HybridHost, EarlyStartGivesTheSameBits) {
  const Case s = kSetups[0];
  const OptimizerConfig c = Config(s, 0.6, PlacementPolicy::kBackwardOrder, 128, 2);
  const auto plain = Train(s, c, 6, false);
  const auto early = Train(s, c, 6, true);
  EXPECT_EQ(plain.second, early.second);
  EXPECT_TRUE(plain.first == early.first);
}

TEST(HybridHost, NonFiniteGradientChangesNothing) {
  for (float bad : {NAN, INFINITY}) {
    Model m;
    m.Init(7);
    const Case s = kSetups[0];
    HybridOptimizer opt(m.Specs(2), Config(s, 0.5, PlacementPolicy::kBackwardOrder, 64, 2));
    m.FillGrads(1);
    ASSERT_TRUE(opt.Step(1e-3).applied);
    const OptimizerSnapshot before = opt.Snapshot();
    const auto params_before = m.params;
    m.FillGrads(2);
    Model::Store(m.grads[7].data(), m.grad_dtype, 8000, bad);  // in an offloaded tensor
    const StepResult r = opt.Step(1e-3);
    EXPECT_FALSE(r.applied);
    EXPECT_TRUE(std::isinf(r.grad_norm));
    EXPECT_EQ(r.step, 1);
    EXPECT_EQ(opt.step_count(), 1);
    EXPECT_TRUE(opt.Snapshot() == before);
    EXPECT_EQ(m.params, params_before);
    m.FillGrads(3);
    EXPECT_TRUE(opt.Step(1e-3).applied);  // and it goes on
  }
}

TEST(HybridHost, ReportsTheGlobalNormAndClips) {
  Model m;
  m.grad_dtype = DType::kF32;
  m.Init(7);
  const Case s{Algorithm::kSGD, {}, DType::kBF16, DType::kF32};
  OptimizerConfig c = Config(s, 0.5, PlacementPolicy::kBackwardOrder, 64, 2);
  HybridOptimizer opt(m.Specs(2), c);
  m.FillGrads(1);
  double ss = 0;
  for (auto& g : m.grads)
    for (size_t i = 0; i < g.size() / 4; ++i) ss += double(reinterpret_cast<float*>(g.data())[i]) *
                                                     reinterpret_cast<float*>(g.data())[i];
  const StepResult r = opt.Step(0.1, {.max_grad_norm = 0.0, .loss_scale = 4.0});
  EXPECT_NEAR(r.grad_norm, std::sqrt(ss) / 4.0, 1e-9 * std::sqrt(ss));
}

void ExpectInvalid(const std::function<void()>& fn, const char* needle) {
  try {
    fn();
    FAIL() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(HybridHost, BadInputIsRejectedWithAClearError) {
  Model m;
  m.Init(7);
  const Case s = kSetups[0];
  const OptimizerConfig good = Config(s, 0.5, PlacementPolicy::kBackwardOrder, 64, 2);
  auto with = [&](auto edit) {
    auto specs = m.Specs(2);
    OptimizerConfig c = good;
    edit(specs, c);
    HybridOptimizer opt(specs, c);
  };
  ExpectInvalid([&] { with([](auto& sp, auto&) { sp[2].grad = nullptr; }); }, "'layer2': grad is null");
  ExpectInvalid([&] { with([](auto& sp, auto&) { sp[3].param = nullptr; }); }, "'layer3': param is null");
  ExpectInvalid([&] { with([](auto& sp, auto&) { sp[1].name = "layer0"; }); }, "duplicate name");
  ExpectInvalid([&] { with([](auto& sp, auto&) { sp[1].group = 9; }); }, "group 9");
  ExpectInvalid([&] { with([](auto& sp, auto&) { sp[1].grad_dtype = DType(7); }); }, "grad dtype");
  ExpectInvalid([&] { with([](auto&, auto& c) { c.offload_fraction = 1.5; }); }, "offload_fraction");
  ExpectInvalid([&] { with([](auto&, auto& c) { c.offload_fraction = -0.1; }); }, "offload_fraction");
  ExpectInvalid([&] { with([](auto&, auto& c) { c.chunk_elements = 100; }); }, "chunk_elements");
  ExpectInvalid([&] { with([](auto&, auto& c) { c.pipeline_slots = 1; }); }, "pipeline_slots");
  ExpectInvalid([&] { with([](auto&, auto& c) { c.groups.clear(); }); }, "groups is empty");
  ExpectInvalid([&] { with([](auto&, auto& c) { c.groups[1].beta1 = NAN; }); }, "group 1: beta1");
  ExpectInvalid([&] { with([](auto&, auto& c) { c.algorithm = Algorithm::kLion; }); },
                "variance format q8");
  ExpectInvalid([&] { with([](auto&, auto& c) { c.mode = ExecutionMode::kGpu; }); }, "");

  // A failed allocation is an out-of-memory error; the next attempt works.
  OptimizerConfig failing = good;
  failing.faults = std::make_shared<FaultPlan>();
  failing.faults->FailAllocation(MemoryKind::kHost, 2);
  try {
    HybridOptimizer opt(m.Specs(2), failing);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("offloaded optimizer state"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(HybridOptimizer(m.Specs(2), failing));

  // A bad step argument changes nothing and leaves the optimizer usable.
  HybridOptimizer opt(m.Specs(2), good);
  m.FillGrads(1);
  const OptimizerSnapshot before = opt.Snapshot();
  ExpectInvalid([&] { opt.Step(NAN); }, "learning rate");
  ExpectInvalid([&] { opt.Step(1e-3, {.max_grad_norm = -1}); }, "max_grad_norm");
  ExpectInvalid([&] { opt.Step(1e-3, {.loss_scale = 0}); }, "loss_scale");
  ExpectInvalid([&] { opt.GradReady(99); }, "tensor index 99");
  EXPECT_TRUE(opt.Snapshot() == before);
  EXPECT_TRUE(opt.Step(1e-3).applied);
}

// A copy that fails in the middle of a step (a CUDA error in GPU mode) is reported as
// kCuda with the chunks applied; the step count stays, and restoring the snapshot taken
// before the step, then stepping again, gives the bits of a run that never failed.
TEST(HybridHost, CopyFailureMidStepIsReportedAndRecoverable) {
  const Case s = kSetups[0];
  OptimizerConfig c = Config(s, 0.5, PlacementPolicy::kBackwardOrder, 64, 2);
  const auto want = Train(s, c, 3);
  Model m;
  m.Init(7);
  const auto faults = std::make_shared<FaultPlan>();
  c.faults = faults;
  HybridOptimizer opt(m.Specs(2), c);
  auto step = [&](int t) { return opt.Step(1e-3 * (1.0 + 0.01 * t), {.max_grad_norm = 5.0}); };
  m.FillGrads(1);
  ASSERT_TRUE(step(1).applied);
  m.FillGrads(2);
  const OptimizerSnapshot before = opt.Snapshot();
  // With 3 pipeline slots, copies 1-3 are the first downloads and copy 4 the first upload.
  for (uint64_t nth : {1u, 4u, 9u}) {
    faults->FailCopy(nth);
    try {
      step(2);
      FAIL() << "no error for failed copy " << nth;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kCuda);
      EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("chunks applied"), std::string::npos) << e.what();
      const char* which = nth == 1 ? "download" : nth == 4 ? "upload" : "";
      EXPECT_NE(std::string(e.what()).find(which), std::string::npos) << e.what();
    }
    EXPECT_EQ(opt.step_count(), 1);
    opt.Restore(before);
  }
  ASSERT_TRUE(step(2).applied);
  m.FillGrads(3);
  ASSERT_TRUE(step(3).applied);
  EXPECT_EQ(m.params, want.second);
  EXPECT_TRUE(opt.Snapshot() == want.first);
}

// A FaultPlan belongs to the optimizers it is handed to: armed in one and never consumed
// there, it changes nothing in another (the process-global switches it replaced did: an
// armed copy failure that one test never reached failed the next test's step).
TEST(HybridHost, AFaultPlanAffectsOnlyTheOptimizerItIsHandedTo) {
  const Case s = kSetups[0];
  const OptimizerConfig c = Config(s, 0.5, PlacementPolicy::kBackwardOrder, 64, 2);
  const auto want = Train(s, c, 3);
  Model m;
  m.Init(7);
  OptimizerConfig armed = c;
  armed.faults = std::make_shared<FaultPlan>();
  HybridOptimizer victim(m.Specs(2), armed);
  armed.faults->FailCopy(1);
  armed.faults->FailAllocation(MemoryKind::kHost, 1);
  // Another optimizer is built and stepped while the plan is armed: the same bits.
  const auto got = Train(s, c, 3);
  EXPECT_EQ(got.second, want.second);
  EXPECT_TRUE(got.first == want.first);
  // The plan is still armed, for its own optimizer only: its next step fails.
  m.FillGrads(1);
  try {
    victim.Step(1e-3);
    ADD_FAILURE() << "the armed copy failure was consumed elsewhere";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCuda);
    EXPECT_NE(e.message().find("injected failure"), std::string::npos) << e.message();
  }
  EXPECT_EQ(victim.step_count(), 0);
  // And so is the allocation failure, for the next optimizer built with the plan.
  try {
    HybridOptimizer again(m.Specs(2), armed);
    ADD_FAILURE() << "the armed allocation failure was consumed elsewhere";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
    EXPECT_NE(e.message().find("(injected)"), std::string::npos) << e.message();
  }
}

// The closed-form formula of docs/user_guide.md ("Memory"), computed independently.
constexpr auto A = testing::Align256;

TEST(HybridHost, MemoryReportFollowsTheClosedForm) {
  for (const Case& s : kSetups) {
    for (double f : {0.0, 0.3, 1.0}) {
      Model m;
      m.param_dtype = s.param;
      m.grad_dtype = s.grad;
      m.Init(7);
      const OptimizerConfig c = Config(s, f, PlacementPolicy::kBackwardOrder, 256, 1);
      HybridOptimizer opt(m.Specs(2), c);
      const Placement& p = opt.placement();
      MemoryReport::Bytes want;
      uint64_t max_g = 0, max_p = 0;
      auto specs = m.Specs(2);
      for (size_t t = 0; t < specs.size(); ++t) {
        const HyperParams& h = c.groups[specs[t].group];
        for (int part = 0; part < 2; ++part) {
          const uint64_t n = part == 0 ? p.tensors[t].device_count : p.tensors[t].host_count();
          if (n == 0) continue;
          const bool alias = part == 0 && layout::MasterAliases(s.formats.master, s.param);
          const bool bf = s.formats.master != MasterFormat::kF32;
          if (!alias) want.master += A((bf ? 2 : 4) * n);
          if (s.formats.master == MasterFormat::kBF16Ecc8) want.correction += A(n);
          if (s.formats.master == MasterFormat::kBF16Ecc16) want.correction += A(2 * n);
          const uint64_t groups = (n + 31) / 32;
          if (HasMomentum(s.algo, h)) {
            const bool q = s.formats.momentum == MomentFormat::kQ8;
            want.momentum += A(q ? n : 4 * n);
            if (q) want.scales += A(2 * groups);
          }
          if (HasVariance(s.algo)) {
            const bool q = s.formats.variance == MomentFormat::kQ8;
            want.variance += A(q ? n : 4 * n);
            if (q) want.scales += A(2 * groups);
          }
          if (part == 1) {
            const uint64_t cn = std::min<uint64_t>(n, 256);
            max_g = std::max(max_g, cn * DTypeSize(s.grad));
            if (!layout::MasterAliases(s.formats.master, s.param))
              max_p = std::max(max_p, cn * DTypeSize(s.param));
          }
        }
      }
      want.staging = 3 * A(max_g) + (max_p > 0 ? 3 * A(max_p) : 0);
      const MemoryReport r = opt.memory();
      EXPECT_EQ(r.device.total(), 0u);  // host mode: everything is host memory
      EXPECT_EQ(r.host.master, want.master) << Name(s.formats) << " f=" << f;
      EXPECT_EQ(r.host.correction, want.correction);
      EXPECT_EQ(r.host.momentum, want.momentum);
      EXPECT_EQ(r.host.variance, want.variance);
      EXPECT_EQ(r.host.scales, want.scales);
      EXPECT_EQ(r.host.staging, want.staging);
    }
  }
}

TEST(HybridHost, PerGroupHyperParametersCanChangeBetweenSteps) {
  const Case s = kSetups[0];
  Model a, b;
  a.Init(7);
  b.Init(7);
  OptimizerConfig c = Config(s, 0.5, PlacementPolicy::kBackwardOrder, 64, 2);
  HybridOptimizer oa(a.Specs(2), c);
  // b's group 1 starts with lr_scale 1 and is changed to 0.5 before its first step: the
  // result must equal a's, constructed with 0.5.
  OptimizerConfig cb = c;
  cb.groups[1].lr_scale = 1.0;
  HybridOptimizer ob(b.Specs(2), cb);
  HyperParams h = ob.hyper_params(1);
  h.lr_scale = 0.5;
  ob.SetHyperParams(1, h);
  for (int t = 1; t <= 3; ++t) {
    a.FillGrads(t);
    b.FillGrads(t);
    oa.Step(1e-3);
    ob.Step(1e-3);
  }
  EXPECT_EQ(a.params, b.params);
  h.beta1 = 2.0;
  ExpectInvalid([&] { ob.SetHyperParams(1, h); }, "beta1");
  ExpectInvalid([&] { ob.SetHyperParams(5, h); }, "group 5");
  EXPECT_EQ(ob.hyper_params(1).beta1, 0.9);
}

TEST(HybridHost, SnapshotRestoresAtAnotherFraction) {
  const Case s = kSetups[0];
  Model a, b;
  a.Init(7);
  b.Init(99);  // different starting weights: Restore must overwrite them
  HybridOptimizer oa(a.Specs(2), Config(s, 0.25, PlacementPolicy::kBackwardOrder, 64, 2));
  for (int t = 1; t <= 3; ++t) {
    a.FillGrads(t);
    oa.Step(1e-3);
  }
  HybridOptimizer ob(b.Specs(2), Config(s, 0.75, PlacementPolicy::kLargestFirst, 4096, 1));
  ob.Restore(oa.Snapshot());
  EXPECT_EQ(b.params, a.params);
  for (int t = 4; t <= 6; ++t) {
    a.FillGrads(t);
    b.FillGrads(t);
    oa.Step(1e-3);
    ob.Step(1e-3);
  }
  EXPECT_EQ(b.params, a.params);
  EXPECT_TRUE(oa.Snapshot() == ob.Snapshot());
  // A snapshot that does not match is refused and changes nothing.
  OptimizerSnapshot bad = oa.Snapshot();
  bad.tensors[3].name = "other";
  const OptimizerSnapshot keep = ob.Snapshot();
  ExpectInvalid([&] { ob.Restore(bad); }, "'other'");
  bad = oa.Snapshot();
  // Each tensor's formats describe its arrays (the snapshot's own formats are only the
  // default): formats that do not fit the arrays are refused.
  for (TensorSnapshot& t : bad.tensors) t.formats.variance = MomentFormat::kF32;
  ExpectInvalid([&] { ob.Restore(bad); }, "v_f32");
  EXPECT_TRUE(ob.Snapshot() == keep);
}

// What a run cannot go on from is refused at Restore (the path of checkpoint files, state
// dicts and DCP alike), naming the tensor, and changes nothing: a q8 variance whose scale
// and code square to infinity (tandem-ckpt to-torch refuses the same state, with the same
// message: tests/checkpoint/tool_test.cc), and a step above 2^52.
TEST(HybridHost, RestoreRefusesAStateThatCannotBeStepped) {
  const Case s = kSetups[0];  // bf16+ecc8 / q8 / q8
  Model a, b;
  a.Init(7);
  b.Init(99);
  HybridOptimizer oa(a.Specs(2), Config(s, 0.5, PlacementPolicy::kBackwardOrder, 64, 2));
  a.FillGrads(1);
  oa.Step(1e-3);
  HybridOptimizer ob(b.Specs(2), Config(s, 0.5, PlacementPolicy::kBackwardOrder, 64, 2));
  const OptimizerSnapshot keep = ob.Snapshot();
  const auto params = b.params;
  OptimizerSnapshot bad = oa.Snapshot();
  TensorSnapshot& t = bad.tensors[1];
  ASSERT_GE(t.v_codes.size(), 40u);
  t.v_scales[1] = 0x7F7F;  // the largest finite bf16
  for (size_t i = 32; i < 64; ++i) t.v_codes[i] = 0;  // zero decodes to zero
  t.v_codes[37] = 255;
  EXPECT_NO_THROW(ValidateSnapshot(bad));  // the format holds it
  ExpectInvalid([&] { ob.Restore(bad); },
                ("tensor '" + t.name + "': v_scales[1] = 3.38953139e+38 with v_codes[37] = 255 "
                 "decodes to sqrt(v) = 3.38953139e+38, whose square (the variance the step "
                 "uses) is infinite: the state cannot survive one step").c_str());
  EXPECT_TRUE(ob.Snapshot() == keep);
  EXPECT_EQ(b.params, params);

  bad = oa.Snapshot();
  bad.step = (int64_t{1} << 52) + 1;
  ExpectInvalid([&] { ob.Restore(bad); }, "snapshot step 4503599627370497 is above 2^52");
  EXPECT_TRUE(ob.Snapshot() == keep);
  // At 2^52 a run goes on, and its state can still be saved after its next step.
  bad.step = int64_t{1} << 52;
  ob.Restore(bad);
  b.FillGrads(2);
  ob.Step(1e-3);
  EXPECT_EQ(ob.step_count(), (int64_t{1} << 52) + 1);
  EXPECT_NO_THROW(ValidateSnapshot(ob.Snapshot()));
}

}  // namespace
}  // namespace tandem
