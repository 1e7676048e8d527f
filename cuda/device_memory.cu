// Device buffers from a DeviceAllocator, and cudaMalloc as one (cuda/device_memory.h).
#include <cuda_runtime.h>

#include <utility>

#include "cuda/cuda_check.h"
#include "cuda/device_memory.h"
#include "tandem/error.h"

namespace tandem::gpu {
namespace {

class CudaMalloc final : public DeviceAllocator {
 public:
  void* Allocate(uint64_t bytes, const char* what) override {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    detail::CheckCuda(err, std::string("cudaMalloc of ") + std::to_string(bytes) +
                               " bytes for the " + what);
    return p;
  }
  void Free(void* ptr, uint64_t) noexcept override { cudaFree(ptr); }
};

}  // namespace

DeviceAllocator& CudaMallocAllocator() {
  static CudaMalloc allocator;
  return allocator;
}

void* AllocateDevice(DeviceAllocator* allocator, uint64_t bytes, const std::string& what) {
  if (bytes == 0) return nullptr;
  DeviceAllocator& a = allocator != nullptr ? *allocator : CudaMallocAllocator();
  void* p = a.Allocate(bytes, what.c_str());
  if (p == nullptr)
    throw Error(ErrorKind::kOutOfMemory,
                what + ": no device memory for " + std::to_string(bytes) + " bytes");
  return p;
}

DeviceBuffer::DeviceBuffer(DeviceAllocator* allocator, uint64_t bytes, const std::string& what)
    : allocator_(allocator != nullptr ? allocator : &CudaMallocAllocator()),
      ptr_(AllocateDevice(allocator_, bytes, what)),
      bytes_(ptr_ != nullptr ? bytes : 0) {}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : allocator_(other.allocator_),
      ptr_(std::exchange(other.ptr_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    allocator_ = other.allocator_;
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::Release() noexcept {
  if (ptr_ != nullptr) allocator_->Free(ptr_, bytes_);
  ptr_ = nullptr;
  bytes_ = 0;
}

}  // namespace tandem::gpu
