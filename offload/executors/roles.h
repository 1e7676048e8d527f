// The roles only some executors take (Note [Executor roles] in
// offload/executors/executor.h): each is a small interface, implemented by the executors
// that do what it names, and an executor lists the ones it takes in Executor::roles().
//
//   role            GPU-resident  host-resident  GPU-stream  host-offload
//   Speculative                                      x            x
//   Queued                                           x            x
//   StreamOrdered        x                           x            x
//   DeviceTimed          x                           x
//   Joined                                           x
//
// Thread safety: as Executor's (the optimizer's thread; const methods from several
// threads at once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/step_scalars.h"
#include "offload/executors/executor.h"
#include "tandem/config.h"

namespace tandem::offload {

// Speculative early start (BeginStep; Note [Speculate, then commit or roll back] in
// offload/speculation/speculator.h): chunks updated during backward, kept or undone by
// Step. EndEarlyStart (Executor) ends a speculation.
class Speculative {
 public:
  virtual ~Speculative() = default;
  // BeginStep: speculates with `scalars` and `scalar_index` (they stay valid until
  // EndEarlyStart) on every chunk whose tensors are ready.
  virtual void BeginSpeculation(const std::vector<StepScalars>* scalars,
                                const std::vector<uint32_t>* scalar_index,
                                const std::vector<uint8_t>& ready) = 0;
  // No further chunk is taken in this step (the partials seen so far say the step will
  // clip or skip); the chunks taken stay for Step's decision.
  virtual void StopSpeculation() = 0;
  // Step, after the pre-pass: waits for the speculation; throws its first error.
  virtual void AwaitSpeculation(StageTimes* times) = 0;
  // Whether every chunk it speculated on belongs to tensors with active[t] != 0.
  virtual bool SpeculatedActiveOnly(const std::vector<uint8_t>& active) const = 0;
  // Keeps the speculation (the step's Launch then only finishes those chunks), or
  // undoes it (host-computed chunks from their backup; streamed chunks drop their spare).
  virtual void CommitSpeculation(StageTimes* times) = 0;
  virtual void RollBackSpeculation(StageTimes* times) = 0;
};

// Queues of its own (a StreamDevice's, offload/devices/stream_device.h) that read its
// state and the gradients after the calls that enqueued them returned.
class Queued {
 public:
  virtual ~Queued() = default;
  // Waits until nothing it queued still reads or writes its state.
  virtual void Quiesce() const = 0;
  // Gradient release: makes `stream` (GPU mode: a cudaStream_t; host mode: null, and the
  // host waits) wait for the reads of tensor t's gradient it enqueued at GradReady beside
  // the work stream; GradReadsDone says, never blocking, whether they completed.
  virtual void WaitGradReads(size_t t, void* stream) const = 0;
  virtual bool GradReadsDone(size_t t) const = 0;
};

// Device work that writes parameters and reads gradients after Step returned (GPU mode).
class StreamOrdered {
 public:
  virtual ~StreamOrdered() = default;
  // Makes `stream` wait until tensor t's parameter, as it last wrote it, is final / until
  // it no longer reads tensor t's gradient of the last step (non-blocking where it can;
  // nothing for tensors it does not update).
  virtual void WaitParam(size_t t, void* stream) const = 0;
  virtual void WaitGradConsumed(size_t t, void* stream) const = 0;
};

// Stage times measured on the device, read after the step.
class DeviceTimed {
 public:
  virtual ~DeviceTimed() = default;
  // Adds its stage times of the last step to `times` (waiting for the timings if needed).
  virtual void ReadTimes(StageTimes* times) = 0;
};

// Launched work the caller's stream joins only once every executor launched (joined at
// its own Launch, the caller's stream would hold a later executor's queued work behind it).
class Joined {
 public:
  virtual ~Joined() = default;
  // After every Launch: orders the caller's stream after its parameter writes.
  virtual void Finish() = 0;
  // After a failed Launch of any executor: what Finish does, but never throws; nothing
  // when it was not launched in this step.
  virtual void Abandon() noexcept = 0;
};

}  // namespace tandem::offload
