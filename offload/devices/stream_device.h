// StreamDevice: what the executors need of a device to move state and gradients between
// host and device memory and to step chunks there: queues that run their operations in
// order and concurrently with each other, events that order one queue after another (a
// copy's ticket is one), copies, host calls, and kernels over a chunk's spans. The
// GPU-stream executor (offload/executors/gpu_stream.h) streams through one; the offload
// pipeline (offload/pipeline/pipeline.h) copies gradients down and parameters up through
// another, which serves only the two copy queues, kUp and kDown.
//
// Two devices: the CUDA device (devices/cuda_stream_device.cc: CUDA streams and events,
// the fused kernel's plans) and the host device (devices/host_stream_device.h: a thread
// per queue, memcpy, the host kernels), so that what an executor writes over a device
// runs in CI exactly as on the GPU, with real concurrency between the queues.
//
// Ordering contract (the CUDA stream and event semantics): operations of one queue run in
// the order they were enqueued; Record(e, q) marks the point of q it is enqueued at;
// Wait(q, e) makes the operations enqueued on q after it wait until e's last Record
// before the Wait has been reached (nothing when e was never recorded). kCaller is the
// caller's stream: in host mode its operations happen on the calling thread, so a Wait on
// it blocks until the event is reached, and a Record on it is reached at once.
//
// Tickets: Ticket(q) records a one-shot event from a ring the device keeps (kTicketRing
// of them), so that each copy of a queue can be waited for on its own (the pipeline's
// copies, early start's downloads). A ticket names its own point of q until kTicketRing
// more tickets were taken; an older one names a newer point (a wait on it is
// conservative). kNoEvent (0) is the ticket never taken: reached, nothing to wait for.
//
// Errors: an operation that cannot be enqueued throws from the call (Error(kCuda) naming
// the What). One that fails while it runs (host device) is reported once, by the first
// Synchronize(e) or kCaller Wait on an event recorded after it on its queue, or by
// SynchronizeAll; the queue goes on. A FaultPlan handed to the factory is asked once per
// Copy: the CUDA device throws Error(kCuda, "injected failure of ... copy ...") from the
// Copy; the host device skips the copy and reports that error as a failed operation.
//
// Thread safety: one thread enqueues (the optimizer's); Synchronize, SynchronizeAll,
// Query and StreamWait may also be called from other threads at the same time (the
// speculation worker, the optimizer's const methods).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/step_scalars.h"
#include "engine/step_span.h"
#include "tandem/device_allocator.h"
#include "tandem/faults.h"
#include "tandem/types.h"

namespace tandem::cpu {
class HostDriver;
}

namespace tandem::offload {

class StreamDevice {
 public:
  // kUp: host to device; kDown: device to host; kRun: kernels; kGrads: gradient release's
  // downloads of the gradients handed to GradReady.
  enum class Queue : uint8_t { kCaller = 0, kUp, kRun, kDown, kGrads };
  using Event = uint32_t;
  static constexpr Event kNoEvent = 0;
  static constexpr uint32_t kTicketRing = uint32_t{1} << 15;
  enum class CopyKind : uint8_t { kUp, kDown, kDevice };  // host to device, back, on the device

  // What an operation is for, for an error's message: "(streamed chunk 3 of 70, 4096
  // bytes: upload)".
  struct What {
    size_t chunk = 0, chunks = 0;
    uint64_t bytes = 0;
    const char* what = "";
    const char* unit = "streamed chunk";
    std::string Text() const;
  };

  virtual ~StreamDevice() = default;

