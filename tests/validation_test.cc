// Bad input is rejected with an error that names what is wrong, and nothing is written.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/reference_step.h"
#include "engine/tensor_state.h"
#include "tandem/error.h"

namespace tandem {
namespace {

// Runs fn, expects Error of `kind` whose message contains every string in `needles`.
template <typename Fn>
void ExpectError(Fn fn, ErrorKind kind, std::initializer_list<const char*> needles) {
  try {
    fn();
    FAIL() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const char* n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message '" << e.what() << "' lacks '" << n << "'";
  }
}

TEST(Validation, NonFiniteAndOutOfRangeHyperParameters) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  HyperParams h;
  h.beta1 = nan;
  ExpectError([&] { ComputeStepScalars(Algorithm::kAdamW, h, 1e-3, 1, 1); },
              ErrorKind::kInvalidArgument, {"beta1"});
  h = {};
  h.eps = 0;
  ExpectError([&] { ComputeStepScalars(Algorithm::kAdam, h, 1e-3, 1, 1); },
              ErrorKind::kInvalidArgument, {"eps"});
  h = {};
  h.weight_decay = -1;
  ExpectError([&] { ComputeStepScalars(Algorithm::kLion, h, 1e-3, 1, 1); },
              ErrorKind::kInvalidArgument, {"weight_decay"});
  h = {};
  h.beta2 = 1.0;
  ExpectError([&] { ComputeStepScalars(Algorithm::kLion, h, 1e-3, 1, 1); },
              ErrorKind::kInvalidArgument, {"beta2"});
  h = {};
  h.nesterov = true;
  ExpectError([&] { ComputeStepScalars(Algorithm::kSGD, h, 1e-3, 1, 1); },
              ErrorKind::kInvalidArgument, {"momentum = 0.000000", "> 0 when nesterov is set"});
  try {  // the momentum is at fault, not the (default, zero) dampening
    ComputeStepScalars(Algorithm::kSGD, h, 1e-3, 1, 1);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("dampening"), std::string::npos) << e.what();
  }
  // Nesterov with momentum but with dampening blames the dampening.
  h.momentum = 0.9;
  h.dampening = 0.1;
  ExpectError([&] { ComputeStepScalars(Algorithm::kSGD, h, 1e-3, 1, 1); },
              ErrorKind::kInvalidArgument, {"dampening = 0.100000", "0 when nesterov is set"});
  h = {};
  h.lr_scale = inf;
  ExpectError([&] { ComputeStepScalars(Algorithm::kSGD, h, 1e-3, 1, 1); },
              ErrorKind::kInvalidArgument, {"lr_scale"});
  ExpectError([&] { ComputeStepScalars(Algorithm::kAdamW, {}, nan, 1, 1); },
              ErrorKind::kInvalidArgument, {"learning rate"});
  ExpectError([&] { ComputeStepScalars(Algorithm::kAdamW, {}, 1e-3, 0, 1); },
              ErrorKind::kInvalidArgument, {"step number"});
  ExpectError([&] { ComputeStepScalars(Algorithm::kAdamW, {}, 1e-3, 1, inf); },
              ErrorKind::kInvalidArgument, {"gradient multiplier"});
  ExpectError([&] { ComputeStepScalars(static_cast<Algorithm>(9), {}, 1e-3, 1, 1); },
              ErrorKind::kInvalidArgument, {"unknown algorithm"});
}

