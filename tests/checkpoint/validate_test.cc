// ValidateSnapshot's range and value checks, and that LoadCheckpoint and VerifyCheckpoint
// refuse files whose CRCs are good but whose contents break them.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tests/checkpoint/test_util.h"

namespace tandem {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Expects ValidateSnapshot(s) to throw kInvalidArgument with every needle in the message.
void ExpectInvalid(const OptimizerSnapshot& s, const std::vector<std::string>& needles) {
  try {
    ValidateSnapshot(s);
    ADD_FAILURE() << "accepted; expected " << needles[0];
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    for (const std::string& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

// A valid snapshot changed by edit(); tensor 1 ("layer.1.weight", 33 elements, group 1).
OptimizerSnapshot Edited(Algorithm algo, StateFormats f,
                         const std::function<void(OptimizerSnapshot&)>& edit) {
  OptimizerSnapshot s = testing::MakeSnapshot(algo, f, 4, {8, 33, 64});
  edit(s);
  return s;
}

const StateFormats kF32{};
const StateFormats kBf16Q8{MasterFormat::kBF16, MomentFormat::kQ8, MomentFormat::kQ8};

TEST(ValidateTest, GlobalStepRange) {
  OptimizerSnapshot s =
      Edited(Algorithm::kAdamW, kF32, [](OptimizerSnapshot& s) { s.step = int64_t{1} << 53; });
  EXPECT_NO_THROW(ValidateSnapshot(s));
  s.step = (int64_t{1} << 53) + 1;
  ExpectInvalid(s, {"snapshot step 9007199254740993", "[0, 2^53]"});
  s.step = std::numeric_limits<int64_t>::max();
  ExpectInvalid(s, {"snapshot step 9223372036854775807"});
  s.step = -1;
  ExpectInvalid(s, {"snapshot step -1"});
}

TEST(ValidateTest, TensorStepRange) {
  auto s =
      Edited(Algorithm::kAdamW, kF32, [](OptimizerSnapshot& s) { s.tensors[1].step = s.step + 1; });
  ExpectInvalid(s, {"tensor 'layer.1.weight'", "step " + std::to_string(s.step + 1),
                    "[0, " + std::to_string(s.step) + "]"});
  s.tensors[1].step = -3;
  ExpectInvalid(s, {"tensor 'layer.1.weight'", "step -3"});
  s.tensors[1].step = s.step;
  EXPECT_NO_THROW(ValidateSnapshot(s));
  s.tensors[1].step = 0;
  EXPECT_NO_THROW(ValidateSnapshot(s));
}

TEST(ValidateTest, ShapeProduct) {
  auto s = Edited(Algorithm::kAdamW, kF32, [](OptimizerSnapshot& s) {
    s.tensors[1].shape = {3, 11};
  });
  EXPECT_NO_THROW(ValidateSnapshot(s));
  s.tensors[1].shape = {3, 12};
  ExpectInvalid(s, {"tensor 'layer.1.weight'", "shape [3, 12] has 36 elements, numel is 33"});
  s.tensors[1].shape = {uint64_t{1} << 32, uint64_t{1} << 32, 33};  // wraps to 0 in 64 bits
  ExpectInvalid(s, {"tensor 'layer.1.weight'", "more than 2^64"});
  s.tensors[1].shape = {33, 0};
  ExpectInvalid(s, {"has 0 elements, numel is 33"});
  s.tensors[1].shape = {};
  EXPECT_NO_THROW(ValidateSnapshot(s));
}

TEST(ValidateTest, NaNOrInfiniteFp32Master) {
  auto s = Edited(Algorithm::kAdamW, kF32,
                  [](OptimizerSnapshot& s) { s.tensors[1].master_f32[7] = kNaN; });
  ExpectInvalid(s, {"tensor 'layer.1.weight'", "master_f32[7] is NaN"});
  s.tensors[1].master_f32[7] = -kInf;
  ExpectInvalid(s, {"master_f32[7] is infinite"});
  s.tensors[1].master_f32[7] = -0.0f;
  EXPECT_NO_THROW(ValidateSnapshot(s));
}

TEST(ValidateTest, NaNOrInfiniteBf16Master) {
  for (MasterFormat m : {MasterFormat::kBF16, MasterFormat::kBF16Ecc8, MasterFormat::kBF16Ecc16}) {
    SCOPED_TRACE(Name(m));
    auto s = Edited(Algorithm::kLion, {m, MomentFormat::kF32, MomentFormat::kF32},
                    [](OptimizerSnapshot& s) { s.tensors[2].master_bf16[40] = 0x7FC1; });
    ExpectInvalid(s, {"tensor 'layer.2.weight'", "master_bf16[40] is NaN"});
    s.tensors[2].master_bf16[40] = 0xFF80;
    ExpectInvalid(s, {"master_bf16[40] is infinite"});
  }
}

TEST(ValidateTest, EccCorrectionThatDecodesToNaN) {
  auto s =
      Edited(Algorithm::kAdamW, {MasterFormat::kBF16Ecc8, MomentFormat::kF32, MomentFormat::kF32},
             [](OptimizerSnapshot& s) {
               s.tensors[0].master_bf16[3] = 0x0000;  // +0 with a negative correction
               s.tensors[0].ecc8[3] = -1;
             });
  ExpectInvalid(s, {"tensor 'layer.0.weight'", "master_bf16[3] with ecc8[3] decodes to NaN"});
  s = Edited(Algorithm::kAdamW, {MasterFormat::kBF16Ecc16, MomentFormat::kF32, MomentFormat::kF32},
             [](OptimizerSnapshot& s) {
               s.tensors[0].master_bf16[3] = 0x8000;
               s.tensors[0].ecc16[3] = -7;
             });
  ExpectInvalid(s, {"master_bf16[3] with ecc16[3] decodes to NaN"});
}

TEST(ValidateTest, NaNOrInfiniteMoment) {
  auto s =
      Edited(Algorithm::kAdamW, kF32, [](OptimizerSnapshot& s) { s.tensors[1].m_f32[32] = kNaN; });
  ExpectInvalid(s, {"tensor 'layer.1.weight'", "m_f32[32] is NaN"});
  s.tensors[1].m_f32[32] = kInf;
  ExpectInvalid(s, {"m_f32[32] is infinite"});
  s.tensors[1].m_f32[32] = -1e30f;  // a negative momentum is fine
  EXPECT_NO_THROW(ValidateSnapshot(s));
}

TEST(ValidateTest, NegativeNaNOrInfiniteVariance) {
  auto s =
      Edited(Algorithm::kAdam, kF32, [](OptimizerSnapshot& s) { s.tensors[1].v_f32[2] = -1e-30f; });
  ExpectInvalid(s, {"tensor 'layer.1.weight'", "v_f32[2] is negative"});
  s.tensors[1].v_f32[2] = kNaN;
  ExpectInvalid(s, {"v_f32[2] is NaN"});
  s.tensors[1].v_f32[2] = kInf;
  ExpectInvalid(s, {"v_f32[2] is infinite"});
  s.tensors[1].v_f32[2] = -0.0f;  // -0 is zero
  EXPECT_NO_THROW(ValidateSnapshot(s));
}

TEST(ValidateTest, NaNInfiniteOrNegativeScales) {
  auto s = Edited(Algorithm::kAdamW, kBf16Q8,
                  [](OptimizerSnapshot& s) { s.tensors[1].m_scales[1] = 0x7FC0; });
  ExpectInvalid(s, {"tensor 'layer.1.weight'", "m_scales[1] is NaN"});
  s.tensors[1].m_scales[1] = 0xBF80;  // -1
  ExpectInvalid(s, {"m_scales[1] is negative"});
  s.tensors[1].m_scales[1] = 0x3F80;
  s.tensors[1].v_scales[0] = 0x7F80;
  ExpectInvalid(s, {"v_scales[0] is infinite"});
  s.tensors[1].v_scales[0] = 0x8000;  // -0: the sign bit is refused
  ExpectInvalid(s, {"v_scales[0] is negative"});
  s.tensors[1].v_scales[0] = 0x0080;  // FLT_MIN, the encoder's floor
  EXPECT_NO_THROW(ValidateSnapshot(s));
}

TEST(ValidateTest, FirstBadElementByIndexOnLargeTensors) {
  // Large enough to be scanned in parallel chunks; the lowest index is reported.
  OptimizerSnapshot s = testing::MakeSnapshot(Algorithm::kAdamW, kF32, 9, {3u << 20});
  std::vector<float>& m = s.tensors[0].master_f32;
  m[3000001] = kNaN;
  m[2900000] = kInf;
  m[3100000] = kNaN;
  for (int run = 0; run < 5; ++run) ExpectInvalid(s, {"master_f32[2900000] is infinite"});
  m[2900000] = 1.0f;
  s.tensors[0].v_f32[100] = -1.0f;  // a later array: master is reported first
  ExpectInvalid(s, {"master_f32[3000001] is NaN"});
}

// ---- files with good CRCs and bad contents -------------------------------------------

// Load and Verify refuse `bytes` with `needle` in their one problem; with `in_state`, as a
// state the sections hold ("inconsistent state", every section still read), else as a
// manifest.
void ExpectLoadAndVerifyRefuse(const std::string& bytes, const std::string& needle,
                               bool in_state = true) {
  auto env = NewMemEnv();
  testing::WriteAll(env.get(), "bad", bytes);
  try {
    LoadCheckpoint("bad", env.get());
    ADD_FAILURE() << "loaded; expected " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCorruption) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    if (in_state) {
      EXPECT_NE(std::string(e.what()).find("inconsistent state"), std::string::npos) << e.what();
    }
  }
  const VerifyReport r = VerifyCheckpoint("bad", env.get());
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find(needle), std::string::npos) << r.problems[0];
  if (in_state) {
    EXPECT_EQ(r.sections_checked, r.info.sections.size());  // every section was still read
  }
}

TEST(ValidateTest, LoadAndVerifyRefuseDuplicateNames) {
  ExpectLoadAndVerifyRefuse(testing::DuplicateNameFile(),
                            "tensor 'layer.0.weight': duplicate name");
}

TEST(ValidateTest, LoadAndVerifyRefuseStepOverflow) {
  ExpectLoadAndVerifyRefuse(testing::StepOverflowFile(), "snapshot step 9223372036854775807");
}

TEST(ValidateTest, LoadAndVerifyRefuseNaNValues) {
  ExpectLoadAndVerifyRefuse(testing::NaNMasterFile(),
                            "tensor 'layer.1.weight': master_f32[5] is NaN");
}

// SGD keeps a momentum buffer where the group's momentum is not 0: groups and arrays that
// disagree are named as such, not as an array of the wrong size.
TEST(ValidateTest, SgdMomentumBufferAndGroupsDisagree) {
  auto s = Edited(Algorithm::kSGD, kF32, [](OptimizerSnapshot& s) { s.groups[1].momentum = 0.5; });
  ExpectInvalid(s, {"tensor 'layer.1.weight': group 1 has SGD momentum 0.5, which keeps a "
                    "momentum buffer, but the tensor has none (its groups and its momentum "
                    "arrays disagree)"});
  s = Edited(Algorithm::kSGD, kBf16Q8, [](OptimizerSnapshot& s) { s.groups[0].momentum = 0; });
  ExpectInvalid(s, {"tensor 'layer.0.weight': group 0 has SGD momentum 0, which keeps no "
                    "momentum buffer, but the tensor has one"});
  // A file whose manifest's groups were edited (every CRC good) says the same at load.
  auto env = NewMemEnv();
  SaveCheckpoint(testing::MakeSnapshot(Algorithm::kSGD, kF32, 4, {8, 33, 64}), "good", {},
                 env.get());
  ExpectLoadAndVerifyRefuse(
      testing::WithManifest(testing::ReadAll(env.get(), "good"),
                            [](nlohmann::json& j) { j["groups"][1]["momentum"] = 0.5; }),
      "tensor 'layer.1.weight': group 1 has SGD momentum 0.5, which keeps a momentum buffer, "
      "but the tensor has none",
      /*in_state=*/false);
}

TEST(ValidateTest, VerifyListsEveryProblem) {
  // A duplicate name and a NaN in another tensor: Load reports the first, Verify both.
  std::string bytes = testing::NaNMasterFile();
  bytes = testing::WithManifest(
      bytes, [](nlohmann::json& j) { j["tensors"][2]["name"] = "layer.0.weight"; });
  auto env = NewMemEnv();
  testing::WriteAll(env.get(), "bad", bytes);
  const VerifyReport r = VerifyCheckpoint("bad", env.get());
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_NE(r.problems[0].find("duplicate name"), std::string::npos) << r.problems[0];
  EXPECT_NE(r.problems[1].find("master_f32[5] is NaN"), std::string::npos) << r.problems[1];
  EXPECT_THROW(LoadCheckpoint("bad", env.get()), Error);
}

TEST(ValidateTest, SaveRefusesInvalidValuesAndWritesNothing) {
  auto env = NewMemEnv();
  auto s =
      Edited(Algorithm::kAdamW, kF32, [](OptimizerSnapshot& s) { s.tensors[1].v_f32[0] = -2.0f; });
  EXPECT_THROW(SaveCheckpoint(s, "c", {}, env.get()), Error);
  EXPECT_FALSE(env->FileExists("c"));
  EXPECT_FALSE(env->FileExists("c.tmp"));
}

}  // namespace
}  // namespace tandem
