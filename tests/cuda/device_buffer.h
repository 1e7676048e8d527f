// Test helper: one device allocation with a host mirror, carved into sub-buffers at
// chosen (mis)alignments, moved with one copy each way. Keeps thousands of small tensors
// from costing thousands of cudaMalloc calls.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tandem::gpu::testing {

#define TANDEM_CUDA_OK(call)                                                                 \
  do {                                                                                       \
    const cudaError_t tandem_err_ = (call);                                                  \
    ASSERT_EQ(tandem_err_, cudaSuccess) << #call << ": " << cudaGetErrorString(tandem_err_); \
  } while (0)

class MirroredBuffer {
 public:
  MirroredBuffer() = default;
  MirroredBuffer(const MirroredBuffer&) = delete;
  MirroredBuffer& operator=(const MirroredBuffer&) = delete;
  ~MirroredBuffer() {
    if (dev_ != nullptr) cudaFree(dev_);
  }

  // Reserves `bytes` at an address that is `misalign` bytes past a 256-byte boundary;
  // returns its offset. Only before Allocate().
  size_t Reserve(size_t bytes, size_t misalign) {
    size_t off = (host_.size() + 255) / 256 * 256 + misalign;
    host_.resize(off + bytes + 1);
    return off;
  }
  void Allocate() {
    host_.resize(host_.size() + 256);
    ASSERT_EQ(cudaMalloc(&dev_, host_.size()), cudaSuccess);
  }
  uint8_t* host(size_t off) { return host_.data() + off; }
  void* dev(size_t off) { return static_cast<uint8_t*>(dev_) + off; }
  void Upload() {
    ASSERT_EQ(cudaMemcpy(dev_, host_.data(), host_.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  void Download() {
    ASSERT_EQ(cudaMemcpy(host_.data(), dev_, host_.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  }

 private:
  std::vector<uint8_t> host_;
  void* dev_ = nullptr;
};

}  // namespace tandem::gpu::testing
