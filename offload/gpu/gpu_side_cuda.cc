// GpuSide with CUDA (offload/gpu/gpu_side.h): pointer checks, synchronous copies, the
// caller's stream, the rate probe.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/device_memory.h"
#include "cuda/gpu_step.h"
#include "offload/gpu/device_range.h"
#include "offload/gpu/gpu_side.h"
#include "tandem/error.h"

namespace tandem::offload {
namespace {

class CudaSide final : public GpuSide {
 public:
  CudaSide(void* stream, std::shared_ptr<DeviceAllocator> memory)
      : stream_(static_cast<cudaStream_t>(stream)), memory_(std::move(memory)) {
    TANDEM_CUDA(cudaGetDevice(&device_), "(the optimizer's device)");
  }

  void* stream() const override { return stream_; }
  DeviceAllocator* memory() const override {
    return memory_ != nullptr ? memory_.get() : &gpu::CudaMallocAllocator();
  }

  void CheckDevicePointer(const void* p, uint64_t need, const std::string& need_detail,
                          const std::string& who, const char* what) const override {
    cudaPointerAttributes a{};
    const cudaError_t err = cudaPointerGetAttributes(&a, p);
    cudaGetLastError();
    if (err != cudaSuccess || (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged))
      throw Error(ErrorKind::kInvalidArgument,
                  who + ": " + what + " is not device memory (GPU mode needs device pointers)");
    if (const auto have = DeviceBytesFrom(p); have && *have < need)
      throw Error(ErrorKind::kInvalidArgument,
                  who + ": " + what + " needs " + std::to_string(need) + " bytes " + need_detail +
                      " but its device allocation holds only " + std::to_string(*have) +
                      " bytes from that address");
  }

  void Copy(void* dst, const void* src, size_t bytes, const char* context) const override {
    if (bytes == 0) return;
    TANDEM_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), context);
  }

  void CopyConcurrent(void* dst, const void* src, size_t bytes,
                      const char* context) const override {
    if (bytes == 0) return;
    TANDEM_CUDA(cudaSetDevice(device_), context);
    TANDEM_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamPerThread), context);
    TANDEM_CUDA(cudaStreamSynchronize(cudaStreamPerThread), context);
  }

  void ZeroConcurrent(void* dst, size_t bytes, const char* context) const override {
    if (bytes == 0) return;
    TANDEM_CUDA(cudaSetDevice(device_), context);
    TANDEM_CUDA(cudaMemsetAsync(dst, 0, bytes, cudaStreamPerThread), context);
    TANDEM_CUDA(cudaStreamSynchronize(cudaStreamPerThread), context);
  }

  void SyncStream(const char* context) const override {
    TANDEM_CUDA(cudaStreamSynchronize(stream_), context);
  }

  void SyncDevice(const char* context) const override {
    int current = 0;
    TANDEM_CUDA(cudaGetDevice(&current), context);
    TANDEM_CUDA(cudaSetDevice(device_), context);
    const cudaError_t err = cudaDeviceSynchronize();
    cudaSetDevice(current);
    TANDEM_CUDA(err, context);
  }

  void ProbeRates(uint64_t bytes, double kernel_bytes, MachineRates* rates) const override;

 private:
  cudaStream_t stream_;
  std::shared_ptr<DeviceAllocator> memory_;  // null: cudaMalloc
  int device_ = 0;  // current at construction: CopyConcurrent makes it current on its thread
};

