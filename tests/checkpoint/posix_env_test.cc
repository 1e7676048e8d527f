// The default (POSIX) Env with real files in a temporary directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tests/checkpoint/test_util.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

class PosixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tandem_ckpt_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(PosixTest, SaveLoadVerify) {
  const auto s = testing::MakeSnapshot(Algorithm::kAdamW,
                                       {MasterFormat::kBF16Ecc16, MomentFormat::kQ8, MomentFormat::kF32}, 7);
  const std::string p = (dir_ / "a.ckpt").string();
  SaveCheckpoint(s, p);
  EXPECT_TRUE(testing::SameBits(LoadCheckpoint(p), s));
  EXPECT_TRUE(VerifyCheckpoint(p).ok);
  EXPECT_FALSE(fs::exists(p + ".tmp"));
  EXPECT_EQ(InspectCheckpoint(p).file_size, fs::file_size(p));
}

TEST_F(PosixTest, CorruptedOnDiskIsDetected) {
  const auto s = testing::MakeSnapshot(Algorithm::kLion, {}, 8);
  const std::string p = (dir_ / "b.ckpt").string();
  SaveCheckpoint(s, p);
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x55');
  }
  EXPECT_THROW(LoadCheckpoint(p), Error);
  fs::resize_file(p, 90);
  try {
    LoadCheckpoint(p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCorruption);
  }
}

TEST_F(PosixTest, MissingDirectoryIsIOErrorNamingPath) {
  const auto s = testing::MakeSnapshot(Algorithm::kSGD, {}, 9);
  const std::string p = (dir_ / "no" / "such" / "c.ckpt").string();
  try {
    SaveCheckpoint(s, p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIO);
    EXPECT_NE(std::string(e.what()).find(p + ".tmp"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LoadCheckpoint(p), Error);
}

// A directory as the path ("." or a model directory) is refused before anything is
// written, saying so, instead of a rename that fails after the whole file was written.
TEST_F(PosixTest, ADirectoryIsRefusedBeforeAnythingIsWritten) {
  const auto s = testing::MakeSnapshot(Algorithm::kSGD, {}, 11);
  const auto old = fs::current_path();
  fs::current_path(dir_);
  for (const std::string& p : {std::string("."), dir_.string(), dir_.string() + "/"}) {
    try {
      SaveCheckpoint(s, p);
      ADD_FAILURE() << "saved to " << p;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("'" + p + "': is a directory; name a file in it"),
                std::string::npos)
          << e.what();
    }
  }
  fs::current_path(old);
  EXPECT_TRUE(fs::is_empty(dir_));
  EXPECT_FALSE(fs::exists(dir_.parent_path() / (dir_.filename().string() + ".tmp")));
  EXPECT_TRUE(Env::Default()->IsDirectory(dir_.string()));
  EXPECT_FALSE(Env::Default()->IsDirectory((dir_ / "none").string()));
}

TEST_F(PosixTest, RelativePathInCurrentDirectory) {
  const auto old = fs::current_path();
  fs::current_path(dir_);
  const auto s = testing::MakeSnapshot(Algorithm::kAdam, {}, 10);
  SaveCheckpoint(s, "rel.ckpt");
  EXPECT_TRUE(testing::SameBits(LoadCheckpoint("rel.ckpt"), s));
  fs::current_path(old);
}

TEST_F(PosixTest, ShortReadsAtEndOfFile) {
  const std::string p = (dir_ / "d").string();
  std::ofstream(p) << "abc";
  auto f = Env::Default()->NewRandomAccessFile(p);
  char buf[10];
  EXPECT_EQ(f->Read(1, 10, buf), 2u);
  EXPECT_EQ(f->Read(5, 10, buf), 0u);
  EXPECT_EQ(f->Size(), 3u);
}

}  // namespace
}  // namespace tandem
