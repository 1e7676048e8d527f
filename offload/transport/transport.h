// Transport: the two copy queues of the offload pipeline, gradients down (device to
// host) and parameters up (host to device), each executing its copies in FIFO order and
// concurrently with the other and with the caller.
//
// Two implementations: CudaTransport (two CUDA streams with events;
// offload/transport/cuda_transport.h) and HostTransport (two worker threads doing memcpy;
// offload/transport/host_transport.h), which lets CI exercise the pipeline's ordering,
// back-pressure and error paths without a GPU.
// Each takes an optional FaultPlan (tandem/faults.h) and asks it once per enqueued copy,
// downloads and uploads alike: a copy it fails is reported as a CUDA copy failure would
// be, Error(kCuda, "injected failure of ..."), from the enqueue (CudaTransport) or from
// Wait (HostTransport).
// A Transport is used by one thread at a time, with one exception: Wait and Done may be
// called from other threads (the speculation worker, offload/speculation/speculator.h;
// the optimizer's const GradConsumed) concurrently with the owner's calls. Both
// implementations allow it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tandem/faults.h"

namespace tandem::offload {

using Ticket = uint64_t;  // identifies one enqueued copy; 0 is never a valid ticket

class Transport {
 public:
  virtual ~Transport() = default;

  // Downloads enqueued after this call start only once all work the caller queued on the
  // compute stream before it is done (the gradients are final).
  virtual void DownloadsAfterComputeStream() = 0;
  // The same after `ready` (a cudaEvent_t recorded on the stream that produced the
  // gradients: GradReady's ready mark); null: DownloadsAfterComputeStream.
  virtual void DownloadsAfter(const void* ready) = 0;
  // Enqueues a copy of `bytes` from device memory `src` to host memory `dst`.
  virtual Ticket Download(void* dst, const void* src, size_t bytes) = 0;
  // Enqueues a copy of `bytes` from host memory `src` to device memory `dst`.
  virtual Ticket Upload(void* dst, const void* src, size_t bytes) = 0;
  // Blocks until copy `t` completed. Throws tandem::Error if it (or an earlier copy of the
  // same queue) failed; what failed is named in the message.
  virtual void Wait(Ticket t) = 0;
  // Whether copy `t` has completed or failed (it no longer reads its source); never
  // blocks, never throws for a failed copy (Wait reports it). Ticket 0: true.
  virtual bool Done(Ticket t) = 0;
  // Makes the compute stream wait for every upload enqueued so far (non-blocking).
  virtual void ComputeStreamAfterUploads() = 0;
  // Makes `stream` (a cudaStream_t as void*) wait for copy `t` (non-blocking where the
  // transport can; the host transport simply waits).
  virtual void StreamWaitFor(Ticket t, void* stream) = 0;
  // Blocks until both queues are empty; errors are swallowed (used for clean-up).
  virtual void Drain() noexcept = 0;
  // Busy time of each queue since the last ResetTimes(), in milliseconds (call after
  // the copies completed).
  virtual double DownloadBusyMs() = 0;
  virtual double UploadBusyMs() = 0;
  virtual void ResetTimes() = 0;
};

// GPU mode's transport on the caller's `stream` (a cudaStream_t as void*): CudaTransport
// (offload/transport/cuda_transport.h). Throws Error(kUnsupported) in a build without CUDA.
std::unique_ptr<Transport> MakeCudaTransport(void* stream, std::shared_ptr<FaultPlan> faults);

}  // namespace tandem::offload
