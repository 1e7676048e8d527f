// PinnedArena (cpu_simd/cpu_pinning.h): every thread that works in the arena, pool
// workers included, runs on the arena's CPUs, and gets its own affinity back afterwards.
#include "cpu_simd/cpu_pinning.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <tbb/parallel_for.h>

#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tandem/error.h"
#include "tests/thread_mask.h"

namespace tandem::cpu {
namespace {

using testing::ThreadMask;

struct Seen {
  std::mutex mu;
  std::set<std::vector<int>> masks;
  std::set<std::thread::id> threads;
};

// Many slow tasks, so that the pool's workers join the arena, not only the caller.
void Work(PinnedArena& arena, Seen* seen) {
  arena.Execute([&] {
    tbb::parallel_for(0, 64, [&](int) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::lock_guard<std::mutex> lock(seen->mu);
      seen->masks.insert(ThreadMask());
      seen->threads.insert(std::this_thread::get_id());
    });
  });
}

TEST(PinnedArena, PoolWorkersAndTheCallerRunOnTheSet) {
  const std::vector<int> all = ProcessCpus();
  if (all.size() < 2) GTEST_SKIP() << "needs 2 CPUs to tell a pinned thread from a free one";
  PinnedArena arena(2, {all.front()});
  Seen seen;
  Work(arena, &seen);
  EXPECT_EQ(seen.masks, (std::set<std::vector<int>>{{all.front()}}));
  EXPECT_EQ(seen.threads.size(), 2u) << "a pool worker never joined: the test proves nothing";
  EXPECT_EQ(ThreadMask(), all);  // the caller got its affinity back
  // The pool workers got theirs back too: a plain arena sees the whole process.
  PinnedArena plain(2, {});
  Seen free_seen;
  Work(plain, &free_seen);
  EXPECT_EQ(free_seen.masks, (std::set<std::vector<int>>{all}));
}

TEST(PinnedArena, DestroyedRightAfterWorkLeavesNoPoolWorkerPinned) {
  const std::vector<int> all = ProcessCpus();
  if (all.size() < 2) GTEST_SKIP() << "needs 2 CPUs to tell a pinned thread from a free one";
  for (int round = 0; round < 20; ++round) {
    {
      PinnedArena arena(2, {all.back()});
      Seen seen;
      Work(arena, &seen);
    }  // destroyed while its worker may still be spinning in it
    PinnedArena plain(2, {});
    Seen free_seen;
    Work(plain, &free_seen);
    ASSERT_EQ(free_seen.masks, (std::set<std::vector<int>>{all})) << "round " << round;
  }
}

TEST(PinnedArena, ValidatesTheSet) {
  EXPECT_THROW(PinnedArena(0, {-1}), Error);
  EXPECT_THROW(PinnedArena(-1, {}), Error);
  // Note [Arena size limit]: a count oneTBB would take and then crash on is refused
  // before any arena is made (this process would otherwise die at its teardown).
  try {
    PinnedArena arena(100000, {}, "test");
    ADD_FAILURE() << "an arena of 100000 threads was made";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test: thread count 100000 exceeds 65536"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(PinnedArena(kMaxArenaThreads + 1, {}), Error);
  const std::vector<int> all = ProcessCpus();
  EXPECT_EQ(PinnedArena(0, {all.front()}).concurrency(), 1);
  EXPECT_NO_THROW(ValidateCpuSet(all, "test"));
  EXPECT_NO_THROW(ValidateCpuSet({}, "test"));
}

}  // namespace
}  // namespace tandem::cpu
