// Slab arithmetic: the optimizer's state lives in one slab per memory kind, carved into
// arrays aligned to kSlabAlign bytes. One allocation per kind keeps the memory report
// exact (the sum of the carved, aligned array sizes) and makes allocation failure a
// single, early error. The allocation itself is offload's (offload/memory/slab.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::layout {

inline constexpr size_t kSlabAlign = 256;

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

// An offset into a slab that marks "none here".
inline constexpr uint64_t kNoOffset = ~uint64_t{0};

}  // namespace tandem::layout
