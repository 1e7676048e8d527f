// Slab's device memory comes from the DeviceAllocator it is given and goes back to it
// (Note [One GPU memory pool] in tandem/device_allocator.h); an allocator without memory
// is Error(kOutOfMemory) naming what the slab was for. The allocator here hands out host
// memory: a slab never touches device memory itself, so this runs without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "offload/memory/slab.h"
#include "tandem/error.h"

namespace tandem::offload {
namespace {

class HostLedger final : public DeviceAllocator {
 public:
  void* Allocate(uint64_t bytes, const char* what) override {
    last_what = what;
    if (bytes > room) return nullptr;
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    live[p] = bytes;
    return p;
  }
  void Free(void* ptr, uint64_t bytes) noexcept override {
    if (live.count(ptr) == 0 || live[ptr] != bytes) ++bad_frees;
    live.erase(ptr);
    std::free(ptr);
  }
  uint64_t room = UINT64_MAX;
  std::map<void*, uint64_t> live;
  std::string last_what;
  int bad_frees = 0;
};

TEST(Slab, DeviceMemoryComesFromTheAllocatorAndGoesBack) {
  HostLedger ledger;
  {
    Slab a(MemKind::kDevice, 1000, "hot optimizer state", nullptr, &ledger);
    EXPECT_EQ(ledger.last_what, "hot optimizer state");
    ASSERT_EQ(ledger.live.size(), 1u);
    EXPECT_EQ(ledger.live.begin()->first, a.data());
    EXPECT_EQ(a.size(), 1000u);
    Slab b = std::move(a);  // moves keep the allocator
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(ledger.live.size(), 1u);
    Slab none(MemKind::kDevice, 0, "nothing", nullptr, &ledger);  // no allocation for 0
    EXPECT_EQ(ledger.live.size(), 1u);
  }
  EXPECT_TRUE(ledger.live.empty());
  EXPECT_EQ(ledger.bad_frees, 0);
}

TEST(Slab, AnAllocatorWithoutMemoryIsOutOfMemoryNamingWhatFor) {
  HostLedger ledger;
  ledger.room = 100;
  try {
    Slab s(MemKind::kDevice, 4096, "stream executor device slots", nullptr, &ledger);
    FAIL() << "allocated beyond the allocator's room";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
    const std::string m = e.what();
    EXPECT_NE(m.find("device allocation of 4096 bytes for stream executor device slots"),
              std::string::npos)
        << m;
  }
  EXPECT_TRUE(ledger.live.empty());
}

TEST(Slab, DeviceMemoryNeedsAnAllocator) {
  EXPECT_THROW(Slab(MemKind::kDevice, 64, "hot optimizer state"), Error);
}

}  // namespace
}  // namespace tandem::offload
