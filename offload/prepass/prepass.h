// The pre-pass of a step: the exact sum of squares and the non-finite count of every
// active tensor's gradient (Note [Exact sum of squares] in engine/exact_sum.h), before any
// update. GPU mode: gpu::GradNormPlan, one launch over every gradient and a one-block
// launch adding the blocks' partial sums, on the caller's stream, waited for (the norm
// decides the step); host mode: cpu::HostGradNorm on the optimizer's threads. The
// optimizer's facade keeps it; the executors read the gradients after it.
//
// Early start: GradReady hands a tensor's gradient to TensorReady, which takes its
// statistics at once (host mode) or queues them on the engine's work stream (GPU mode);
// the step's Run adds them, as exact integers, to those of the tensors it reads itself:
// the same bits in any order, whichever tensors went early (Note [Exact sum of squares]).
// Known() gives what has reached the host of them so far, for the speculation's early stop.
//
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "offload/prepass/grad_stats.h"
#include "tandem/config.h"

namespace tandem::cpu {
class HostDriver;
}

namespace tandem::offload {

class Prepass {
 public:
  virtual ~Prepass() = default;
  // The statistics of the tensors with active[t] != 0 (empty: all): those readied in this
  // step (TensorReady) from their partials, the others read now; waits for them. GPU mode:
  // the caller's stream must be ordered after the work stream of TensorReady. Host mode
  // sets times->prepass_ms; GPU mode's is read by ReadTimes.
  virtual NormResult Run(const std::vector<uint8_t>& active, StageTimes* times) = 0;
  // Tensor t's gradient (at its SetGrad pointer) is final: its statistics are taken now
  // (host mode) or queued on `work_stream` (GPU mode: a cudaStream_t ordered after the
  // gradient's producer), for this step's Run. Again in one step: taken again.
  virtual void TensorReady(size_t t, void* work_stream) = 0;
  // The statistics of the tensors readied in this step that have reached the host so far
  // (host mode: all of them; GPU mode: those whose copy completed), added. Never blocks.
  virtual NormResult Known() = 0;
  // Forgets the tensors readied in this step (after its Run, or however it ended).
  virtual void EndStep() = 0;
  // Tensor t's gradient is read at `grad` (element 0) from the next Run on.
  virtual void SetGrad(size_t t, const void* grad) = 0;
  // GPU mode: an event (a cudaEvent_t) recorded on the caller's stream after the last
  // Run (StepWork::prepass_done); host mode: null.
  virtual const void* done_event() const { return nullptr; }
  virtual void AddMemory(MemoryReport* r) const { (void)r; }
  virtual void ReadTimes(StageTimes* times) { (void)times; }
};

// Host mode: on `driver`'s threads (the driver outlives it).
std::unique_ptr<Prepass> MakeHostPrepass(cpu::HostDriver* driver,
                                         const std::vector<TensorSpec>& specs);
// GPU mode, on the caller's `stream` (a cudaStream_t as void*), its device buffers from
// `memory` (which outlives it). Throws Error(kUnsupported) in a build without CUDA.
std::unique_ptr<Prepass> MakeCudaPrepass(void* stream, const std::vector<TensorSpec>& specs,
                                         DeviceAllocator* memory);

}  // namespace tandem::offload
