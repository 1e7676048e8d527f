// Per-tensor state formats in host mode: an optimizer whose tensors mix format sets gives
// every tensor the bits an optimizer configured with that tensor's formats globally gives
// it, at every offload fraction, with chunks that split tensors, with clipping (one global
// norm over all kinds), with ReloadParams and with speculative early start. Its memory
// report is the prediction and the sum of the per-format parts; its snapshot records
// each tensor's formats and restores at another fraction; a mismatching one is refused.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tests/offload/hybrid_fixture.h"
#include "tests/offload/mixed_formats_test.h"

namespace tandem {
namespace {

using testing::MixedFormatsOf;
using testing::Model;

OptimizerConfig Config(const StateFormats& f, double fraction, uint64_t chunk = 64) {
  OptimizerConfig c = testing::QuantizedConfig(ExecutionMode::kHost, fraction,
                                               PlacementPolicy::kBackwardOrder, chunk, 2);
  c.formats = f;
  c.pipeline_slots = 3;
  return c;
}

struct Result {
  OptimizerSnapshot snap;
  std::vector<std::vector<uint8_t>> params;
};

struct Run {
  bool mixed = true;           // per-tensor overrides; false: every tensor in cfg.formats
  bool speculative = false;    // BeginStep + GradReady before each Step
  double max_grad_norm = 5.0;  // clipping triggers at this norm (the gradients' is ~50)
};

// Trains the fixture model 6 steps; after step 3 the parameters of tensors 0, 7 and 9 are
// overwritten and reloaded (ReloadParams), as loading weights between steps would.
Result Train(OptimizerConfig c, const Run& run, DType param_dtype = DType::kBF16) {
  Model m;
  m.param_dtype = param_dtype;
  m.Init(11);
  c.speculative_early_start = run.speculative;
  std::vector<TensorSpec> specs = m.Specs(2);
  if (run.mixed) specs = testing::WithMixedFormats(specs);
  HybridOptimizer opt(specs, c);
  for (int t = 1; t <= 6; ++t) {
    m.FillGrads(t);
    const double lr = 1e-3 * (1.0 + 0.1 * t);
    const StepOptions o{.max_grad_norm = run.max_grad_norm};
    if (run.speculative) {
      opt.BeginStep(lr, o);
      for (size_t i = m.sizes.size(); i-- > 0;) opt.GradReady(i);
    }
    EXPECT_TRUE(opt.Step(lr, o).applied);
    if (t == 3) {
      const std::vector<size_t> reload = {0, 7, 9};
      for (size_t k : reload)
        for (uint64_t i = 0; i < m.sizes[k]; i += 3)
          Model::Store(m.params[k].data(), m.param_dtype, i, 0.25f * float(i % 11) - 1.0f);
      opt.ReloadParams(reload);
    }
  }
  return {opt.Snapshot(), m.params};
}

// Every tensor of `mixed` equals the same tensor of the global run of its formats.
void ExpectPerTensorEqual(const Result& mixed, const std::vector<Result>& global,
                          const std::string& what) {
  const std::vector<StateFormats> sets = testing::MixedFormatSets();
  for (size_t t = 0; t < mixed.snap.tensors.size(); ++t) {
    const StateFormats f = MixedFormatsOf(t);
    size_t k = 0;
    while (!(sets[k] == f)) ++k;
    const TensorSnapshot& got = mixed.snap.tensors[t];
    EXPECT_EQ(got.formats, f) << what << " tensor " << t;
    EXPECT_TRUE(got == global[k].snap.tensors[t]) << what << ": state of tensor " << t;
    EXPECT_EQ(mixed.params[t], global[k].params[t]) << what << ": parameter of tensor " << t;
  }
}

// The global runs at the same fraction and chunk. (ReloadParams resets every correction
// of a hot prefix whose master aliases a bf16 parameter, so with a reload the placement
// matters: Note in include/tandem/optimizer.h, ReloadParams.)
std::vector<Result> GlobalRuns(double fraction, uint64_t chunk, const Run& run = {}) {
  std::vector<Result> out;
  Run global = run;
  global.mixed = false;
  global.speculative = false;
  for (const StateFormats& f : testing::MixedFormatSets())
    out.push_back(Train(Config(f, fraction, chunk), global));
  return out;
}

TEST(MixedFormatsHost, EachTensorMatchesItsGlobalFormatsAtEveryFraction) {
  for (double fraction : {0.0, 0.5, 1.0})
    for (uint64_t chunk : {uint64_t{64}, uint64_t{4096}}) {
      const std::vector<Result> global = GlobalRuns(fraction, chunk);
      const std::string what =
          "fraction " + std::to_string(fraction) + " chunk " + std::to_string(chunk);
      ExpectPerTensorEqual(Train(Config(testing::kMixedDefault, fraction, chunk), {}), global,
                           what);
    }
}

TEST(MixedFormatsHost, F32ParametersAliasPerTensor) {
  // fp32 parameters: the f32-master tensor's master is the parameter (aliased in the hot
  // part), the bf16-based ones are not.
  for (double fraction : {0.0, 0.5, 1.0}) {
    std::vector<Result> global;
    for (const StateFormats& f : testing::MixedFormatSets())
      global.push_back(Train(Config(f, fraction), {.mixed = false}, DType::kF32));
    ExpectPerTensorEqual(Train(Config(testing::kMixedDefault, fraction), {}, DType::kF32), global,
                         "f32 params, fraction " + std::to_string(fraction));
  }
}

TEST(MixedFormatsHost, SpeculativeEarlyStartGivesTheSameBits) {
  // With clipping (the speculation is rolled back) and without (it is kept).
  for (double clip : {5.0, 0.0}) {
    for (double fraction : {0.5, 1.0})
      ExpectPerTensorEqual(
          Train(Config(testing::kMixedDefault, fraction),
                {.speculative = true, .max_grad_norm = clip}),
          GlobalRuns(fraction, 64, {.max_grad_norm = clip}),
          "speculative, clip " + std::to_string(clip) + ", fraction " + std::to_string(fraction));
  }
}

MemoryReport::Bytes StateOnly(MemoryReport::Bytes b) {
  b.staging = b.metadata = b.speculation = 0;
  return b;
}

bool SameBytes(const MemoryReport::Bytes& a, const MemoryReport::Bytes& b) {
  return a.master == b.master && a.correction == b.correction && a.momentum == b.momentum &&
         a.variance == b.variance && a.scales == b.scales && a.staging == b.staging &&
         a.metadata == b.metadata && a.speculation == b.speculation;
}

TEST(MixedFormatsHost, MemoryIsThePredictionAndTheSumOfThePerFormatParts) {
  Model m;
  m.Init(3);
  const std::vector<TensorSpec> specs = testing::WithMixedFormats(m.Specs(2));
  for (double fraction : {0.0, 0.5, 1.0})
    for (bool spec : {false, true}) {
      OptimizerConfig c = Config(testing::kMixedDefault, fraction);
      c.speculative_early_start = spec;
      HybridOptimizer opt(specs, c);
      const MemoryReport got = opt.memory(), want = PredictMemory(specs, c, ExecutionMode::kHost);
      EXPECT_TRUE(SameBytes(got.host, want.host)) << fraction;
      EXPECT_TRUE(SameBytes(got.device, want.device)) << fraction;
    }
  // All state hot (fraction 0): the state of the mixed optimizer is the sum, over format
  // sets, of an optimizer of that set's tensors alone.
  const OptimizerConfig c = Config(testing::kMixedDefault, 0.0);
  MemoryReport::Bytes sum;
  for (const StateFormats& f : testing::MixedFormatSets()) {
    std::vector<TensorSpec> part;
    for (size_t t = 0; t < specs.size(); ++t)
      if (MixedFormatsOf(t) == f) part.push_back(specs[t]);
    const MemoryReport::Bytes b =
        StateOnly(PredictMemory(part, Config(f, 0.0), ExecutionMode::kHost).host);
    sum.master += b.master;
    sum.correction += b.correction;
    sum.momentum += b.momentum;
    sum.variance += b.variance;
    sum.scales += b.scales;
  }
  EXPECT_TRUE(SameBytes(StateOnly(PredictMemory(specs, c, ExecutionMode::kHost).host), sum));
  // And it differs from the all-default prediction (the overrides are accounted for).
  EXPECT_FALSE(SameBytes(StateOnly(PredictMemory(m.Specs(2), c, ExecutionMode::kHost).host), sum));
  // GPU mode (predicted only here): one step plan per format set, the same state bytes.
  const MemoryReport gpu = PredictMemory(specs, c, ExecutionMode::kGpu);
  EXPECT_TRUE(SameBytes(StateOnly(gpu.device), sum));
}

TEST(MixedFormatsHost, SnapshotRecordsEachTensorsFormatsAndRestoresAtAnotherFraction) {
  Model m;
  m.Init(5);
  const std::vector<TensorSpec> specs = testing::WithMixedFormats(m.Specs(2));
  HybridOptimizer a(specs, Config(testing::kMixedDefault, 0.5));
  for (int t = 1; t <= 3; ++t) {
    m.FillGrads(t);
    a.Step(1e-3, {.max_grad_norm = 5.0});
  }
  const OptimizerSnapshot snap = a.Snapshot();
  EXPECT_EQ(snap.formats, testing::kMixedDefault);
  for (size_t t = 0; t < snap.tensors.size(); ++t) {
    EXPECT_EQ(snap.tensors[t].formats, MixedFormatsOf(t)) << t;
  }
  EXPECT_EQ(snap.tensors[1].m_f32.size(), 64u);
  EXPECT_TRUE(snap.tensors[1].m_codes.empty());
  EXPECT_EQ(snap.tensors[7].master_f32.size(), 9000u);
  EXPECT_NO_THROW(ValidateSnapshot(snap));
  const std::vector<std::vector<uint8_t>> params = m.params;

  // Restore into an optimizer at fraction 1 over another copy of the parameters.
  Model m2;
  m2.Init(99);  // other values: Restore writes the parameters from the masters
  HybridOptimizer b(testing::WithMixedFormats(m2.Specs(2)), Config(testing::kMixedDefault, 1.0));
  b.Restore(snap);
  EXPECT_TRUE(b.Snapshot() == snap);
  EXPECT_EQ(m2.params, params);
  // Both continue alike.
  m.FillGrads(4);
  m2.FillGrads(4);
  a.Step(1e-3, {.max_grad_norm = 5.0});
  b.Step(1e-3, {.max_grad_norm = 5.0});
  EXPECT_TRUE(a.Snapshot() == b.Snapshot());
  EXPECT_EQ(m.params, m2.params);
}

TEST(MixedFormatsHost, RestoreWithAnotherTensorsFormatsFailsNamingItAndChangesNothing) {
  Model m;
  m.Init(5);
  HybridOptimizer a(testing::WithMixedFormats(m.Specs(2)), Config(testing::kMixedDefault, 0.5));
  m.FillGrads(1);
  a.Step(1e-3);
  const OptimizerSnapshot snap = a.Snapshot();

  // The same optimizer but tensor 3 without its override.
  Model m2;
  m2.Init(6);
  std::vector<TensorSpec> specs = testing::WithMixedFormats(m2.Specs(2));
  specs[3].formats.reset();
  HybridOptimizer b(specs, Config(testing::kMixedDefault, 0.5));
  m2.FillGrads(1);
  b.Step(2e-3);
  const OptimizerSnapshot before = b.Snapshot();
  const auto params_before = m2.params;
  try {
    b.Restore(snap);
    ADD_FAILURE() << "restored a snapshot whose tensor 3 has other formats";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'layer3'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(Name(testing::kF32Moments)), std::string::npos) << msg;
    EXPECT_NE(msg.find(Name(testing::kMixedDefault)), std::string::npos) << msg;
  }
  EXPECT_TRUE(b.Snapshot() == before);
  EXPECT_EQ(m2.params, params_before);
  // The snapshot's default formats alone do not matter: only each tensor's.
  OptimizerSnapshot other_default = snap;
  other_default.formats = StateFormats{};
  EXPECT_NO_THROW(a.Restore(other_default));
}

TEST(MixedFormatsHost, OverridesAreValidatedLikeTheConfiguredFormats) {
  Model m;
  m.Init(1);
  auto expect_bad = [&](std::vector<TensorSpec> specs, const OptimizerConfig& c,
                        std::vector<std::string> needles) {
    try {
      HybridOptimizer opt(std::move(specs), c);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      for (const std::string& n : needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  };
  // Lion keeps no variance.
  OptimizerConfig lion =
      Config({MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kF32}, 0.5);
  lion.algorithm = Algorithm::kLion;
  std::vector<TensorSpec> specs = m.Specs(2);
  specs[2].formats = StateFormats{MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kQ8};
  expect_bad(specs, lion, {"'layer2'", "variance format q8", "lion"});
  // SGD without momentum in the tensor's group keeps no momentum buffer; the other group
  // (with momentum) may have a q8 one.
  OptimizerConfig sgd = Config(StateFormats{}, 0.5);
  sgd.algorithm = Algorithm::kSGD;
  sgd.groups[0].momentum = 0.9;
  specs = m.Specs(2);
  specs[1].formats = StateFormats{MasterFormat::kF32, MomentFormat::kQ8, MomentFormat::kF32};
  expect_bad(specs, sgd, {"'layer1'", "group 1", "momentum format q8"});
  specs = m.Specs(2);
  specs[2].formats = StateFormats{MasterFormat::kF32, MomentFormat::kQ8, MomentFormat::kF32};
  EXPECT_NO_THROW(HybridOptimizer(specs, sgd));
  // An unknown value.
  specs = m.Specs(2);
  StateFormats bad;
  bad.master = static_cast<MasterFormat>(9);
  specs[0].formats = bad;
  expect_bad(specs, Config(testing::kMixedDefault, 0.5), {"'layer0'", "unknown state format"});
}

}  // namespace
}  // namespace tandem
