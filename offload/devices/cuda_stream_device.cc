// The CUDA StreamDevice (offload/devices/stream_device.h): a non-blocking stream per
// queue it serves beside the caller's, CUDA events (tickets from a ring, created as they
// are first taken), cudaMemcpyAsync, cudaLaunchHostFunc, and one FormatPlans per program.
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_check.h"
#include "offload/devices/stream_device.h"
#include "offload/gpu/format_plans.h"
#include "tandem/error.h"

namespace tandem::offload {
namespace {

// Ids: NewEvent's count from 1 (kNoEvent is 0); a ticket's is its ring index with this
// bit set.
constexpr StreamDevice::Event kTicketBit = StreamDevice::Event{1} << 31;

class CudaStreamDevice final : public StreamDevice {
 public:
  CudaStreamDevice(void* stream, DeviceAllocator* memory, const Queues& queues,
                   std::shared_ptr<FaultPlan> faults)
      : memory_(memory), faults_(std::move(faults)), ring_(kTicketRing, nullptr) {
    streams_[0] = static_cast<cudaStream_t>(stream);
    const char* what = "(stream device streams)";
    try {
      for (Queue q : queues)
        if (q != Queue::kCaller && streams_[static_cast<int>(q)] == nullptr)
          TANDEM_CUDA(
              cudaStreamCreateWithFlags(&streams_[static_cast<int>(q)], cudaStreamNonBlocking),
              what);
    } catch (...) {
      Release();
      throw;
    }
  }
  ~CudaStreamDevice() override { Release(); }

