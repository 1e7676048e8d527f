// Executors: the parts of the optimizer that hold and update the placement classes, each
// owning its state.
//
// Note [Executors]: every element belongs to one placement class (Note [Three placement
// classes] in tandem/compute_split.h), and each class has one executor that owns its
// layout part (engine/layout/), its slabs, its chunks, its tickets and its speculation:
//
//   GPU-resident   gpu_resident.cc (GPU mode): the GPU-resident part of every tensor, in
//                  device memory, stepped by the fused launches on the caller's stream;
//   host-resident  host_resident.cc (host mode): the same part in host memory, stepped
//                  by the host kernels;
//   GPU-stream     gpu_stream.cc: the host-resident state the GPU computes, chunk-major,
//                  streamed through the slots of a StreamDevice (CUDA streams, or host
//                  threads in host mode: offload/devices/), with its speculation;
//   host-offload   host_offload.cc: the host-resident state the host computes: the offload
//                  pipeline, the early-start buffer and the host speculation.
//
// A Step is the pre-pass (norm and non-finite check over every active gradient), the
// scalars (one StepScalars per (group, tensor step): Note [Scalar index] in
// engine/step_scalars.h), the executors and the finish. Step launches every executor in
// the order above (device executors only enqueue; the pipeline runs on the calling
// thread while the device works), then finishes every one in the same order: a finish
// orders the caller's stream after the parameters its executor wrote. If a launch throws,
// the executors launched so far are abandoned (never throws), so the caller's stream is
// still ordered after whatever was queued. Snapshots, restores, reloads, the state's
// initialisation and the memory report visit each executor's parts.
//
// Thread safety: the optimizer's thread only, except the const methods, which the
// optimizer's const methods may call from several threads at once (each is safe so).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/layout/state_layout.h"
#include "engine/step_scalars.h"
#include "offload/memory/state_init.h"
#include "tandem/config.h"

namespace tandem::offload {

// One step's inputs to every executor.
struct StepWork {
  const std::vector<StepScalars>* scalars = nullptr;  // per scalar index
  // Per tensor: its entry of `scalars`, or kSkipScalarIndex (no gradient at this step).
  const std::vector<uint32_t>* scalar_index = nullptr;
  StageTimes* times = nullptr;  // each executor fills its own stages
  // GPU mode: the pre-pass's end on the caller's stream (a cudaEvent_t; the gradients
  // are read by then), which streamed kernels wait for instead of the hot launch queued
  // after it. Host mode: null.
  const void* prepass_done = nullptr;
};

// What GradReady hands every executor beside the tensor (GPU mode; null in host mode):
// the gradient's ready mark, after which it may be read, and the engine's work stream,
// which already waits for the mark and whose work the tensor's consumed event follows
// (offload/gpu/grad_fences.h).
struct GradMark {
  const void* ready = nullptr;   // a cudaEvent_t
  void* work_stream = nullptr;   // a cudaStream_t
};

// Visits one part of a tensor's state (elements [offset, offset + count) and their
// arrays); on_device: its arrays are device memory (GPU mode; copy with cudaMemcpy).
using PartVisitor = std::function<void(const layout::Part& part, bool on_device)>;

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const char* name() const = 0;

  // ---- Its state
  // Adds what it holds to `r`: its state by class, slots, staging, buffers, kernel tables.
  virtual void AddMemory(MemoryReport* r) const = 0;
  // The regions its state is initialised in from the parameters (construction).
  virtual void AddInitRegions(std::vector<InitRegion>* regions) const = 0;
  // Calls `visit` for each of its parts of tensor t (snapshots, restores, reloads).
  virtual void VisitParts(size_t t, const PartVisitor& visit) const = 0;
  // Whether tensor t's master is its parameter over this executor's elements (Note
  // [Master aliases the parameter]).
  virtual bool MasterIsParam(size_t t) const {
    (void)t;
    return false;
  }
  // Waits until nothing it queued still reads or writes its state.
  virtual void Quiesce() const {}

  // ---- Gradients
  // Points its reads of tensor t's gradient at `grad` (element 0 of the tensor's
  // gradient) from now on (Note [Gradient reads] in tandem/optimizer.h).
  virtual void SetGrad(size_t t, const void* grad) = 0;

  // ---- Early start (GradReady, BeginStep; Note [Speculate, then commit or roll back])
  // Tensor t's gradient is final after `mark` (ready[t] is set); again: it was final
  // before in this step and changed since (its early work is redone; never with
  // release_grads). With release_grads it takes what its step needs of the gradient
  // (Note [Gradient release] in tandem/optimizer.h) and reads it no more.
  virtual void GradReady(size_t t, bool again, const std::vector<uint8_t>& ready,
                         const GradMark& mark) {
    (void)t;
    (void)again;
    (void)ready;
    (void)mark;
  }
  // Gradient release: makes `stream` (GPU mode: a cudaStream_t; host mode: null, and the
  // host waits) wait for the reads of tensor t's gradient it enqueued at GradReady beside
  // the work stream; GradReadsDone says, never blocking, whether they completed.
  virtual void WaitGradReads(size_t t, void* stream) const {
    (void)t;
    (void)stream;
  }
  virtual bool GradReadsDone(size_t t) const {
    (void)t;
    return true;
  }
  // Speculation: no further chunk is taken in this step (the partials seen so far say the
  // step will clip or skip); the chunks taken stay for Step's decision.
  virtual void StopSpeculation() {}
  // BeginStep: speculates with `scalars` and `scalar_index` (they stay valid until
  // EndEarlyStart) on every chunk whose tensors are ready.
  virtual void BeginSpeculation(const std::vector<StepScalars>* scalars,
                                const std::vector<uint32_t>* scalar_index,
                                const std::vector<uint8_t>& ready) {
    (void)scalars;
    (void)scalar_index;
    (void)ready;
  }
  // Step, after the pre-pass: waits for the speculation; throws its first error.
  virtual void AwaitSpeculation(StageTimes* times) { (void)times; }
  // Whether every chunk it speculated on belongs to tensors with active[t] != 0.
  virtual bool SpeculatedActiveOnly(const std::vector<uint8_t>& active) const {
    (void)active;
    return true;
  }
  // Keeps the speculation (the step's Launch then only finishes those chunks), or
  // undoes it (host-computed chunks from their backup; streamed chunks drop their spare).
  virtual void CommitSpeculation(StageTimes* times) { (void)times; }
  virtual void RollBackSpeculation(StageTimes* times) { (void)times; }
  // Ends the early start of a step (after Step, whichever way it ended, and after
  // Restore): a speculation not committed is rolled back. Never throws.
  virtual void EndEarlyStart() noexcept {}

  // ---- The step
  // Starts its part of the step (device executors enqueue and return).
  virtual void Launch(const StepWork& w) = 0;
  // After every Launch: orders the caller's stream after its parameter writes.
  virtual void Finish() {}
  // After a failed Launch (of this executor or a later one): what Finish does, but never
  // throws.
  virtual void Abandon() noexcept {}
  // Makes `stream` wait until tensor t's parameter, as it last wrote it, is final / until
  // it no longer reads tensor t's gradient of the last step (non-blocking where it can;
  // nothing for tensors it does not update).
  virtual void WaitParam(size_t t, void* stream) const {
    (void)t;
    (void)stream;
  }
  virtual void WaitGradConsumed(size_t t, void* stream) const {
    (void)t;
    (void)stream;
  }
  // Adds its stage times of the last step to `times` (GPU timings are read here, waiting
  // for them if needed).
  virtual void ReadTimes(StageTimes* times) { (void)times; }
};

}  // namespace tandem::offload
