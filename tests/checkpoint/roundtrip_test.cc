#include <gtest/gtest.h>

#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tests/checkpoint/test_util.h"

namespace tandem {
namespace {

using testing::AllCombinations;
using testing::MakeSnapshot;

class RoundTripTest : public ::testing::TestWithParam<CheckpointCompression> {};

TEST_P(RoundTripTest, EveryAlgorithmAndFormatIsBitIdentical) {
  auto env = NewMemEnv();
  CheckpointOptions o;
  o.compression = GetParam();
  uint32_t seed = 1;
  for (const auto& [algo, formats] : AllCombinations()) {
    const OptimizerSnapshot s = MakeSnapshot(algo, formats, seed++);
    SaveCheckpoint(s, "ckpt", o, env.get());
    const OptimizerSnapshot back = LoadCheckpoint("ckpt", env.get());
    ASSERT_TRUE(testing::SameBits(back, s)) << Name(algo) << " " << Name(formats);
    EXPECT_TRUE(VerifyCheckpoint("ckpt", env.get()).ok);
    EXPECT_FALSE(env->FileExists("ckpt.tmp"));
  }
}

INSTANTIATE_TEST_SUITE_P(Compression, RoundTripTest,
                         ::testing::Values(CheckpointCompression::kNone,
                                           CheckpointCompression::kAuto,
                                           CheckpointCompression::kAll));

TEST(RoundTrip, EmptySnapshotAndNoTensors) {
  auto env = NewMemEnv();
  OptimizerSnapshot s;
  s.groups.resize(1);
  SaveCheckpoint(s, "e", {}, env.get());
  EXPECT_TRUE(testing::SameBits(LoadCheckpoint("e", env.get()), s));
}

TEST(RoundTrip, CompressibleStateIsCompressedAndExact) {
  auto env = NewMemEnv();
  const OptimizerSnapshot s = testing::MakeCompressibleSnapshot(3);
  CheckpointOptions o;
  o.compression = CheckpointCompression::kAuto;
  SaveCheckpoint(s, "z", o, env.get());
  const CheckpointInfo info = InspectCheckpoint("z", env.get());
  size_t deflated = 0;
  for (const auto& sec : info.sections) deflated += sec.compression == "deflate";
  EXPECT_GT(deflated, 0u);
  EXPECT_TRUE(testing::SameBits(LoadCheckpoint("z", env.get()), s));
  SaveCheckpoint(s, "plain", {}, env.get());
  EXPECT_LT(info.file_size, InspectCheckpoint("plain", env.get()).file_size);
}

TEST(RoundTrip, OverwritesPreviousCheckpoint) {
  auto env = NewMemEnv();
  const auto a = MakeSnapshot(Algorithm::kAdamW, {}, 1);
  const auto b = MakeSnapshot(Algorithm::kLion, {MasterFormat::kBF16, MomentFormat::kQ8, MomentFormat::kQ8}, 2);
  SaveCheckpoint(a, "p", {}, env.get());
  SaveCheckpoint(b, "p", {}, env.get());
  EXPECT_TRUE(testing::SameBits(LoadCheckpoint("p", env.get()), b));
}

TEST(RoundTrip, InspectReportsManifest) {
  auto env = NewMemEnv();
  const auto s = MakeSnapshot(Algorithm::kSGD, {MasterFormat::kBF16Ecc16, MomentFormat::kQ8, MomentFormat::kF32}, 9);
  SaveCheckpoint(s, "i", {}, env.get());
  const CheckpointInfo info = InspectCheckpoint("i", env.get());
  EXPECT_EQ(info.algo, s.algo);
  EXPECT_EQ(info.formats, s.formats);
  EXPECT_EQ(info.groups, s.groups);
  EXPECT_EQ(info.step, s.step);
  ASSERT_EQ(info.tensors.size(), s.tensors.size());
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    EXPECT_EQ(info.tensors[i].name, s.tensors[i].name);
    EXPECT_EQ(info.tensors[i].numel, s.tensors[i].numel);
    EXPECT_TRUE(info.tensors[i].master_bf16.empty());
  }
  for (const auto& sec : info.sections) EXPECT_EQ(sec.offset % 64, 0u);
}

TEST(RoundTrip, SaveRejectsInvalidSnapshotAndWritesNothing) {
  auto env = NewMemEnv();
  auto s = MakeSnapshot(Algorithm::kAdamW, {}, 1);
  s.tensors[2].m_f32.pop_back();
  try {
    SaveCheckpoint(s, "bad", {}, env.get());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("m_f32"), std::string::npos);
  }
  EXPECT_FALSE(env->FileExists("bad"));
  EXPECT_FALSE(env->FileExists("bad.tmp"));
}

TEST(RoundTrip, SaveRejectsDuplicateTensorNamesAndWritesNothing) {
  auto env = NewMemEnv();
  auto s = MakeSnapshot(Algorithm::kAdamW, {}, 1);
  s.tensors[3].name = s.tensors[1].name;
  try {
    SaveCheckpoint(s, "dup", {}, env.get());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("duplicate name"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(s.tensors[1].name), std::string::npos) << e.what();
  }
  EXPECT_FALSE(env->FileExists("dup"));
}

TEST(RoundTrip, SaveRejectsNonUtf8Name) {
  auto env = NewMemEnv();
  auto s = MakeSnapshot(Algorithm::kAdamW, {}, 1);
  s.tensors[0].name = "\xff\xfe";
  EXPECT_THROW(SaveCheckpoint(s, "bad", {}, env.get()), Error);
  EXPECT_FALSE(env->FileExists("bad.tmp"));
}

TEST(RoundTrip, MissingFileIsIOError) {
  auto env = NewMemEnv();
  try {
    LoadCheckpoint("nope", env.get());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIO);
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos);
  }
}

}  // namespace
}  // namespace tandem
