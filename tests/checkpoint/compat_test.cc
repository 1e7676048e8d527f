#include <gtest/gtest.h>

#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tests/checkpoint/test_util.h"

namespace tandem {
namespace {

class CompatTest : public ::testing::Test {
 protected:
  void ExpectMismatch(const OptimizerSnapshot& loaded, const std::vector<std::string>& needles) {
    try {
      CheckCompatible(loaded, layout_);
      ADD_FAILURE() << "no mismatch reported";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      for (const auto& n : needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  }
  OptimizerSnapshot layout_ = testing::MakeSnapshot(
      Algorithm::kAdamW, {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}, 1);
};

TEST_F(CompatTest, SameStructureDifferentContentsIsCompatible) {
  auto other = testing::MakeSnapshot(layout_.algo, layout_.formats, 2);
  other.step = 1000;
  other.groups[0].lr_scale = 3;
  EXPECT_NO_THROW(CheckCompatible(other, layout_));
  EXPECT_NO_THROW(CheckCompatible(layout_, layout_));
}

TEST_F(CompatTest, Algorithm) {
  auto s = layout_;
  s.algo = Algorithm::kLion;
  ExpectMismatch(s, {"algorithm", "lion", "adamw"});
}

TEST_F(CompatTest, Formats) {
  auto s = layout_;
  s.formats.master = MasterFormat::kBF16Ecc16;
  ExpectMismatch(s, {"formats", "bf16+ecc16", "bf16+ecc8"});
  s = layout_;
  s.formats.variance = MomentFormat::kF32;
  ExpectMismatch(s, {"formats", "v=f32"});
}

TEST_F(CompatTest, PerTensorFormats) {
  auto s = layout_;
  s.tensors[3].formats.momentum = MomentFormat::kF32;
  ExpectMismatch(s, {"tensor 3", "'layer.3.weight'", "state formats", "m=f32", "m=q8"});
}

TEST(CompatMixedTest, SameOverridesAreCompatible) {
  const StateFormats q8{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  const std::map<size_t, StateFormats> over{{1, StateFormats{}}};
  const auto a = testing::MakeSnapshot(Algorithm::kAdamW, q8, 1, {5, 40}, over);
  const auto b = testing::MakeSnapshot(Algorithm::kAdamW, q8, 2, {5, 40}, over);
  EXPECT_NO_THROW(CheckCompatible(a, b));
  EXPECT_THROW(CheckCompatible(a, testing::MakeSnapshot(Algorithm::kAdamW, q8, 2, {5, 40})), Error);
}

TEST_F(CompatTest, GroupCount) {
  auto s = layout_;
  s.groups.push_back({});
  ExpectMismatch(s, {"group count", "3", "2"});
}

TEST_F(CompatTest, TensorCount) {
  auto s = layout_;
  s.tensors.pop_back();
  ExpectMismatch(s, {"tensor count", "5", "6"});
}

TEST_F(CompatTest, Name) {
  auto s = layout_;
  s.tensors[3].name = "renamed";
  ExpectMismatch(s, {"tensor 3 name", "'renamed'", "'layer.3.weight'"});
}

TEST_F(CompatTest, Numel) {
  auto s = layout_;
  s.tensors[4].numel = 34;
  ExpectMismatch(s, {"tensor 4", "layer.4.weight", "numel", "34", "33"});
}

TEST_F(CompatTest, DtypesAndGroup) {
  auto s = layout_;
  s.tensors[1].param_dtype = DType::kF16;
  ExpectMismatch(s, {"tensor 1", "param dtype", "f16"});
  s = layout_;
  s.tensors[1].grad_dtype = DType::kF32;
  ExpectMismatch(s, {"tensor 1", "grad dtype"});
  s = layout_;
  s.tensors[1].group = 0;
  ExpectMismatch(s, {"tensor 1", "group"});
}

TEST_F(CompatTest, ShapeWhenBothHaveOne) {
  ASSERT_EQ(layout_.tensors[3].shape, (std::vector<uint64_t>{4, 2, 4}));
  auto s = layout_;
  s.tensors[3].shape = {8, 4};
  ExpectMismatch(s, {"tensor 3", "layer.3.weight", "shape", "[8, 4]", "[4, 2, 4]"});
  s.tensors[3].shape = {};  // one side without a shape: not compared
  EXPECT_NO_THROW(CheckCompatible(s, layout_));
  EXPECT_NO_THROW(CheckCompatible(layout_, s));
}

TEST_F(CompatTest, StepsAndMetadataAreNotCompared) {
  auto s = layout_;
  s.tensors[2].step = 0;
  s.metadata = "something else";
  EXPECT_NO_THROW(CheckCompatible(s, layout_));
}

TEST_F(CompatTest, LoadedCheckpointAgainstLayout) {
  auto env = NewMemEnv();
  SaveCheckpoint(layout_, "c", {}, env.get());
  EXPECT_NO_THROW(CheckCompatible(LoadCheckpoint("c", env.get()), layout_));
  auto other = testing::MakeSnapshot(Algorithm::kAdamW, layout_.formats, 1, {0, 1, 31, 32, 33, 201});
  try {
    CheckCompatible(LoadCheckpoint("c", env.get()), other);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
