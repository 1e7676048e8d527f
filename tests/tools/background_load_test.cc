// BackgroundLoad: rounds run beside the caller until Stop(), which rethrows a round's error.
#include "background_load.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace tandem::tools {
namespace {

TEST(BackgroundLoad, RunsRoundsBesideTheCallerUntilStopped) {
  std::atomic<uint64_t> ran{0};
  BackgroundLoad load([&] {
    ran.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  });
  ASSERT_TRUE(load.WaitForRounds(3));
  // The caller is free meanwhile: the load keeps going while it works.
  const uint64_t before = load.rounds();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GT(load.rounds(), before);
  const uint64_t rounds = load.Stop();
  EXPECT_GE(rounds, 3u);
  EXPECT_EQ(rounds, ran.load());  // the round in progress finished, none started after
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(ran.load(), rounds);
  EXPECT_EQ(load.Stop(), rounds);  // a second Stop is harmless
}

TEST(BackgroundLoad, StopRethrowsTheRoundsError) {
  int calls = 0;
  BackgroundLoad load([&] {
    if (++calls == 2) throw std::runtime_error("copy failed");
  });
  EXPECT_FALSE(load.WaitForRounds(5));  // the load ended after one round
  try {
    load.Stop();
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "copy failed");
  }
  EXPECT_EQ(load.Stop(), 1u);  // reported once
}

TEST(BackgroundLoad, DestructorStopsQuietly) {
  std::atomic<uint64_t> ran{0};
  {
    BackgroundLoad load([&] {
      ran.fetch_add(1);
      throw std::runtime_error("dropped");
    });
    load.WaitForRounds(1);
  }
  EXPECT_EQ(ran.load(), 1u);
}

}  // namespace
}  // namespace tandem::tools
