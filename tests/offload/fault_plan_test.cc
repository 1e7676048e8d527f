// FaultPlan (tandem/faults.h): the nth query fails and only it, 0 disarms, re-arming
// replaces the count, each allocation kind counts on its own, and concurrent queries see
// exactly one failure.
#include "tandem/faults.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace tandem {
namespace {

TEST(FaultPlan, NothingFailsUnlessArmed) {
  FaultPlan p;
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(p.CopyFails());
    EXPECT_FALSE(p.AllocationFails(MemoryKind::kHost));
  }
}

TEST(FaultPlan, TheNthCopyFailsOnce) {
  FaultPlan p;
  p.FailCopy(3);
  EXPECT_FALSE(p.CopyFails());
  EXPECT_FALSE(p.CopyFails());
  EXPECT_TRUE(p.CopyFails());
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(p.CopyFails());
  p.FailCopy(1);
  EXPECT_TRUE(p.CopyFails());
  p.FailCopy(2);
  p.FailCopy(0);  // disarms
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(p.CopyFails());
  p.FailCopy(5);
  p.FailCopy(1);  // re-arming replaces the count
  EXPECT_TRUE(p.CopyFails());
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(p.CopyFails());
}

TEST(FaultPlan, EachAllocationKindCountsOnItsOwn) {
  FaultPlan p;
  p.FailAllocation(MemoryKind::kHost, 2);
  p.FailAllocation(MemoryKind::kPinned, 1);
  EXPECT_FALSE(p.AllocationFails(MemoryKind::kDevice));
  EXPECT_FALSE(p.CopyFails());
  EXPECT_FALSE(p.AllocationFails(MemoryKind::kHost));
  EXPECT_TRUE(p.AllocationFails(MemoryKind::kPinned));
  EXPECT_TRUE(p.AllocationFails(MemoryKind::kHost));
  EXPECT_FALSE(p.AllocationFails(MemoryKind::kHost));
  EXPECT_FALSE(p.AllocationFails(MemoryKind::kPinned));
  p.FailAllocation(MemoryKind::kDevice, 1);
  p.FailAllocation(MemoryKind::kDevice, 0);
  p.FailAllocation(MemoryKind::kHost, -3);  // negative: disarmed too
  EXPECT_FALSE(p.AllocationFails(MemoryKind::kDevice));
  EXPECT_FALSE(p.AllocationFails(MemoryKind::kHost));
}

TEST(FaultPlan, ConcurrentQueriesSeeExactlyOneFailure) {
  FaultPlan p;
  p.FailCopy(1000);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) failures += p.CopyFails() ? 1 : 0;
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 1);
}

}  // namespace
}  // namespace tandem
