// Where the optimizer's device memory comes from (OptimizerConfig::device_allocator).
//
// Note [One GPU memory pool]: a framework with its own caching allocator (PyTorch) keeps
// the memory its tensors freed for its own reuse; device memory the engine takes with
// cudaMalloc next to it is memory that cache cannot serve and that its statistics, its
// caps (torch.cuda.set_per_process_memory_fraction) and its out-of-memory retries do not
// see. A model built in fp32 and cast to bf16 leaves the fp32 copy in torch's cache, where
// cudaMalloc cannot reach it. Handing the engine a DeviceAllocator over the framework's
// pool makes the GPU one pool again: every device buffer the engine owns (the
// GPU-resident state, the stream slots, the speculation's holding places, the released
// gradients' buffer, the kernels' tables and the pre-pass's scratch, the rate probe's
// buffers) comes from it. Pinned host memory is not the allocator's.
//
// Thread safety: Allocate and Free are called from the thread that constructs or destroys
// the optimizer, one call at a time per optimizer; several optimizers may share one
// allocator from several threads.
#pragma once

#include <cstdint>

namespace tandem {

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;

  // `bytes` (> 0) bytes of device memory on the calling thread's current CUDA device,
  // aligned to at least 256 bytes, usable from any stream; nullptr when the device has not
  // that much memory free: the optimizer then gives back what it took and throws
  // Error(kOutOfMemory) naming `what` (e.g. "hot optimizer state") and the size. Other
  // failures may throw tandem::Error.
  virtual void* Allocate(uint64_t bytes, const char* what) = 0;

  // Gives back `ptr`, which Allocate returned for `bytes`. The optimizer calls it only
  // once no work it queued on any stream reads or writes that memory, so the allocator may
  // hand it to anyone at once. Never throws.
  virtual void Free(void* ptr, uint64_t bytes) noexcept = 0;
};

}  // namespace tandem
