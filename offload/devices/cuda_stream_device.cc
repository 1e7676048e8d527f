// The CUDA StreamDevice (offload/devices/stream_device.h): five non-blocking streams
// beside the caller's, CUDA events, cudaMemcpyAsync, cudaLaunchHostFunc, and one
// FormatPlans per program.
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_check.h"
#include "offload/devices/stream_device.h"
#include "offload/gpu/format_plans.h"
#include "tandem/error.h"

namespace tandem::offload {
namespace {

class CudaStreamDevice final : public StreamDevice {
 public:
  CudaStreamDevice(void* stream, DeviceAllocator* memory) : memory_(memory) {
    streams_[0] = static_cast<cudaStream_t>(stream);
    const char* what = "(stream executor streams)";
    try {
      for (int q = 1; q < kQueues; ++q)
        TANDEM_CUDA(cudaStreamCreateWithFlags(&streams_[q], cudaStreamNonBlocking), what);
    } catch (...) {
      Release();
      throw;
    }
  }
  ~CudaStreamDevice() override { Release(); }

  Event NewEvent() override {
    cudaEvent_t e = nullptr;
    TANDEM_CUDA(cudaEventCreate(&e), "(stream executor events)");
    events_.push_back(e);
    return static_cast<Event>(events_.size() - 1);
  }
  void Record(Event e, Queue q, const What& w) override {
    TANDEM_CUDA(cudaEventRecord(events_[e], S(q)), w.Text());
  }
  void Wait(Queue q, Event e, const What& w) override {
    TANDEM_CUDA(cudaStreamWaitEvent(S(q), events_[e], 0), w.Text());
  }
  void WaitForeign(Queue q, const void* event) override {
    if (event == nullptr) return;
    TANDEM_CUDA(cudaStreamWaitEvent(S(q), static_cast<cudaEvent_t>(const_cast<void*>(event)), 0),
                "(stream executor waits for the pre-pass or a gradient)");
  }
  bool Query(Event e) override {
    const cudaError_t q = cudaEventQuery(events_[e]);
    if (q == cudaErrorNotReady) return false;
    TANDEM_CUDA(q, "(stream executor: querying an event)");
    return true;
  }
  void Synchronize(Event e) override {
    TANDEM_CUDA(cudaEventSynchronize(events_[e]), "(waiting for the stream executor)");
  }
  void SynchronizeAll() override {
    for (int q = 1; q < kQueues; ++q)
      TANDEM_CUDA(cudaStreamSynchronize(streams_[q]), "(waiting for the stream executor)");
  }
  double ElapsedMs(Event from, Event to) override {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, events_[from], events_[to]) == cudaSuccess) return ms;
    cudaGetLastError();
    return 0;
  }
  void StreamWait(void* stream, Event e) const override {
    TANDEM_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), events_[e], 0),
                "(waiting for the streamed kernels)");
  }

  void Copy(Queue q, void* dst, const void* src, uint64_t bytes, CopyKind kind,
            const What& w) override {
    const cudaMemcpyKind k = kind == CopyKind::kUp     ? cudaMemcpyHostToDevice
                             : kind == CopyKind::kDown ? cudaMemcpyDeviceToHost
                                                       : cudaMemcpyDeviceToDevice;
    TANDEM_CUDA(cudaMemcpyAsync(dst, src, bytes, k, S(q)), w.Text());
  }
  void HostCall(Queue q, void (*fn)(void*), void* arg, const What& w) override {
    TANDEM_CUDA(cudaLaunchHostFunc(S(q), fn, arg), w.Text());
  }

  size_t AddProgram(Algorithm algo, const std::vector<StepSpan>& spans,
                    std::vector<uint32_t> span_tensor, std::vector<uint64_t> grad_offset,
                    std::vector<const void*> slot_grad) override {
    programs_.push_back(std::make_unique<FormatPlans>(memory_, algo, spans, std::move(span_tensor),
                                                      std::move(grad_offset), std::move(slot_grad)));
    bytes_ += programs_.back()->device_bytes();
    return programs_.size() - 1;
  }
  uint64_t program_bytes() const override { return bytes_; }
  void Run(Queue q, size_t program, const std::vector<StepScalars>& scalars,
           const std::vector<uint32_t>& scalar_index, const What& w) override {
    (void)w;  // the plans name themselves in their errors
    programs_[program]->Launch(scalars, scalar_index, S(q));
  }
  void SetGrad(size_t t, const void* grad) override {
    for (const std::unique_ptr<FormatPlans>& p : programs_) p->SetGrad(t, grad);
  }
  void SetSlotGrads(size_t t) override {
    for (const std::unique_ptr<FormatPlans>& p : programs_) p->SetSlotGrads(t);
  }
  void SetProgramGrad(size_t program, size_t t, const void* grad) override {
    FormatPlans& p = *programs_.at(program);
    if (grad != nullptr)
      p.SetGrad(t, grad);
    else
      p.SetSlotGrads(t);
  }

 private:
  static constexpr int kQueues = 5;
  cudaStream_t S(Queue q) const { return streams_[static_cast<int>(q)]; }
  void Release() noexcept {
    for (int q = 1; q < kQueues; ++q)
      if (streams_[q] != nullptr) cudaStreamSynchronize(streams_[q]);
    programs_.clear();
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    events_.clear();
    for (int q = 1; q < kQueues; ++q)
      if (streams_[q] != nullptr) cudaStreamDestroy(streams_[q]);
  }

  DeviceAllocator* memory_;
  cudaStream_t streams_[kQueues] = {};  // [kCaller]: the caller's, not owned
  std::vector<cudaEvent_t> events_;
  std::vector<std::unique_ptr<FormatPlans>> programs_;
  uint64_t bytes_ = 0;
};

}  // namespace

std::unique_ptr<StreamDevice> MakeCudaStreamDevice(void* stream, DeviceAllocator* memory) {
  return std::make_unique<CudaStreamDevice>(stream, memory);
}

}  // namespace tandem::offload