  // Events live as long as the device; make them before the first operation.
  virtual Event NewEvent() = 0;
  virtual void Record(Event e, Queue q, const What& w) = 0;
  // A ticket: an event of the ring recorded on q now (see above).
  virtual Event Ticket(Queue q) = 0;
  virtual void Wait(Queue q, Event e, const What& w) = 0;
  // Makes `q` wait for a foreign event (a cudaEvent_t: the step's pre-pass, StepWork::
  // prepass_done; a gradient's ready mark); null: nothing. Host mode has none.
  virtual void WaitForeign(Queue q, const void* event) = 0;
  // Whether e's last Record has been reached or failed (true when never recorded); never
  // blocks, never throws for a failed operation (Synchronize reports it).
  virtual bool Query(Event e) = 0;
  // The host waits until e's last Record has been reached / until every queue (but
  // kCaller) has run everything enqueued; each rethrows a failure (see above).
  virtual void Synchronize(Event e) = 0;
  virtual void SynchronizeAll() = 0;
  // SynchronizeAll, its failures dropped (clean-up after a failure).
  void Drain() noexcept;
  // Milliseconds between two reached events (0 when the device cannot tell).
  virtual double ElapsedMs(Event from, Event to) = 0;
  // Makes the foreign `stream` (a cudaStream_t as void*) wait for e (host mode: waits).
  virtual void StreamWait(void* stream, Event e) const = 0;

  virtual void Copy(Queue q, void* dst, const void* src, uint64_t bytes, CopyKind kind,
                    const What& w) = 0;
  // Calls fn(arg) on the host in q's order; fn must not throw and must not call CUDA.
  virtual void HostCall(Queue q, void (*fn)(void*), void* arg, const What& w) = 0;

  // A program: spans to step together (a chunk's, in its slot), each reading tensor
  // span_tensor[i]'s gradient at byte grad_offset[i] (SetGrad), or at slot_grad[i] once
  // SetSlotGrads(span_tensor[i]) (gradient release: the gradients uploaded with the
  // chunk; empty without release); returns its id. Built before the first Run.
  virtual size_t AddProgram(Algorithm algo, const std::vector<StepSpan>& spans,
                            std::vector<uint32_t> span_tensor, std::vector<uint64_t> grad_offset,
                            std::vector<const void*> slot_grad = {}) = 0;
  // Device bytes the programs hold (kernel tables).
  virtual uint64_t program_bytes() const = 0;
  // Enqueues program p on q: span i with scalars[scalar_index[span_tensor[i]]], none
  // where that is kSkipScalarIndex. The scalars are taken by value.
  virtual void Run(Queue q, size_t program, const std::vector<StepScalars>& scalars,
                   const std::vector<uint32_t>& scalar_index, const What& w) = 0;
  // Points every program's spans of tensor t at `grad` (its element 0) from their next
  // Run on.
  virtual void SetGrad(size_t t, const void* grad) = 0;
  // Points them at their slot_grad from their next Run on (until the next SetGrad(t)).
  virtual void SetSlotGrads(size_t t) = 0;
  // The same for program p alone: its spans of tensor t read `grad` (element 0), or their
  // slot_grad when grad is null, from its next Run on; the other programs keep theirs.
  virtual void SetProgramGrad(size_t program, size_t t, const void* grad) = 0;
};

// The queues a device serves beside kCaller (an operation on another throws
// Error(kInternal)): the GPU-stream executor's, or the offload pipeline's copy queues.
using Queues = std::vector<StreamDevice::Queue>;
inline const Queues kStreamQueues{StreamDevice::Queue::kUp, StreamDevice::Queue::kRun,
                                  StreamDevice::Queue::kDown, StreamDevice::Queue::kGrads};
inline const Queues kCopyQueues{StreamDevice::Queue::kUp, StreamDevice::Queue::kDown};

// The CUDA device on the caller's `stream` (a cudaStream_t as void*), one non-blocking
// stream per queue; its programs' device tables come from `memory` (which outlives the
// device; null when it runs no program); `faults`: see above (null: none fails). Throws
// Error(kUnsupported) in a build without CUDA.
std::unique_ptr<StreamDevice> MakeCudaStreamDevice(void* stream, DeviceAllocator* memory,
                                                   const Queues& queues = kStreamQueues,
                                                   std::shared_ptr<FaultPlan> faults = nullptr);

// The host device: one thread per queue on `cpus` (empty: anywhere; validated by the
// caller, e.g. OptimizerConfig::host_cpus through HostDriver), kernels through `driver`
// (which outlives the device; null when it runs no program).
std::unique_ptr<StreamDevice> MakeHostStreamDevice(cpu::HostDriver* driver, std::vector<int> cpus,
                                                   const Queues& queues = kStreamQueues,
                                                   std::shared_ptr<FaultPlan> faults = nullptr);

}  // namespace tandem::offload
