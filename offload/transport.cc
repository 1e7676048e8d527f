#include "offload/transport.h"

#include <atomic>

namespace tandem::offload {
namespace {
std::atomic<uint64_t> g_copies_until_failure{0};  // 0: no failure armed
}  // namespace

void FailCopyForTesting(uint64_t nth) { g_copies_until_failure = nth; }

bool InjectedCopyFailure() noexcept {
  uint64_t left = g_copies_until_failure.load(std::memory_order_relaxed);
  while (left != 0) {
    if (g_copies_until_failure.compare_exchange_weak(left, left - 1)) return left == 1;
  }
  return false;
}

}  // namespace tandem::offload
