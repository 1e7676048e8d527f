// Executors: the parts of a step that update the three placement classes.
//
// Note [Executors]: a Step is the pre-pass (norm and non-finite check over every active
// gradient), the scalars (one StepScalars per (group, tensor step): Note [Scalar index] in
// engine/step_scalars.h),
// the executors, and the finish. Each executor updates one class of elements (Note [Three
// placement classes] in tandem/compute_split.h) from the same scalars:
//
//   GPU-resident   GpuResident: the fused launches over the hot spans (host mode:
//                  HostResident, the host kernels over the same spans);
//   GPU-stream     GpuStream: host-resident state streamed through the fused kernel
//                  (host mode: HostStream, the same chunks through host slots);
//   host-offload   the offload pipeline (gradients down, host kernels, parameters up),
//                  whose state it shares with early start, so the optimizer implements it.
//
// Step launches every executor in that order (device executors only enqueue; the pipeline
// runs on the calling thread while the device works), then finishes every one in the same
// order: a finish orders the caller's stream after the parameters its executor wrote. If a
// launch throws, the executors launched so far are abandoned (never throws), so the
// caller's stream is still ordered after whatever was queued.
//
// Thread safety: the optimizer's thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/step_scalars.h"
#include "tandem/optimizer.h"

namespace tandem::offload {

// One step's inputs to every executor.
struct StepWork {
  const std::vector<StepScalars>* scalars = nullptr;  // per scalar index
  // Per tensor: its entry of `scalars`, or kSkipScalarIndex (no gradient at this step).
  const std::vector<uint32_t>* scalar_index = nullptr;
  StageTimes* times = nullptr;  // each executor fills its own stages
  // Per streamed chunk (empty: none): its speculative update is kept (Note [Speculating
  // streamed chunks] in offload/stream_speculation.h).
  const std::vector<uint8_t>* stream_committed = nullptr;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const char* name() const = 0;
  // Starts this executor's part of the step (device executors enqueue and return).
  virtual void Launch(const StepWork& w) = 0;
  // After every Launch: orders the caller's stream after this executor's parameter writes.
  virtual void Finish() {}
  // After a failed Launch (of this executor or a later one): what Finish does, but never
  // throws.
  virtual void Abandon() noexcept {}
  // Makes `stream` wait until tensor t's parameter, as this executor last wrote it, is
  // final (non-blocking where it can; nothing for tensors it does not update).
  virtual void WaitParam(size_t t, void* stream) const {
    (void)t;
    (void)stream;
  }
  // Points this executor's reads of tensor t's gradient at `grad` (the whole tensor's
  // gradient, element 0) from now on (Note [Gradient reads] in tandem/optimizer.h).
  virtual void SetGrad(size_t t, const void* grad) {
    (void)t;
    (void)grad;
  }
  // Adds this executor's stage times of the last step to `times` (GPU timings are read
  // here, waiting for them if needed).
  virtual void ReadTimes(StageTimes* times) { (void)times; }
};

// The GPU-stream executors also update chunks speculatively during backward (Note
// [Speculating streamed chunks] in offload/stream_speculation.h).
class StreamExecutor : public Executor {
 public:
  // Updates streamed chunk c (one whose StreamChunkSpans::speculative()) with `scalars`:
  // its state's old bytes into its backup, the new state into the host chunk, the
  // parameters into its holding place (GPU mode: queued; host mode: done on return).
  virtual void Speculate(size_t c, const std::vector<StepScalars>& scalars,
                         const std::vector<uint32_t>& scalar_index) = 0;
  // Waits until every Speculate is done: host chunks and backups are final.
  virtual void WaitSpeculated() = 0;
};

}  // namespace tandem::offload
