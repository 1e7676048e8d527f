// GpuSide: the CUDA facts GPU mode needs beside its executors: whether a device is there,
// checks of the caller's device pointers, synchronous copies, a wait for the caller's
// stream, and the rate probe of offload_compute = auto. The parts of GPU mode that run
// kernels and copies (the pre-pass, the GPU-resident executor, the stream device) have
// their own factories (Make* in their headers), defined with CUDA; in a
// build without a CUDA toolkit (TANDEM_HAS_CUDA == 0) facade/no_cuda.cc defines every one of
// them to throw Error(kUnsupported), and host mode is complete.
//
// One object per optimizer in GPU mode, bound to the caller's stream.
//
// Thread safety: every method may be called from several threads at once (each is one
// CUDA call or a wait). Every failing CUDA call throws Error(kCuda) (kOutOfMemory for
// allocations) naming the call and `context`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tandem/compute_split.h"
#include "tandem/device_allocator.h"

namespace tandem::offload {

class GpuSide {
 public:
  // Whether this build has CUDA and this process can use a CUDA device. Never throws.
  static bool Available() noexcept;
  // A GpuSide on `stream` (a cudaStream_t as void*; nullptr = legacy default stream) whose
  // device memory comes from `memory` (OptimizerConfig::device_allocator; null: cudaMalloc).
  // Throws Error(kUnsupported) in a build without CUDA.
  static std::unique_ptr<GpuSide> Create(void* stream, std::shared_ptr<DeviceAllocator> memory);
  virtual ~GpuSide() = default;

  // The caller's stream (a cudaStream_t as void*).
  virtual void* stream() const = 0;
  // Where the optimizer's device memory comes from (never null; lives as long as this).
  virtual DeviceAllocator* memory() const = 0;

  // Throws Error(kInvalidArgument) "<who>: <what> ..." unless `p` is device memory with
  // at least `need` bytes from `p` (where the driver can tell the allocation's size);
  // `need_detail` explains `need` in the message, e.g. "(9000 elements of f32)".
  virtual void CheckDevicePointer(const void* p, uint64_t need, const std::string& need_detail,
                                  const std::string& who, const char* what) const = 0;

  // A synchronous copy between device (or pinned) and host memory.
  virtual void Copy(void* dst, const void* src, size_t bytes, const char* context) const = 0;
  // For the block-wise initialisation (offload/memory/state_init.h): a synchronous copy
  // like Copy, and a synchronous zeroing of device memory, on the calling thread's
  // per-thread stream, so that copies of several threads overlap; each makes the
  // optimizer's device current on the calling thread (it stays current there). They do
  // not wait for the caller's stream (call SyncStream first where that matters). Host
  // memory should be pinned for the copies to overlap.
  virtual void CopyConcurrent(void* dst, const void* src, size_t bytes,
                              const char* context) const = 0;
  virtual void ZeroConcurrent(void* dst, size_t bytes, const char* context) const = 0;
  // Waits for everything queued on the caller's stream.
  virtual void SyncStream(const char* context) const = 0;
  // Waits for everything queued on the optimizer's device, on any stream (what cudaFree
  // does before it frees): the destructor's wait before the device memory goes back to
  // its allocator, which needs no stream of the caller's to be alive. Leaves the calling
  // thread's current device as it was.
  virtual void SyncDevice(const char* context) const = 0;

  // Measures PCIe both ways at once through `bytes` of pinned and device memory (a
  // quarter of it, and so on down to 1 MiB, when the device has not that much), and
  // estimates the fused kernel's rate for `kernel_bytes` of HBM traffic per element.
  // Fills h2d_gbps, d2h_gbps and gpu_gparams of `rates`.
  virtual void ProbeRates(uint64_t bytes, double kernel_bytes, MachineRates* rates) const = 0;
};

}  // namespace tandem::offload
