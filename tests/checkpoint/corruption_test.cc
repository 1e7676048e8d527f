// Damaged, truncated and foreign files: each must fail with Error(kCorruption) naming
// what is wrong, never return data.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "checkpoint/crc.h"
#include "checkpoint/format.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tests/checkpoint/test_util.h"

namespace tandem {
namespace {

using testing::MakeSnapshot;

class CorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    snap_ = MakeSnapshot(Algorithm::kAdamW,
                         {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kF32}, 5,
                         {1, 33, 40});
    SaveCheckpoint(snap_, "good", {}, env_.get());
    good_ = testing::ReadAll(env_.get(), "good");
    info_ = InspectCheckpoint("good", env_.get());
  }

  // Loads `bytes` as a file and expects kCorruption whose message holds every `needle`.
  void ExpectCorrupt(const std::string& bytes, const std::vector<std::string>& needles,
                     const std::string& ctx = "") {
    testing::WriteAll(env_.get(), "bad", bytes);
    try {
      LoadCheckpoint("bad", env_.get());
      ADD_FAILURE() << "loaded a damaged file: " << ctx;
      return;
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), ErrorKind::kCorruption) << e.what();
      const std::string msg = e.what();
      EXPECT_NE(msg.find("checkpoint 'bad'"), std::string::npos) << msg;
      for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << ctx << ": " << msg;
    }
    EXPECT_FALSE(VerifyCheckpoint("bad", env_.get()).ok) << ctx;
  }

  uint64_t ManifestOffset() const {
    uint64_t off;
    memcpy(&off, good_.data() + good_.size() - ckpt::kFooterSize, 8);
    return off;
  }

  // Rewrites the manifest with edit(json) and fixes its CRC and the footer, so that only
  // the manifest's own checks can catch the change.
  std::string WithManifest(const std::function<void(nlohmann::json&)>& edit) const {
    return testing::WithManifest(good_, edit);
  }

  std::unique_ptr<Env> env_ = NewMemEnv();
  OptimizerSnapshot snap_;
  std::string good_;
  CheckpointInfo info_;
};

TEST_F(CorruptionTest, TruncationAtEveryOffset) {
  for (size_t cut = 0; cut < good_.size(); ++cut)
    ExpectCorrupt(good_.substr(0, cut), {}, "cut at " + std::to_string(cut));
}

TEST_F(CorruptionTest, TruncationIsNamed) {
  ExpectCorrupt(good_.substr(0, good_.size() - 1), {"footer"});
  ExpectCorrupt(good_.substr(0, 50), {"truncated"});
  ExpectCorrupt("", {"truncated"});
}

TEST_F(CorruptionTest, ExtendedFile) {
  ExpectCorrupt(good_ + std::string(1, '\0'), {"footer"});
  ExpectCorrupt(good_ + good_, {});
}

TEST_F(CorruptionTest, EveryBitFlipIsDetected) {
  for (size_t i = 0; i < good_.size(); ++i)
    for (int b = 0; b < 8; ++b) {
      std::string bad = good_;
      bad[i] = static_cast<char>(bad[i] ^ (1 << b));
      ExpectCorrupt(bad, {}, "byte " + std::to_string(i) + " bit " + std::to_string(b));
    }
}

TEST_F(CorruptionTest, FlipInHeaderNamesHeader) {
  std::string bad = good_;
  bad[20] ^= 1;  // a reserved byte, covered by the header CRC
  ExpectCorrupt(bad, {"header", "CRC"});
}

TEST_F(CorruptionTest, FlipInManifestNamesManifest) {
  std::string bad = good_;
  bad[ManifestOffset() + 5] ^= 4;
  ExpectCorrupt(bad, {"manifest", "CRC", "offset " + std::to_string(ManifestOffset())});
}

TEST_F(CorruptionTest, FlipInFooterNamesFooter) {
  std::string bad = good_;
  bad[bad.size() - 10] ^= 1;
  ExpectCorrupt(bad, {"footer"});
}

