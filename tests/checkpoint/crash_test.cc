// Crash safety: a failure (thrown error) or a crash (power loss) at any step of a save
// leaves a whole checkpoint at the path: the old one if the rename had not happened.
#include <gtest/gtest.h>

#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tests/checkpoint/test_util.h"

namespace tandem {
namespace {

using testing::FaultEnv;
using testing::MakeSnapshot;

struct Case {
  const char* name;
  CheckpointCompression compression;
  bool crash;  // also lose unsynced data after the failure
};

class CrashTest : public ::testing::TestWithParam<Case> {
 protected:
  OptimizerSnapshot old_ = MakeSnapshot(Algorithm::kAdamW,
                                        {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}, 1);
  OptimizerSnapshot new_ = MakeSnapshot(Algorithm::kAdamW,
                                        {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}, 2);
};

TEST_P(CrashTest, FailureAtEveryStepLeavesAWholeCheckpoint) {
  CheckpointOptions o;
  o.compression = GetParam().compression;
  // Count the steps of one save.
  int64_t total;
  {
    FaultEnv env;
    SaveCheckpoint(old_, "dir/ckpt", o, &env);
    total = env.steps;
  }
  ASSERT_GT(total, 10);
  for (int64_t k = 0; k <= total; ++k) {
    FaultEnv env;
    SaveCheckpoint(old_, "dir/ckpt", o, &env);  // the previous checkpoint, made durable
    env.steps = 0;
    env.fail_at = k;
    bool threw = false;
    try {
      SaveCheckpoint(new_, "dir/ckpt", o, &env);
    } catch (const Error& e) {
      threw = true;
      EXPECT_EQ(e.kind(), ErrorKind::kIO) << e.what();
    }
    EXPECT_EQ(threw, k < total) << "step " << k;
    const bool renamed = env.failed_step == "SyncDir" || !threw;
    if (GetParam().crash) env.Crash();
    env.fail_at = -1;
    const OptimizerSnapshot got = LoadCheckpoint("dir/ckpt", &env);
    if (!renamed) {
      EXPECT_TRUE(testing::SameBits(got, old_)) << "step " << k << " (" << env.failed_step << ")";
    } else {
      // After the rename either is acceptable before the directory sync; after it, the new.
      EXPECT_TRUE(testing::SameBits(got, new_) || (GetParam().crash && testing::SameBits(got, old_))) << "step " << k;
      if (!threw) {
        EXPECT_TRUE(testing::SameBits(got, new_)) << "step " << k;
      }
    }
    if (threw && !GetParam().crash && !renamed) {
      EXPECT_FALSE(env.FileExists("dir/ckpt.tmp")) << "temporary file left at step " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Steps, CrashTest,
    ::testing::Values(Case{"error", CheckpointCompression::kNone, false},
                      Case{"crash", CheckpointCompression::kNone, true},
                      Case{"error_deflate", CheckpointCompression::kAll, false},
                      Case{"crash_deflate", CheckpointCompression::kAll, true}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(CrashModelTest, UnsyncedSaveIsLostOnCrash) {
  // Checks that FaultEnv really models power loss: without sync the data is not durable.
  FaultEnv env;
  const auto s = MakeSnapshot(Algorithm::kLion, {}, 3);
  CheckpointOptions o;
  o.sync = false;
  SaveCheckpoint(s, "p", o, &env);
  EXPECT_TRUE(testing::SameBits(LoadCheckpoint("p", &env), s));
  env.Crash();
  EXPECT_FALSE(env.FileExists("p"));
}

TEST(CrashModelTest, CompletedSaveSurvivesCrash) {
  FaultEnv env;
  const auto s = MakeSnapshot(Algorithm::kSGD, {}, 4);
  SaveCheckpoint(s, "p", {}, &env);
  env.Crash();
  EXPECT_TRUE(testing::SameBits(LoadCheckpoint("p", &env), s));
}

TEST(CrashModelTest, StaleTemporaryFileIsReplaced) {
  FaultEnv env;
  testing::WriteAll(&env, "p.tmp", "garbage from an earlier crash");
  const auto s = MakeSnapshot(Algorithm::kAdam, {}, 5);
  SaveCheckpoint(s, "p", {}, &env);
  EXPECT_TRUE(testing::SameBits(LoadCheckpoint("p", &env), s));
  EXPECT_FALSE(env.FileExists("p.tmp"));
}

}  // namespace
}  // namespace tandem