TEST(Validation, NullPointersAndFormatCombinations) {
  const size_t n = 40;
  std::vector<float> w(n, 1.0f), g(n, 0.5f);
  HyperParams h;
  const StepScalars s = ComputeStepScalars(Algorithm::kAdamW, h, 1e-3, 1, 1);
  StateFormats f{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  TensorState st(Algorithm::kAdamW, h, f, w.data(), n);
  const TensorState before = st;

  StepSpan sp = st.Span(0, n, g.data(), DType::kF32);
  sp.grad = nullptr;
  ExpectError([&] { ReferenceStep(s, sp); }, ErrorKind::kInvalidArgument, {"grad is null"});
  sp = st.Span(0, n, g.data(), DType::kF32);
  sp.master.ecc8 = nullptr;
  ExpectError([&] { ReferenceStep(s, sp); }, ErrorKind::kInvalidArgument, {"master.ecc8"});
  sp = st.Span(0, n, g.data(), DType::kF32);
  sp.v.scales = nullptr;
  ExpectError([&] { ReferenceStep(s, sp); }, ErrorKind::kInvalidArgument, {"v.scales"});
  sp = st.Span(0, n, g.data(), DType::kF32);
  sp.formats.master = static_cast<MasterFormat>(7);
  ExpectError([&] { ReferenceStep(s, sp); }, ErrorKind::kInvalidArgument,
              {"unknown master format"});
  sp = st.Span(0, n, g.data(), DType::kF32);
  sp.grad_dtype = static_cast<DType>(5);
  ExpectError([&] { ReferenceStep(s, sp); }, ErrorKind::kInvalidArgument, {"gradient dtype"});

  // Lion keeps no variance; SGD without momentum keeps no buffer.
  const StepScalars lion = ComputeStepScalars(Algorithm::kLion, h, 1e-3, 1, 1);
  ExpectError([&] { ReferenceStep(lion, st.Span(0, n, g.data(), DType::kF32)); },
              ErrorKind::kInvalidArgument, {"variance format q8", "lion"});
  HyperParams plain;
  const StepScalars sgd = ComputeStepScalars(Algorithm::kSGD, plain, 1e-3, 1, 1);
  TensorState sst(Algorithm::kSGD, plain, {MasterFormat::kF32, MomentFormat::kQ8,
                                          MomentFormat::kF32}, w.data(), n);
  ExpectError([&] { ReferenceStep(sgd, sst.Span(0, n, g.data(), DType::kF32)); },
              ErrorKind::kInvalidArgument, {"momentum format q8", "momentum 0"});

  // Mismatched ranges when cutting spans.
  ExpectError([&] { st.Span(8, 8, g.data(), DType::kF32); }, ErrorKind::kInvalidArgument,
              {"group boundary"});
  ExpectError([&] { st.Span(32, 9, g.data(), DType::kF32); }, ErrorKind::kInvalidArgument,
              {"[32, 41)", "40-element"});

  // Nothing was written by any failed call.
  EXPECT_EQ(st.master_bf16, before.master_bf16);
  EXPECT_EQ(st.ecc8, before.ecc8);
  EXPECT_EQ(st.m_codes, before.m_codes);
  EXPECT_EQ(st.v_scales, before.v_scales);
}

TEST(Validation, NamesParseAndRejectUnknown) {
  EXPECT_EQ(ParseMasterFormat("bf16+ecc8"), MasterFormat::kBF16Ecc8);
  EXPECT_EQ(ParseAlgorithm("lion"), Algorithm::kLion);
  EXPECT_EQ(ParseMomentFormat("q8"), MomentFormat::kQ8);
  EXPECT_EQ(ParseDType("f16"), DType::kF16);
  ExpectError([] { ParseMasterFormat("fp8"); }, ErrorKind::kInvalidArgument,
              {"master format 'fp8'", "bf16+ecc16"});
  ExpectError([] { ParseAlgorithm("adagrad"); }, ErrorKind::kInvalidArgument, {"adagrad"});
}

TEST(Validation, StateBytesPerFormat) {
  HyperParams h;
  const size_t n = 32 * 1000;
  EXPECT_EQ(StateBytes(Algorithm::kAdamW, h, {}, n), 12 * n);
  EXPECT_EQ(StateBytes(Algorithm::kAdamW, h,
                       {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}, n),
            5 * n + 4 * (n / 32));
  EXPECT_EQ(StateBytes(Algorithm::kSGD, h, {}, n), 4 * n);
  h.momentum = 0.9;
  EXPECT_EQ(StateBytes(Algorithm::kSGD, h, {MasterFormat::kBF16, MomentFormat::kQ8,
                                           MomentFormat::kF32}, n),
            3 * n + 2 * (n / 32));
}

}  // namespace
}  // namespace tandem
