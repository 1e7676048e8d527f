// CudaTransport: the Transport of GPU mode. Downloads run on one non-blocking stream and
// uploads on another, so both PCIe directions and the compute stream work at once. Each
// copy is bracketed by timing events; a ticket names the copy's end event.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <vector>

#include "offload/transport/transport.h"
#include "tandem/faults.h"

namespace tandem::offload {

class CudaTransport : public Transport {
 public:
  // faults: asked once per enqueued copy (null: none fails).
  CudaTransport(cudaStream_t compute, std::shared_ptr<FaultPlan> faults);
  ~CudaTransport() override;

  void DownloadsAfterComputeStream() override;
  void DownloadsAfter(const void* ready) override;
  Ticket Download(void* dst, const void* src, size_t bytes) override;
  Ticket Upload(void* dst, const void* src, size_t bytes) override;
  void Wait(Ticket t) override;
  bool Done(Ticket t) override;
  void ComputeStreamAfterUploads() override;
  void StreamWaitFor(Ticket t, void* stream) override;
  void Drain() noexcept override;
  double DownloadBusyMs() override;
  double UploadBusyMs() override;
  void ResetTimes() override;

 private:
  struct Copy {
    cudaEvent_t start = nullptr, end = nullptr;
    bool upload = false;
  };
  Ticket Enqueue(bool upload, void* dst, const void* src, size_t bytes);
  Copy& Slot(Ticket t) { return ring_[t % ring_.size()]; }
  double BusyMs(bool upload);

  // Guards the ring and next_: Wait and Done may run on other threads (transport.h). It
  // is held only to enqueue or to look up a ticket's event, never while blocking.
  std::mutex mu_;
  cudaStream_t compute_, down_ = nullptr, up_ = nullptr;
  cudaEvent_t fence_ = nullptr;
  std::vector<Copy> ring_;
  Ticket next_ = 1;
  Ticket first_of_step_ = 1;
  std::shared_ptr<FaultPlan> faults_;
};

}  // namespace tandem::offload