  Event NewEvent() override {
    cudaEvent_t e = nullptr;
    TANDEM_CUDA(cudaEventCreate(&e), "(stream device events)");
    events_.push_back(e);
    return static_cast<Event>(events_.size());
  }
  void Record(Event e, Queue q, const What& w) override {
    TANDEM_CUDA(cudaEventRecord(Of(e), S(q)), w.Text());
  }
  // Guarded: Synchronize, Query and StreamWait may look a ticket up on other threads.
  Event Ticket(Queue q) override {
    std::lock_guard<std::mutex> lock(mu_);
    const uint32_t index = static_cast<uint32_t>(next_ticket_ % kTicketRing);
    cudaEvent_t& e = ring_[index];
    if (e == nullptr) TANDEM_CUDA(cudaEventCreate(&e), "(copy tickets)");
    TANDEM_CUDA(cudaEventRecord(e, S(q)), "(copy ticket " + std::to_string(next_ticket_) + ")");
    ++next_ticket_;
    return kTicketBit | index;
  }
  void Wait(Queue q, Event e, const What& w) override {
    if (e == kNoEvent) return;
    TANDEM_CUDA(cudaStreamWaitEvent(S(q), Of(e), 0), w.Text());
  }
  void WaitForeign(Queue q, const void* event) override {
    if (event == nullptr) return;
    TANDEM_CUDA(cudaStreamWaitEvent(S(q), static_cast<cudaEvent_t>(const_cast<void*>(event)), 0),
                "(stream device waits for the pre-pass or a gradient)");
  }
  // A failed operation no longer runs: true; Synchronize reports it.
  bool Query(Event e) override {
    if (e == kNoEvent) return true;
    const cudaError_t q = cudaEventQuery(Of(e));
    if (q == cudaErrorNotReady) return false;
    if (q != cudaSuccess) cudaGetLastError();
    return true;
  }
  void Synchronize(Event e) override {
    if (e == kNoEvent) return;
    TANDEM_CUDA(cudaEventSynchronize(Of(e)), "(waiting for the stream device)");
  }
  // Every stream is waited for before the first failure is thrown.
  void SynchronizeAll() override {
    cudaError_t first = cudaSuccess;
    for (int q = 1; q < kQueues; ++q) {
      if (streams_[q] == nullptr) continue;
      const cudaError_t err = cudaStreamSynchronize(streams_[q]);
      if (first == cudaSuccess) first = err;
    }
    TANDEM_CUDA(first, "(waiting for the stream device)");
  }
  double ElapsedMs(Event from, Event to) override {
    if (from == kNoEvent || to == kNoEvent) return 0;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, Of(from), Of(to)) == cudaSuccess) return ms;
    cudaGetLastError();
    return 0;
  }
  void StreamWait(void* stream, Event e) const override {
    if (e == kNoEvent) return;
    TANDEM_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), Of(e), 0),
                "(waiting for the stream device)");
  }

  void Copy(Queue q, void* dst, const void* src, uint64_t bytes, CopyKind kind,
            const What& w) override {
    const cudaMemcpyKind k = kind == CopyKind::kUp     ? cudaMemcpyHostToDevice
                             : kind == CopyKind::kDown ? cudaMemcpyDeviceToHost
                                                       : cudaMemcpyDeviceToDevice;
    if (faults_ != nullptr && faults_->CopyFails())
      throw Error(ErrorKind::kCuda, std::string("injected failure of ") +
                                        (kind == CopyKind::kUp     ? "upload"
                                         : kind == CopyKind::kDown ? "download"
                                                                   : "device") +
                                        " copy " + w.Text());
    TANDEM_CUDA(cudaMemcpyAsync(dst, src, bytes, k, S(q)), w.Text());
  }
  void HostCall(Queue q, void (*fn)(void*), void* arg, const What& w) override {
    TANDEM_CUDA(cudaLaunchHostFunc(S(q), fn, arg), w.Text());
  }

  size_t AddProgram(Algorithm algo, const std::vector<StepSpan>& spans,
                    std::vector<uint32_t> span_tensor, std::vector<uint64_t> grad_offset,
                    std::vector<const void*> slot_grad) override {
    programs_.push_back(std::make_unique<FormatPlans>(memory_, algo, spans, std::move(span_tensor),
                                                      std::move(grad_offset),
                                                      std::move(slot_grad)));
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
  cudaStream_t S(Queue q) const {
    const cudaStream_t s = streams_[static_cast<int>(q)];
    if (s == nullptr && q != Queue::kCaller)
      throw Error(ErrorKind::kInternal, "CUDA stream device: queue " +
                                            std::to_string(static_cast<int>(q)) + " is not served");
    return s;
  }
  cudaEvent_t Of(Event e) const {
    if ((e & kTicketBit) == 0) return events_[e - 1];
    std::lock_guard<std::mutex> lock(mu_);
    return ring_[e & ~kTicketBit];
  }
  void Release() noexcept {
    for (int q = 1; q < kQueues; ++q)
      if (streams_[q] != nullptr) cudaStreamSynchronize(streams_[q]);
    programs_.clear();
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    events_.clear();
    for (cudaEvent_t e : ring_)
      if (e != nullptr) cudaEventDestroy(e);
    ring_.clear();
    for (int q = 1; q < kQueues; ++q)
      if (streams_[q] != nullptr) cudaStreamDestroy(streams_[q]);
  }

  DeviceAllocator* memory_;
  std::shared_ptr<FaultPlan> faults_;
  cudaStream_t streams_[kQueues] = {};  // [kCaller]: the caller's, not owned
  std::vector<cudaEvent_t> events_;
  // The tickets: kTicketRing events, each created when first taken; mu_ guards them and
  // next_ticket_ (looked up on other threads).
  mutable std::mutex mu_;
  std::vector<cudaEvent_t> ring_;
  uint64_t next_ticket_ = 0;
  std::vector<std::unique_ptr<FormatPlans>> programs_;
  uint64_t bytes_ = 0;
};

}  // namespace

std::unique_ptr<StreamDevice> MakeCudaStreamDevice(void* stream, DeviceAllocator* memory,
                                                   const Queues& queues,
                                                   std::shared_ptr<FaultPlan> faults) {
  return std::make_unique<CudaStreamDevice>(stream, memory, queues, std::move(faults));
}

}  // namespace tandem::offload
