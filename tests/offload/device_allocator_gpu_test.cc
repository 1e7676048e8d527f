// OptimizerConfig::device_allocator in GPU mode (skipped without a CUDA device): every
// device byte the optimizer holds comes from the allocator and goes back to it, a failing
// allocation at any point leaves nothing taken and names what it was for, and the steps
// are the bits of the default (cudaMalloc) optimizer's (Note [One GPU memory pool] in
// tandem/device_allocator.h).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tandem/device_allocator.h"
#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tests/offload/device_model.h"
#include "tests/offload/release_config.h"

namespace tandem {
namespace {

using testing::DeviceModel;

// cudaMalloc with a ledger; returns null (out of memory) from allocation `fail_at` on.
class LedgerAllocator final : public DeviceAllocator {
 public:
  void* Allocate(uint64_t bytes, const char* what) override {
    whats.push_back(what);
    if (allocations++ >= fail_at) return nullptr;
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
    live[p] = bytes;
    return p;
  }
  void Free(void* ptr, uint64_t bytes) noexcept override {
    auto it = live.find(ptr);
    if (it == live.end() || it->second != bytes) ++bad_frees;
    if (it != live.end()) live.erase(it);
    cudaFree(ptr);
  }
  uint64_t live_bytes() const {
    uint64_t sum = 0;
    for (const auto& [p, b] : live) sum += b;
    return sum;
  }
  std::map<void*, uint64_t> live;
  std::vector<std::string> whats;
  uint64_t allocations = 0, fail_at = UINT64_MAX;
  int bad_frees = 0;
};

// Every placement class with speculation, release and in-place reads: every kind of
// device buffer the engine owns.
OptimizerConfig Config(std::shared_ptr<DeviceAllocator> memory) {
  OptimizerConfig c = testing::ReleaseTestConfig(ExecutionMode::kGpu, 0.5, 0.5, true, true,
                                                 testing::kSomeInPlaceBytes);
  c.device_allocator = std::move(memory);
  return c;
}

std::vector<std::vector<uint8_t>> Train(DeviceModel& m, const OptimizerConfig& c) {
  HybridOptimizer opt(m.Specs(), c);
  for (int t = 1; t <= 4; ++t) {
    m.FillGrads(t);
    opt.Step(1e-3, {.max_grad_norm = 100.0});
  }
  return m.ReadParams();
}

TEST(DeviceAllocatorGpu, EveryDeviceByteComesFromItAndGoesBack) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: GPU-mode test skipped";
  auto ledger = std::make_shared<LedgerAllocator>();
  DeviceModel m(5);
  {
    HybridOptimizer opt(m.Specs(), Config(ledger));
    const MemoryReport r = opt.memory();
    EXPECT_GT(r.device.total(), 0u);
    // The state, the stream slots, the holding places, the released gradients' buffer,
    // the kernels' tables and the pre-pass's scratch: all of it, and nothing else.
    EXPECT_EQ(ledger->live_bytes(), r.device.total());
    m.FillGrads(1);
    opt.Step(1e-3, {});
    EXPECT_EQ(ledger->live_bytes(), r.device.total()) << "a step allocated device memory";
  }
  EXPECT_EQ(ledger->live_bytes(), 0u);
  EXPECT_EQ(ledger->bad_frees, 0);
}

TEST(DeviceAllocatorGpu, SameBitsAsCudaMalloc) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: GPU-mode test skipped";
  DeviceModel a(7), b(7);
  EXPECT_EQ(Train(a, Config(nullptr)), Train(b, Config(std::make_shared<LedgerAllocator>())));
}

TEST(DeviceAllocatorGpu, AFailedAllocationTakesNothingAndSaysWhatItWasFor) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: GPU-mode test skipped";
  DeviceModel m(9);
  uint64_t count = 0;
  {
    auto ledger = std::make_shared<LedgerAllocator>();
    HybridOptimizer opt(m.Specs(), Config(ledger));
    count = ledger->allocations;
  }
  ASSERT_GT(count, 3u);
  for (uint64_t k = 0; k < count; ++k) {
    auto ledger = std::make_shared<LedgerAllocator>();
    ledger->fail_at = k;
    try {
      HybridOptimizer opt(m.Specs(), Config(ledger));
      ADD_FAILURE() << "allocation " << k << " failed but the construction went on";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory) << e.what();
      EXPECT_NE(std::string(e.what()).find(ledger->whats[k]), std::string::npos)
          << "allocation " << k << " was for '" << ledger->whats[k] << "': " << e.what();
    }
    EXPECT_EQ(ledger->live_bytes(), 0u) << "allocation " << k << " failed";
    EXPECT_EQ(ledger->bad_frees, 0);
  }
}

}  // namespace
}  // namespace tandem
