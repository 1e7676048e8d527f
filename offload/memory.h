// Memory for the optimizer's state: one slab per memory kind, carved into arrays aligned
// to kSlabAlign bytes. One allocation per kind keeps the memory report exact (the sum of
// the carved, aligned array sizes) and makes allocation failure a single, early error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tandem/faults.h"

namespace tandem::offload {

inline constexpr size_t kSlabAlign = 256;

using MemKind = MemoryKind;  // tandem/faults.h
const char* Name(MemKind k);

// Bytes rounded up to kSlabAlign: the size every carved array occupies.
constexpr uint64_t Aligned(uint64_t bytes) {
  return (bytes + kSlabAlign - 1) / kSlabAlign * kSlabAlign;
}

// Adds arrays to a slab layout; returns each one's offset.
class SlabLayout {
 public:
  uint64_t Add(uint64_t bytes) {
    const uint64_t off = total_;
    total_ += Aligned(bytes);
    return off;
  }
  uint64_t total() const { return total_; }

 private:
  uint64_t total_ = 0;
};

// An owned allocation of one kind. Throws Error(kOutOfMemory) naming `what`, the kind and
// the size when the allocation fails, or when `faults` (may be null; only read during
// the construction) fails it: FaultPlan::AllocationFails is asked once per Slab of a
// non-zero size.
class Slab {
 public:
  Slab() = default;
  Slab(MemKind kind, uint64_t bytes, const std::string& what, FaultPlan* faults = nullptr);
  ~Slab();
  Slab(Slab&& o) noexcept;
  Slab& operator=(Slab&& o) noexcept;
  Slab(const Slab&) = delete;
  Slab& operator=(const Slab&) = delete;

  uint8_t* data() const { return static_cast<uint8_t*>(ptr_); }
  uint64_t size() const { return bytes_; }
  MemKind kind() const { return kind_; }

 private:
  void Release() noexcept;
  MemKind kind_ = MemKind::kHost;
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace tandem::offload