TEST_F(CorruptionTest, FlipInEachDataSectionNamesSectionTensorKindOffset) {
  ASSERT_EQ(info_.sections.size(), 15u);  // 3 tensors x (bf16, ecc8, m codes, m scales, v)
  for (size_t i = 0; i < info_.sections.size(); ++i) {
    const CheckpointSection& s = info_.sections[i];
    for (uint64_t at : {s.offset, s.offset + s.length - 1}) {
      std::string bad = good_;
      bad[at] ^= 0x80;
      ExpectCorrupt(bad, {"section " + std::to_string(i), "'" + snap_.tensors[s.tensor].name + "'",
                          s.kind_name, "offset " + std::to_string(s.offset), "CRC mismatch"});
    }
  }
}

TEST_F(CorruptionTest, NonZeroPaddingIsDetected) {
  const CheckpointSection& s = info_.sections[0];
  ASSERT_GT(info_.sections[1].offset, s.offset + s.length);  // there is a gap
  std::string bad = good_;
  bad[s.offset + s.length] = 1;
  ExpectCorrupt(bad, {"padding", "section 1"});
}

TEST_F(CorruptionTest, WrongMagic) {
  std::string bad = good_;
  bad[0] = 'X';
  ExpectCorrupt(bad, {"bad magic", "not a Tandem checkpoint"});
}

TEST_F(CorruptionTest, WrongVersionEvenWithValidCrc) {
  std::string bad = good_;
  const uint32_t v = ckpt::kVersion + 1;
  memcpy(bad.data() + 8, &v, 4);
  const uint32_t crc = ckpt::Crc32c(bad.data(), 28);
  memcpy(bad.data() + 28, &crc, 4);
  ExpectCorrupt(bad, {"version " + std::to_string(v),
                      "reads versions 1 to " + std::to_string(ckpt::kVersion)});
  const uint32_t zero = 0;
  memcpy(bad.data() + 8, &zero, 4);
  const uint32_t crc0 = ckpt::Crc32c(bad.data(), 28);
  memcpy(bad.data() + 28, &crc0, 4);
  ExpectCorrupt(bad, {"version 0"});
}

TEST_F(CorruptionTest, ForeignFiles) {
  ExpectCorrupt(std::string(1000, '\0'), {"bad magic"});
  ExpectCorrupt("{\"hello\": 1}", {"bad magic"});
  ExpectCorrupt(std::string(7, 'T'), {"truncated"});
  std::string only_header = good_.substr(0, 32) + std::string(100, '\0');
  ExpectCorrupt(only_header, {"footer"});
}

TEST_F(CorruptionTest, VerifyListsEveryDamagedSection) {
  std::string bad = good_;
  bad[info_.sections[2].offset] ^= 1;
  bad[info_.sections[7].offset] ^= 1;
  testing::WriteAll(env_.get(), "bad", bad);
  const VerifyReport r = VerifyCheckpoint("bad", env_.get());
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_NE(r.problems[0].find("section 2 "), std::string::npos) << r.problems[0];
  EXPECT_NE(r.problems[1].find("section 7 "), std::string::npos) << r.problems[1];
  EXPECT_EQ(r.sections_checked, info_.sections.size());
}

TEST_F(CorruptionTest, CompressedSectionsDamage) {
  CheckpointOptions o;
  o.compression = CheckpointCompression::kAll;
  SaveCheckpoint(testing::MakeCompressibleSnapshot(4), "z", o, env_.get());
  const std::string z = testing::ReadAll(env_.get(), "z");
  const CheckpointInfo info = InspectCheckpoint("z", env_.get());
  int checked = 0;
  for (size_t i = 0; i < info.sections.size(); ++i) {
    const CheckpointSection& s = info.sections[i];
    if (s.compression != "deflate") continue;
    for (uint64_t k = 0; k < s.length; k += 1 + s.length / 16) {
      std::string bad = z;
      bad[s.offset + k] ^= 0x10;
      ExpectCorrupt(bad, {"section " + std::to_string(i), s.kind_name});
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

// Manifests with a valid CRC but content that contradicts the rules.
TEST_F(CorruptionTest, ManifestRoundTripThroughEditorIsStillGood) {
  testing::WriteAll(env_.get(), "same", WithManifest([](nlohmann::json&) {}));
  EXPECT_TRUE(testing::SameBits(LoadCheckpoint("same", env_.get()), snap_));
}

TEST_F(CorruptionTest, ManifestNumelChanged) {
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["tensors"][1]["numel"] = 34; }),
                {"manifest", "sections[", "expected"});
}

