#include "offload/memory/slab.h"

#if TANDEM_HAS_CUDA
#include <cuda_runtime.h>
#endif

#include <cstdlib>
#include <utility>

#include "tandem/error.h"

namespace tandem::offload {
const char* Name(MemKind k) {
  switch (k) {
    case MemKind::kDevice: return "device";
    case MemKind::kPinned: return "pinned host";
    case MemKind::kHost: return "host";
  }
  return "?";
}

Slab::Slab(MemKind kind, uint64_t bytes, const std::string& what, FaultPlan* faults,
           DeviceAllocator* device)
    : kind_(kind), device_(device), bytes_(bytes) {
  if (bytes == 0) return;
  const std::string desc = std::string(Name(kind)) + " allocation of " + std::to_string(bytes) +
                           " bytes for " + what;
  if (faults != nullptr && faults->AllocationFails(kind)) {
    bytes_ = 0;
    throw Error(ErrorKind::kOutOfMemory, desc + " failed (injected)");
  }
  std::string failure;
  switch (kind) {
    case MemKind::kDevice:
      if (device == nullptr) {
        bytes_ = 0;
        throw Error(ErrorKind::kInternal, desc + ": no device allocator");
      }
      ptr_ = device->Allocate(bytes, what.c_str());
      if (ptr_ == nullptr) failure = "the device has not that much memory free";
      break;
    case MemKind::kPinned:
#if TANDEM_HAS_CUDA
    {
      const cudaError_t err = cudaHostAlloc(&ptr_, bytes, cudaHostAllocDefault);
      if (err != cudaSuccess) {
        cudaGetLastError();  // clear the sticky-free error state
        failure = cudaGetErrorString(err);
      }
      break;
    }
#else
      bytes_ = 0;
      throw Error(ErrorKind::kUnsupported, desc + ": this build has no CUDA support");
#endif
    case MemKind::kHost:
      ptr_ = std::aligned_alloc(layout::kSlabAlign, layout::Aligned(bytes));
      if (ptr_ == nullptr) failure = "aligned_alloc returned null";
      break;
  }
  if (!failure.empty() || ptr_ == nullptr) {
    ptr_ = nullptr;
    bytes_ = 0;
    throw Error(ErrorKind::kOutOfMemory,
                desc + " failed: " + (failure.empty() ? "null pointer" : failure));
  }
}

Slab::~Slab() { Release(); }

Slab::Slab(Slab&& o) noexcept
    : kind_(o.kind_),
      device_(o.device_),
      ptr_(std::exchange(o.ptr_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)) {}

Slab& Slab::operator=(Slab&& o) noexcept {
  if (this != &o) {
    Release();
    kind_ = o.kind_;
    device_ = o.device_;
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void Slab::Release() noexcept {
  if (ptr_ == nullptr) return;
  switch (kind_) {
    case MemKind::kDevice: device_->Free(ptr_, bytes_); break;
#if TANDEM_HAS_CUDA
    case MemKind::kPinned: cudaFreeHost(ptr_); break;
#else
    case MemKind::kPinned: break;  // never allocated without CUDA
#endif
    case MemKind::kHost: std::free(ptr_); break;
  }
  ptr_ = nullptr;
}

}  // namespace tandem::offload
