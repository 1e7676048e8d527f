// FaultPlan: failures to inject into one optimizer, for tests and fault drills.
//
// Production code leaves OptimizerConfig::faults unset (nullptr) and nothing is injected.
// A test creates a plan, hands it to the optimizer (OptimizerConfig::faults) or directly
// to the part under test (a stream device, a pipeline's device, a state allocation), and
// arms failures on it; only the holders of that plan see them, so a failure armed in one
// test and never consumed cannot leak into another.
//
//   auto faults = std::make_shared<tandem::FaultPlan>();
//   cfg.faults = faults;
//   tandem::HybridOptimizer opt(specs, cfg);
//   faults->FailCopy(1);   // the next copy fails: opt.Step throws Error(kCuda)
//
// An injected failure is reported exactly as the real one would be: a copy as
// Error(kCuda, "injected failure of ...") naming the copy or chunk, an allocation as
// Error(kOutOfMemory) naming what was being allocated.
//
// Thread safety: every method may be called from any thread at any time; each query
// consumes one count atomically, so exactly one copy (allocation) is the nth.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tandem {

// Where a state allocation lives.
enum class MemoryKind : uint8_t {
  kDevice = 0,  // GPU memory
  kPinned = 1,  // page-locked host memory (GPU mode)
  kHost = 2,    // ordinary host memory
};

class FaultPlan {
 public:
  // Arms a copy failure: the nth copy started from now on fails (1-based; 0 disarms).
  // Copies counted: the downloads and uploads of the offload pipeline's device and the
  // uploads and downloads of each streamed chunk (offload_compute > 0), in the order the
  // optimizer starts them. Re-arming replaces the count.
  void FailCopy(uint64_t nth) noexcept { copies_left_.store(nth); }
  // Arms an allocation failure: the nth state allocation of `kind` from now on fails
  // (1-based; 0 disarms). Each kind counts on its own.
  void FailAllocation(MemoryKind kind, int nth) noexcept {
    allocations_left_[Index(kind)].store(nth > 0 ? nth : 0);
  }

  // Called by the library once per copy it starts: true for the copy that must fail.
  bool CopyFails() noexcept { return Consume(copies_left_); }
  // Called by the library once per allocation of `kind`: true for the one that must fail.
  bool AllocationFails(MemoryKind kind) noexcept { return Consume(allocations_left_[Index(kind)]); }

 private:
  static size_t Index(MemoryKind k) { return static_cast<size_t>(k); }
  template <typename T>
  static bool Consume(std::atomic<T>& left) noexcept {
    T n = left.load();
    while (n != 0)
      if (left.compare_exchange_weak(n, n - 1)) return n == 1;
    return false;
  }

  std::atomic<uint64_t> copies_left_{0};  // 0: no failure armed
  std::array<std::atomic<int>, 3> allocations_left_{};
};

}  // namespace tandem
