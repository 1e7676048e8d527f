// tandem-ckpt: exit statuses 0 (good), 1 (damaged), 2 (usage/IO) and the main outputs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tandem/checkpoint.h"
#include "tests/checkpoint/test_util.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

class ToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_ckpt_tool_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    file_ = (dir_ / "c.ckpt").string();
    snap_ = testing::MakeSnapshot(Algorithm::kAdamW,
                                  {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}, 21);
    SaveCheckpoint(snap_, file_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the tool with `args`; returns its exit status, output in *out.
  int Run(const std::string& args, std::string* out) {
    const std::string log = (dir_ / "out.txt").string();
    const int rc = std::system((std::string(TANDEM_CKPT_TOOL) + " " + args + " > " + log + " 2>&1").c_str());
    std::ifstream f(log);
    std::stringstream ss;
    ss << f.rdbuf();
    *out = ss.str();
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }

  fs::path dir_;
  std::string file_;
  OptimizerSnapshot snap_;
};

TEST_F(ToolTest, InspectPrintsTensorsAndFormats) {
  std::string out;
  EXPECT_EQ(Run("inspect " + file_, &out), 0) << out;
  EXPECT_NE(out.find("master=bf16+ecc8,m=q8,v=q8"), std::string::npos) << out;
  EXPECT_NE(out.find("layer.5.weight"), std::string::npos) << out;
  EXPECT_NE(out.find("step       " + std::to_string(snap_.step)), std::string::npos) << out;
}

TEST_F(ToolTest, VerifyGoodDamagedMissingUsage) {
  std::string out;
  EXPECT_EQ(Run("verify " + file_, &out), 0) << out;
  {
    std::fstream f(file_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  EXPECT_EQ(Run("verify " + file_, &out), 1) << out;
  EXPECT_NE(out.find("DAMAGED"), std::string::npos) << out;
  EXPECT_EQ(Run("verify " + (dir_ / "missing").string(), &out), 2) << out;
  EXPECT_EQ(Run("verify", &out), 2) << out;
  EXPECT_EQ(Run("frobnicate x", &out), 2) << out;
  EXPECT_EQ(Run("--help", &out), 0) << out;
}

TEST_F(ToolTest, ExportWritesSafetensors) {
  std::string out;
  const std::string st = (dir_ / "w.safetensors").string();
  EXPECT_EQ(Run("export " + file_ + " " + st, &out), 0) << out;
  const auto m = ImportSafetensorsMasters(st);
  ASSERT_EQ(m.size(), snap_.tensors.size());
  for (const auto& t : snap_.tensors) EXPECT_EQ(m.at(t.name).size(), t.numel);
  fs::resize_file(file_, 100);
  EXPECT_EQ(Run("export " + file_ + " " + st, &out), 1) << out;
}

}  // namespace
}  // namespace tandem
