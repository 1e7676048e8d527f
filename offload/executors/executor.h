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
// thread while the device works), then finishes those the caller's stream joins (Joined,
// below): a finish orders the caller's stream after the parameters its executor wrote. If
// a launch throws, they are abandoned instead (never throws), so the caller's stream is
// still ordered after whatever was queued. Snapshots, restores, reloads, the state's
// initialisation and the memory report visit each executor's parts.
//
// Note [Executor roles]: Executor below is what every executor does. What only some do is
// a role of its own (offload/executors/roles.h): speculation during backward (Speculative),
// queues of its own (Queued), device work a caller's stream can be ordered after
// (StreamOrdered), device timings (DeviceTimed), work the caller's stream joins after
// every launch (Joined). An executor names its roles (roles()); the facade asks an
// ExecutorSet (offload/executors/executor_set.h) for the executors of the role a phase
// needs.
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

class Speculative;
class Queued;
class StreamOrdered;
class DeviceTimed;
class Joined;

// The roles an executor takes beyond Executor (null: not its): Note [Executor roles].
struct Roles {
  Speculative* speculative = nullptr;
  Queued* queued = nullptr;
  StreamOrdered* stream_ordered = nullptr;
  DeviceTimed* device_timed = nullptr;
  Joined* joined = nullptr;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const char* name() const = 0;
  virtual Roles roles() = 0;

  // ---- Its state
  // Adds what it holds to `r`: its state by class, slots, staging, buffers, kernel tables.
  virtual void AddMemory(MemoryReport* r) const = 0;
  // The regions its state is initialised in from the parameters (construction).
  virtual void AddInitRegions(std::vector<InitRegion>* regions) const = 0;
  // Calls `visit` for each of its parts of tensor t (snapshots, restores, reloads).
  virtual void VisitParts(size_t t, const PartVisitor& visit) const = 0;
  // Whether tensor t's master is its parameter over this executor's elements (Note
  // [Master aliases the parameter]).
  virtual bool MasterIsParam(size_t t) const = 0;

  // ---- Gradients
  // Points its reads of tensor t's gradient at `grad` (element 0 of the tensor's
  // gradient) from now on (Note [Gradient reads] in tandem/optimizer.h).
  virtual void SetGrad(size_t t, const void* grad) = 0;
  // GradReady (Note [Speculate, then commit or roll back]): tensor t's gradient is final
  // after `mark` (ready[t] is set); again: it was final before in this step and changed
  // since (its early work is redone; never with release_grads). With release_grads it
  // takes what its step needs of the gradient (Note [Gradient release] in
  // tandem/optimizer.h) and reads it no more.
  virtual void GradReady(size_t t, bool again, const std::vector<uint8_t>& ready,
                         const GradMark& mark) = 0;
  // Ends the early start of a step (after Step, whichever way it ended, and after
  // Restore): the gradients it took at GradReady are read where SetGrad says again; a
  // speculation not committed is rolled back. Never throws.
  virtual void EndEarlyStart() noexcept = 0;

  // ---- The step
  // Starts its part of the step (device executors enqueue and return).
  virtual void Launch(const StepWork& w) = 0;
};

}  // namespace tandem::offload
