// GradFences: GPU mode's ordering of the gradients handed to GradReady (Note [Gradient
// release] in tandem/optimizer.h). Two streams of the engine's own beside the caller's:
//
//   ready stream (the producer's)  ... gradient final ── ready mark ──┐
//   work stream                    (waits for the mark) norm partial, hot gradient copy
//   other queues                   (wait for the mark) downloads (the stream devices)
//   join stream                    (waits for the work stream and each executor's reads of
//                                   the tensor) ── consumed event of the tensor
//   caller's stream at Step        (waits for the work stream) pre-pass, kernels
//
// The ready mark is one event, recorded again by each MarkReady: every wait for it is
// enqueued before the next MarkReady. One consumed event per tensor, recorded again at
// each step's GradReady of it. No CUDA type appears here; CUDA builds define the factory
// (gpu/grad_fences_cuda.cc), others throw kUnsupported (facade/no_cuda.cc).
//
// Thread safety: the optimizer's thread, but Consumed and WaitConsumed (const) may run on
// several threads at once.
#pragma once

#include <cstddef>
#include <memory>

namespace tandem::offload {

class GradFences {
 public:
  virtual ~GradFences() = default;
  // Records the ready mark on `ready_stream` (a cudaStream_t as void*; nullptr: the
  // caller's stream) and makes the work stream wait for it; returns the mark (a
  // cudaEvent_t as void*), valid for waits enqueued before the next MarkReady.
  virtual const void* MarkReady(void* ready_stream) = 0;
  virtual void* work_stream() const = 0;
  virtual void* join_stream() const = 0;
  // Records tensor t's consumed event on the join stream, after the work stream's work so
  // far (what the executors' reads of it need they have already made it wait for).
  virtual void RecordConsumed(size_t t) = 0;
  // Whether tensor t's consumed event has been reached (true when never recorded).
  virtual bool Consumed(size_t t) const = 0;
  // Makes `stream` (a cudaStream_t as void*) wait for it, without blocking the host.
  virtual void WaitConsumed(size_t t, void* stream) const = 0;
  // Makes the caller's stream wait for everything queued on the work stream (Step,
  // before its pre-pass).
  virtual void CallerWaitsForWork() = 0;
  // Step has queued its kernels on the caller's stream: the work stream of the next step
  // waits for them before it writes what they read (the norm partials, the hot gradient
  // buffer).
  virtual void StepQueued() = 0;
  // Waits until both streams ran everything queued; never throws (destruction).
  virtual void Synchronize() noexcept = 0;
};

// On the caller's `stream` (a cudaStream_t as void*), one consumed event per tensor.
// Throws Error(kUnsupported) in a build without CUDA, Error(kCuda) when CUDA fails.
std::unique_ptr<GradFences> MakeCudaGradFences(void* stream, size_t tensors);

}  // namespace tandem::offload