void CudaSide::ProbeRates(uint64_t bytes, double kernel_bytes, MachineRates* rates) const {
  const char* what = "(measuring PCIe and HBM for offload_compute = auto)";
  void *h_up = nullptr, *h_down = nullptr;
  gpu::DeviceBuffer up, down;  // device
  cudaStream_t s_up = nullptr, s_down = nullptr;
  cudaEvent_t ev[6] = {};
  auto release = [&] {
    for (cudaStream_t st : {s_up, s_down})
      if (st != nullptr) cudaStreamSynchronize(st);  // before the buffers go back
    for (cudaEvent_t e : ev)
      if (e != nullptr) cudaEventDestroy(e);
    for (cudaStream_t st : {s_up, s_down})
      if (st != nullptr) cudaStreamDestroy(st);
    for (void* h : {h_up, h_down})
      if (h != nullptr) cudaFreeHost(h);
    up = gpu::DeviceBuffer();
    down = gpu::DeviceBuffer();
  };
  try {
    // A GPU nearly full (the model loaded first) may not hold two buffers of `bytes`:
    // smaller copies measure the links almost as well (down to 1 MiB).
    const std::string buffer = std::string("rate probe buffer ") + what;
    for (;;) {
      try {
        up = gpu::DeviceBuffer(memory(), bytes, buffer);
        down = gpu::DeviceBuffer(memory(), bytes, buffer);
        break;
      } catch (const Error& e) {
        up = gpu::DeviceBuffer();
        if (e.kind() != ErrorKind::kOutOfMemory || bytes <= (uint64_t{1} << 20)) throw;
        bytes /= 4;
      }
    }
    TANDEM_CUDA(cudaHostAlloc(&h_up, bytes, cudaHostAllocDefault), what);
    TANDEM_CUDA(cudaHostAlloc(&h_down, bytes, cudaHostAllocDefault), what);
    void* const d_up = up.get();
    void* const d_down = down.get();
    TANDEM_CUDA(cudaStreamCreateWithFlags(&s_up, cudaStreamNonBlocking), what);
    TANDEM_CUDA(cudaStreamCreateWithFlags(&s_down, cudaStreamNonBlocking), what);
    for (cudaEvent_t& e : ev) TANDEM_CUDA(cudaEventCreate(&e), what);
    double best_up = 0, best_down = 0, best_hbm = 0;
    for (int rep = 0; rep < 4; ++rep) {  // the first is a warm-up
      TANDEM_CUDA(cudaEventRecord(ev[0], s_up), what);
      TANDEM_CUDA(cudaStreamWaitEvent(s_down, ev[0], 0), what);
      TANDEM_CUDA(cudaEventRecord(ev[2], s_down), what);
      TANDEM_CUDA(cudaMemcpyAsync(d_up, h_up, bytes, cudaMemcpyHostToDevice, s_up), what);
      TANDEM_CUDA(cudaMemcpyAsync(h_down, d_down, bytes, cudaMemcpyDeviceToHost, s_down), what);
      TANDEM_CUDA(cudaEventRecord(ev[1], s_up), what);
      TANDEM_CUDA(cudaEventRecord(ev[3], s_down), what);
      TANDEM_CUDA(cudaEventRecord(ev[4], s_up), what);
      TANDEM_CUDA(cudaMemcpyAsync(d_down, d_up, bytes, cudaMemcpyDeviceToDevice, s_up), what);
      TANDEM_CUDA(cudaEventRecord(ev[5], s_up), what);
      TANDEM_CUDA(cudaEventSynchronize(ev[5]), what);
      TANDEM_CUDA(cudaEventSynchronize(ev[3]), what);
      float up = 0, down = 0, hbm = 0;
      TANDEM_CUDA(cudaEventElapsedTime(&up, ev[0], ev[1]), what);
      TANDEM_CUDA(cudaEventElapsedTime(&down, ev[2], ev[3]), what);
      TANDEM_CUDA(cudaEventElapsedTime(&hbm, ev[4], ev[5]), what);
      if (rep == 0) continue;
      best_up = std::max(best_up, bytes / (up * 1e6));
      best_down = std::max(best_down, bytes / (down * 1e6));
      best_hbm = std::max(best_hbm, 2.0 * bytes / (hbm * 1e6));  // read + write
    }
    rates->h2d_gbps = best_up;
    rates->d2h_gbps = best_down;
    // The fused kernel reaches about 3/4 of the copy bandwidth (docs/gpu_kernels.md).
    rates->gpu_gparams = 0.75 * best_hbm / kernel_bytes;
  } catch (...) {
    release();
    throw;
  }
  release();
}

}  // namespace

bool GpuSide::Available() noexcept { return gpu::DeviceAvailable(); }

std::unique_ptr<GpuSide> GpuSide::Create(void* stream, std::shared_ptr<DeviceAllocator> memory) {
  return std::make_unique<CudaSide>(stream, std::move(memory));
}

}  // namespace tandem::offload