TEST_F(CorruptionTest, ManifestSectionOffsetMoved) {
  ExpectCorrupt(WithManifest([](nlohmann::json& j) {
                  j["sections"][3]["offset"] = j["sections"][3]["offset"].get<uint64_t>() + 64;
                }),
                {"manifest", "sections[3]", "offset"});
}

TEST_F(CorruptionTest, ManifestSectionsSwapped) {
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { std::swap(j["sections"][0], j["sections"][1]); }),
                {"manifest", "sections[0]"});
}

TEST_F(CorruptionTest, ManifestExtraOrMissingSection) {
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["sections"].erase(j["sections"].size() - 1); }),
                {"manifest", "sections"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["sections"].push_back(j["sections"][0]); }),
                {"manifest", "sections"});
}

TEST_F(CorruptionTest, ManifestCrcOfSectionWrong) {
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["sections"][4]["crc32c"] = 12345; }),
                {"section 4", "CRC mismatch"});
}

TEST_F(CorruptionTest, ManifestBadNamesAndTypes) {
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["algorithm"] = "adagrad"; }), {"algorithm"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["formats"]["master"] = "f64"; }), {"formats.master"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["tensors"][0]["param_dtype"] = "i8"; }), {"param_dtype"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["step"] = -1; }), {"step"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["step"] = "7"; }), {"step"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j.erase("groups"); }), {"groups"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["groups"] = nlohmann::json::array(); }), {"no parameter groups"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["groups"][0]["beta1"] = 1.5; }), {"groups[0]", "beta1"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["tensors"][0]["group"] = 9; }), {"group 9"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["sections"][0]["compression"] = "zstd"; }), {"zstd"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["sections"][0]["length"] = 1; }), {"sections[0]"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["format"] = "other"; }), {"format"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j = nlohmann::json::array(); }), {"manifest"});
  ExpectCorrupt(WithManifest([](nlohmann::json& j) { j["tensors"][0]["numel"] = uint64_t{1} << 62; }), {"numel"});
}

// Inspect must read header, footer and manifest only.
class CountingEnv : public Env {
 public:
  explicit CountingEnv(Env* base) : base_(base) {}
  class File : public RandomAccessFile {
   public:
    File(std::unique_ptr<RandomAccessFile> f, uint64_t* n) : f_(std::move(f)), n_(n) {}
    size_t Read(uint64_t off, size_t n, void* p) const override {
      *n_ += n;
      return f_->Read(off, n, p);
    }
    uint64_t Size() const override { return f_->Size(); }

   private:
    std::unique_ptr<RandomAccessFile> f_;
    uint64_t* n_;
  };
  std::unique_ptr<WritableFile> NewWritableFile(const std::string& p) override { return base_->NewWritableFile(p); }
  std::unique_ptr<RandomAccessFile> NewRandomAccessFile(const std::string& p) override {
    return std::make_unique<File>(base_->NewRandomAccessFile(p), &bytes_read);
  }
  void RenameFile(const std::string& a, const std::string& b) override { base_->RenameFile(a, b); }
  void RemoveFile(const std::string& p) override { base_->RemoveFile(p); }
  void SyncDir(const std::string& d) override { base_->SyncDir(d); }
  bool FileExists(const std::string& p) override { return base_->FileExists(p); }
  uint64_t bytes_read = 0;

 private:
  Env* base_;
};

TEST(InspectTest, ReadsNoData) {
  auto mem = NewMemEnv();
  CountingEnv env(mem.get());
  const auto s = MakeSnapshot(Algorithm::kAdamW, {}, 1, {100000, 3});
  SaveCheckpoint(s, "big", {}, &env);
  const CheckpointInfo info = InspectCheckpoint("big", &env);
  const uint64_t manifest_len = info.file_size - ckpt::kFooterSize -
                                (info.sections.back().offset + info.sections.back().length + 63) / 64 * 64;
  EXPECT_LE(env.bytes_read, ckpt::kHeaderSize + ckpt::kFooterSize + manifest_len + ckpt::kAlignment);
}

}  // namespace
}  // namespace tandem
