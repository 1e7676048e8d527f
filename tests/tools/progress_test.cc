// The tools' progress bar: its text, and that it writes nothing when disabled (a log).
#include "progress.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace tandem::tools {
namespace {

std::string ReadAll(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

TEST(FormatDuration, SecondsMinutesHours) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(45.4), "45s");
  EXPECT_EQ(FormatDuration(187), "3m07s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
  EXPECT_EQ(FormatDuration(-1), "--");
  EXPECT_EQ(FormatDuration(1.0 / 0.0), "--");
}

TEST(FormatProgressLine, BarCountElapsedAndEta) {
  // 9 of 18 done in 12 s: 12 s left.
  EXPECT_EQ(FormatProgressLine("calibrate", 9, 18, 12, "host copy", 200),
            "calibrate [############............] 9/18  12s, ETA 12s  host copy");
}

TEST(FormatProgressLine, NothingDoneHasNoEtaYet) {
  EXPECT_EQ(FormatProgressLine("pcie", 0, 5, 1, "", 200),
            "pcie [........................] 0/5  1s, ETA --");
}

TEST(FormatProgressLine, UnknownTotalShowsElapsedOnly) {
  const std::string line = FormatProgressLine("kernels", 7, 0, 65, "", 200);
  EXPECT_EQ(line, "kernels 7 done  1m05s");
}

TEST(FormatProgressLine, DoneBeyondTotalIsClampedAndWidthRespected) {
  EXPECT_EQ(FormatProgressLine("x", 30, 18, 4, "", 200),
            "x [########################] 18/18  4s, ETA 0s");
  EXPECT_EQ(FormatProgressLine("calibrate", 1, 2, 1, "a long note", 10).size(), 10u);
}

TEST(Progress, DisabledWritesNothing) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress bar("quiet", 3, f, false);
    EXPECT_FALSE(bar.enabled());
    bar.Note("step");
    bar.Advance();
    bar.Set(3);
  }
  EXPECT_EQ(ReadAll(f), "");
  std::fclose(f);
}

TEST(Progress, EnabledDrawsThenErasesTheLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress bar("work", 2, f, true);
    bar.Advance();
    bar.Finish();
    bar.Advance();  // after Finish: nothing more
  }
  const std::string out = ReadAll(f);
  EXPECT_NE(out.find("work [############............] 1/2"), std::string::npos) << out;
  const std::string erase = "\r\033[K";
  ASSERT_GE(out.size(), erase.size());
  EXPECT_EQ(out.substr(out.size() - erase.size()), erase) << "the bar must not stay behind";
  EXPECT_EQ(out.find("2/2"), std::string::npos);
  std::fclose(f);
}

TEST(Progress, DefaultFollowsWhetherStderrIsATerminal) {
  Progress bar("auto", 1);
  EXPECT_EQ(bar.enabled(), isatty(fileno(stderr)) != 0);
}

}  // namespace
}  // namespace tandem::tools
