// Memory for the optimizer's state: one slab per memory kind, carved into arrays aligned
// to layout::kSlabAlign bytes (engine/layout/slab_layout.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/layout/slab_layout.h"
#include "tandem/device_allocator.h"
#include "tandem/faults.h"

namespace tandem::offload {

using MemKind = MemoryKind;  // tandem/faults.h
const char* Name(MemKind k);

// An owned allocation of one kind: device memory from `device` (Note [One GPU memory pool]
// in tandem/device_allocator.h; required for kDevice, and it must outlive the slab),
// pinned memory from cudaHostAlloc, host memory from aligned_alloc. Throws
// Error(kOutOfMemory) naming `what`, the kind and the size when the allocation fails, or
// when `faults` (may be null; only read during the construction) fails it:
// FaultPlan::AllocationFails is asked once per Slab of a non-zero size.
class Slab {
 public:
  Slab() = default;
  Slab(MemKind kind, uint64_t bytes, const std::string& what, FaultPlan* faults = nullptr,
       DeviceAllocator* device = nullptr);
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
  DeviceAllocator* device_ = nullptr;
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace tandem::offload
