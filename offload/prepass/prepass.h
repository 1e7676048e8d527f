// The pre-pass of a step: the exact sum of squares and the non-finite count of every
// active tensor's gradient (Note [Exact sum of squares] in engine/exact_sum.h), before any
// update. GPU mode: gpu::GradNormPlan, one launch over every gradient and a one-block
// launch adding the blocks' partial sums, on the caller's stream, waited for (the norm
// decides the step); host mode: cpu::HostGradNorm on the optimizer's threads. The
// optimizer's facade keeps it; the executors read the gradients after it.
//
// Thread safety: the optimizer's thread only.
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
  // The statistics of the tensors with active[t] != 0 (empty: all); waits for them.
  // Host mode sets times->prepass_ms; GPU mode's is read by ReadTimes.
  virtual NormResult Run(const std::vector<uint8_t>& active, StageTimes* times) = 0;
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
// GPU mode, on the caller's `stream` (a cudaStream_t as void*). Throws Error(kUnsupported)
// in a build without CUDA.
std::unique_ptr<Prepass> MakeCudaPrepass(void* stream, const std::vector<TensorSpec>& specs);

}  // namespace tandem::offload
