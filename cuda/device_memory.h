// Device memory of the kernels' tables and scratch, taken from a DeviceAllocator
// (tandem/device_allocator.h; Note [One GPU memory pool]), and the allocator the engine
// uses when none is configured. No CUDA type appears here.
#pragma once

#include <cstdint>
#include <string>

#include "tandem/device_allocator.h"

namespace tandem::gpu {

// cudaMalloc and cudaFree as a DeviceAllocator: Allocate returns null when cudaMalloc
// reports cudaErrorMemoryAllocation and throws Error(kCuda) for any other failure. One
// object for the process; thread-safe.
DeviceAllocator& CudaMallocAllocator();

// An owned device buffer from a DeviceAllocator. Move-only; the allocator must outlive it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `bytes` bytes from `allocator` (null: CudaMallocAllocator()); none for 0 bytes. Throws
  // Error(kOutOfMemory) "<what>: no device memory for <bytes> bytes" when the allocator
  // has none.
  DeviceBuffer(DeviceAllocator* allocator, uint64_t bytes, const std::string& what);
  ~DeviceBuffer() { Release(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  uint64_t size() const { return bytes_; }

 private:
  void Release() noexcept;
  DeviceAllocator* allocator_ = nullptr;
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

// Allocate through `allocator` (null: CudaMallocAllocator()), turning a null result into
// Error(kOutOfMemory) naming `what` and the size. Returns null for 0 bytes.
void* AllocateDevice(DeviceAllocator* allocator, uint64_t bytes, const std::string& what);

}  // namespace tandem::gpu
