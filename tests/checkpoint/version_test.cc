// Format versions: version 1 and 2 files (committed goldens) still load, their tensors in
// the file's formats; version 2 carries shapes, per-tensor steps and metadata byte for
// byte; version 3 per-tensor formats; the manifest fields of versions 2 and 3 are
// required and checked.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "checkpoint/format.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tests/checkpoint/golden_snapshot.h"
#include "tests/checkpoint/test_util.h"

namespace tandem {
namespace {

using nlohmann::json;

const StateFormats kEcc8Q8{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};

std::string Golden(const char* name) { return std::string(TANDEM_CKPT_GOLDEN_DIR) + "/" + name; }

// What a version 1 file loads to: each tensor's step is the file's step.
OptimizerSnapshot AsLoadedFromV1(OptimizerSnapshot s) {
  for (TensorSnapshot& t : s.tensors) t.step = s.step;
  return s;
}

TEST(VersionTest, WriterWritesTheCurrentVersion) {
  auto env = NewMemEnv();
  SaveCheckpoint(testing::GoldenSnapshot(Algorithm::kAdamW, kEcc8Q8), "c", {}, env.get());
  EXPECT_EQ(InspectCheckpoint("c", env.get()).version, ckpt::kVersion);
  EXPECT_EQ(ckpt::kVersion, 3u);
}

TEST(VersionTest, Version1GoldenFilesLoad) {
  struct Case {
    const char* file;
    Algorithm algo;
    StateFormats formats;
  } cases[] = {{"v1_adamw_ecc8_q8.ckpt", Algorithm::kAdamW, kEcc8Q8},
               {"v1_sgd_f32_deflate.ckpt", Algorithm::kSGD, {}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string path = Golden(c.file);
    const CheckpointInfo info = InspectCheckpoint(path);
    EXPECT_EQ(info.version, 1u);
    EXPECT_TRUE(info.metadata.empty());
    for (const TensorSnapshot& t : info.tensors) {
      EXPECT_EQ(t.step, 42);
      EXPECT_TRUE(t.shape.empty());
    }
    const OptimizerSnapshot want = AsLoadedFromV1(testing::GoldenSnapshot(c.algo, c.formats));
    const OptimizerSnapshot got = LoadCheckpoint(path);
    EXPECT_TRUE(testing::SameBits(got, want));
    const VerifyReport r = VerifyCheckpoint(path);
    EXPECT_TRUE(r.ok) << (r.problems.empty() ? "" : r.problems[0]);
    for (const TensorSnapshot& t : got.tensors) EXPECT_EQ(t.formats, c.formats);
    // Saved again, it becomes a file of the current version with the same contents.
    auto env = NewMemEnv();
    SaveCheckpoint(got, "again", {}, env.get());
    EXPECT_EQ(InspectCheckpoint("again", env.get()).version, ckpt::kVersion);
    EXPECT_TRUE(testing::SameBits(LoadCheckpoint("again", env.get()), want));
  }
}

TEST(VersionTest, Version2GoldenFileLoadsWithTheFileFormatsForEveryTensor) {
  const std::string path = Golden("v2_adamw_ecc8_q8.ckpt");
  const CheckpointInfo info = InspectCheckpoint(path);
  EXPECT_EQ(info.version, 2u);
  for (const TensorSnapshot& t : info.tensors) EXPECT_EQ(t.formats, kEcc8Q8) << t.name;
  const OptimizerSnapshot got = LoadCheckpoint(path);
  EXPECT_TRUE(testing::SameBits(got, testing::V2Golden()));
  EXPECT_EQ(got.metadata, "{\"golden\": \"v2\"}");
  const VerifyReport r = VerifyCheckpoint(path);
  EXPECT_TRUE(r.ok) << (r.problems.empty() ? "" : r.problems[0]);
  auto env = NewMemEnv();
  SaveCheckpoint(got, "again", {}, env.get());
  EXPECT_EQ(InspectCheckpoint("again", env.get()).version, 3u);
  EXPECT_TRUE(testing::SameBits(LoadCheckpoint("again", env.get()), got));
}

TEST(VersionTest, Version3GoldenFileKeepsPerTensorFormats) {
  const std::string path = Golden("v3_adamw_mixed.ckpt");
  const CheckpointInfo info = InspectCheckpoint(path);
  EXPECT_EQ(info.version, 3u);
  EXPECT_EQ(info.formats, kEcc8Q8);
  ASSERT_EQ(info.tensors.size(), 3u);
  EXPECT_EQ(info.tensors[0].formats, kEcc8Q8);
  EXPECT_EQ(info.tensors[1].formats, testing::kGoldenOverride);
  EXPECT_EQ(info.tensors[2].formats, kEcc8Q8);
  const OptimizerSnapshot got = LoadCheckpoint(path);
  EXPECT_TRUE(testing::SameBits(got, testing::V2Golden(testing::kGoldenOverride)));
  EXPECT_FALSE(got.tensors[1].ecc16.empty());
  EXPECT_FALSE(got.tensors[1].m_f32.empty());
  EXPECT_TRUE(got.tensors[1].m_codes.empty());
  const VerifyReport r = VerifyCheckpoint(path);
  EXPECT_TRUE(r.ok) << (r.problems.empty() ? "" : r.problems[0]);
}

// Each tensor's arrays follow its own formats: every kind of override round-trips, with
// the sections the tensor's formats need (and no others).
TEST(VersionTest, PerTensorFormatsRoundTrip) {
  auto env = NewMemEnv();
  uint32_t seed = 100;
  for (const auto& [algo, def] : testing::AllCombinations()) {
    if (!HasVariance(algo) && def.variance != MomentFormat::kF32) continue;
    const StateFormats f32{};
    const StateFormats other{MasterFormat::kBF16, MomentFormat::kQ8,
                             HasVariance(algo) ? MomentFormat::kQ8 : MomentFormat::kF32};
    const OptimizerSnapshot s = testing::MakeSnapshot(algo, def, seed++, {0, 1, 31, 33, 200},
                                                      {{1, f32}, {3, other}, {4, f32}});
    SaveCheckpoint(s, "c", {}, env.get());
    const OptimizerSnapshot back = LoadCheckpoint("c", env.get());
    ASSERT_TRUE(testing::SameBits(back, s)) << Name(algo) << " " << Name(def);
    const CheckpointInfo info = InspectCheckpoint("c", env.get());
    for (const CheckpointSection& sec : info.sections) {
      const StateFormats& f = s.tensors[sec.tensor].formats;
      const auto kind = static_cast<ckpt::SectionKind>(sec.kind);
      if (kind == ckpt::SectionKind::kMasterF32) {
        EXPECT_EQ(f.master, MasterFormat::kF32);
      }
      if (kind == ckpt::SectionKind::kMCodes) {
        EXPECT_EQ(f.momentum, MomentFormat::kQ8);
      }
      if (kind == ckpt::SectionKind::kMF32) {
        EXPECT_EQ(f.momentum, MomentFormat::kF32);
      }
      if (kind == ckpt::SectionKind::kVCodes) {
        EXPECT_EQ(f.variance, MomentFormat::kQ8);
      }
    }
  }
}

TEST(VersionTest, ShapesStepsAndMetadataRoundTrip) {
  auto env = NewMemEnv();
  OptimizerSnapshot s = testing::GoldenSnapshot(Algorithm::kAdamW, kEcc8Q8);
  s.tensors[0].shape = {3};
  s.tensors[0].step = 0;
  s.tensors[1].shape = {2, 4, 5};
  s.tensors[1].step = 41;
  s.tensors[2].shape = {4, 0, 9};
  s.tensors[2].step = 42;
  s.step = int64_t{1} << 53;  // the largest step allowed
  const std::string texts[] = {
      "",
      R"({"param_groups": [{"lr": 0.001, "betas": [0.9, 0.999], "params": [0, 1, 2]}]})",
      "not JSON at all: \"quotes\", back\\slashes, tabs\t, newlines\n, \x01 controls",
      std::string("embedded\0NUL", 12),
      "\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80 (2-, 3- and 4-byte UTF-8)",
      std::string(1 << 20, 'x'),
  };
  for (const std::string& text : texts) {
    s.metadata = text;
    SaveCheckpoint(s, "c", {}, env.get());
    const OptimizerSnapshot back = LoadCheckpoint("c", env.get());
    EXPECT_TRUE(testing::SameBits(back, s));
    EXPECT_EQ(back.metadata, text);
    EXPECT_EQ(InspectCheckpoint("c", env.get()).metadata, text);
  }
}

TEST(VersionTest, InvalidUtf8MetadataIsRefusedBeforeWriting) {
  auto env = NewMemEnv();
  OptimizerSnapshot s = testing::GoldenSnapshot(Algorithm::kAdamW, {});
  s.metadata = "bad \xff byte";
  try {
    SaveCheckpoint(s, "c", {}, env.get());
    ADD_FAILURE() << "saved invalid UTF-8";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("metadata"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(env->FileExists("c"));
  EXPECT_FALSE(env->FileExists("c.tmp"));
}

// Loads `bytes` and expects kCorruption mentioning `needle`, and Verify to fail too.
void ExpectCorrupt(const std::string& bytes, const std::string& needle) {
  auto env = NewMemEnv();
  testing::WriteAll(env.get(), "bad", bytes);
  try {
    LoadCheckpoint("bad", env.get());
    ADD_FAILURE() << "loaded a bad file; expected " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCorruption) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  const VerifyReport r = VerifyCheckpoint("bad", env.get());
  EXPECT_FALSE(r.ok) << needle;
}

TEST(VersionTest, Version2ManifestFieldsAreRequiredAndTyped) {
  auto env = NewMemEnv();
  SaveCheckpoint(testing::MakeSnapshot(Algorithm::kAdamW, {}, 3, {5, 16}), "c", {}, env.get());
  const std::string good = testing::ReadAll(env.get(), "c");
  using testing::WithManifest;
  ExpectCorrupt(WithManifest(good, [](json& j) { j.erase("metadata"); }), "no field 'metadata'");
  ExpectCorrupt(WithManifest(good, [](json& j) { j["metadata"] = 5; }), "metadata is not a string");
  ExpectCorrupt(WithManifest(good, [](json& j) { j["tensors"][1].erase("shape"); }),
                "tensors[1] has no field 'shape'");
  ExpectCorrupt(WithManifest(good,
                             [](json& j) {
                               j["tensors"][1]["shape"] = {4, -4};
                             }),
                "tensors[1].shape[1] is not a non-negative integer");
  ExpectCorrupt(WithManifest(good,
                             [](json& j) {
                               j["tensors"][1]["shape"] = {4, 5};
                             }),
                "shape [4, 5] has 20 elements, numel is 16");
  ExpectCorrupt(WithManifest(good, [](json& j) { j["tensors"][1].erase("step"); }),
                "tensors[1] has no field 'step'");
  ExpectCorrupt(WithManifest(good, [](json& j) { j["tensors"][1]["step"] = 1.5; }),
                "tensors[1].step is not an integer");
  ExpectCorrupt(WithManifest(good, [](json& j) { j["tensors"][1]["step"] = -1; }),
                "step -1 is outside");
  ExpectCorrupt(
      WithManifest(good, [](json& j) { j["tensors"][0]["step"] = j["step"].get<int64_t>() + 1; }),
      "(the snapshot's step)");
  ExpectCorrupt(WithManifest(good, [](json& j) { j["tensors"][0]["step"] = uint64_t{1} << 63; }),
                "is outside");
}

TEST(VersionTest, Version3TensorFormatsAreRequiredAndChecked) {
  auto env = NewMemEnv();
  SaveCheckpoint(testing::MakeSnapshot(Algorithm::kAdamW, kEcc8Q8, 3, {5, 40},
                                       {{1, StateFormats{}}}),
                 "c", {}, env.get());
  const std::string good = testing::ReadAll(env.get(), "c");
  using testing::WithManifest;
  ExpectCorrupt(WithManifest(good, [](json& j) { j["tensors"][1].erase("formats"); }),
                "tensors[1] has no field 'formats'");
  ExpectCorrupt(WithManifest(good, [](json& j) { j["tensors"][1]["formats"] = "f32"; }),
                "tensors[1].formats is not a JSON object");
  ExpectCorrupt(WithManifest(good, [](json& j) { j["tensors"][1]["formats"]["master"] = "f64"; }),
                "tensors[1].formats.master");
  ExpectCorrupt(WithManifest(good, [](json& j) { j["tensors"][1]["formats"].erase("variance"); }),
                "tensors[1].formats has no field 'variance'");
  // Formats that disagree with the sections listed: the section table no longer matches.
  ExpectCorrupt(WithManifest(good, [](json& j) { j["tensors"][1]["formats"]["momentum"] = "q8"; }),
                "sections");
}

}  // namespace
}  // namespace tandem
