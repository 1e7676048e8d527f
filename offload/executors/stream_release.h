// StreamRelease: gradient release for the GPU-stream executor's chunks (Note [Gradient
// release] in tandem/optimizer.h). At GradReady a tensor's streamed gradients go down
// into the pinned gradient area on kGrads, after the gradient's ready mark; from then
// until the step ends the chunks' programs read them in their slots, and every chunk
// that reads them takes them up with its state (UploadGrads). Which gradient each
// tensor's spans read otherwise (SetGrad) is kept here too.
//
// With speculation, a chunk that a GradReady completes may read the handed-over gradient
// in place instead (Note [Reading the handed gradient in place] in
// offload/executors/gpu_stream.h): KeepInPlace says whether it fits the budget beside
// those kept whose kernels have not run, ReadInPlace records that a kernel did, and the
// tensor's reads (WaitGradReads, GradReadsDone) then include that kernel.
//
// Thread safety: the optimizer's thread; WaitGradReads and GradReadsDone (const) also
// from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "offload/executors/stream_chunks.h"

namespace tandem::offload {

class StreamRelease {
 public:
  using Q = StreamDevice::Queue;
  static constexpr size_t kNone = StreamChunks::kNone;

  // chunks outlives it; on: OptimizerConfig::release_grads; in_place_budget:
  // StreamSetup::in_place_bytes. Makes its events (before the device's first operation).
  StreamRelease(StreamChunks* chunks, bool on, uint64_t in_place_budget);
  bool on() const { return on_; }

  // Tensor t's gradient is read at `grad` (element 0) from now on: by the programs at
  // once, or from End on when it was released in this step.
  void SetGrad(size_t t, const void* grad);
  const void* grad(size_t t) const { return grad_[t]; }

  // GradReady: tensor t's streamed gradients down into the gradient area, on kGrads after
  // `ready` (a cudaEvent_t; null in host mode); its spans read them in the slots until
  // End.
  void Release(size_t t, const void* ready);
  bool any_released() const { return any_released_; }
  // Whether chunk c reads released gradients (its upload takes them along).
  bool ReadsReleased(size_t c) const;
  // Makes kUp wait for every release download so far.
  void UploadsAfterDownloads(const StreamDevice::What& w);
  // Uploads chunk c's gradients into its slot on kUp, but those of tensor `except`
  // (kNone: every one), which its kernel reads in place; the caller ordered kUp after the
  // release downloads of what is uploaded (UploadsAfterDownloads) unless `except` is set,
  // when each tensor's own downloads are waited for here.
  void UploadGrads(size_t c, size_t except = kNone);
  // Released gradient bytes uploaded since the last call (StageTimes), and forgets them.
  uint64_t TakeUpBytes();

  // Whether a gradient of `bytes` fits the in-place budget beside those kept whose
  // kernels have not run yet (forgets those that have).
  bool KeepInPlace(uint64_t bytes);
  // A speculative kernel just queued on kRun reads tensor t's gradient (`bytes`) in place.
  void ReadInPlace(size_t t, uint64_t bytes);

  // Makes `stream` wait for the reads of tensor t's gradient enqueued at GradReady (host
  // mode: null, and the host waits) / whether they completed (never blocks).
  void WaitGradReads(size_t t, void* stream) const;
  bool GradReadsDone(size_t t) const;

  // The step's end: released tensors read their gradients where SetGrad says again.
  void End();

 private:
  StreamChunks& chunks_;
  const bool on_;
  // Per tensor: the gradient SetGrad gave (the device reads it unless released), released
  // in this step; whether a speculative kernel read it in place in this step (grad_run_
  // marks the last such kernel).
  std::vector<const void*> grad_;
  std::vector<uint8_t> released_, read_in_place_;
  bool any_released_ = false;
  // The budget; the gradients read in place in this step, oldest first, and their bytes
  // (those whose kernels have run are forgotten as new ones come).
  const uint64_t in_place_budget_;
  struct Kept {
    size_t tensor;
    uint64_t bytes;
  };
  std::deque<Kept> kept_;
  uint64_t kept_bytes_ = 0;
  uint64_t up_bytes_ = 0;  // released gradient bytes uploaded since TakeUpBytes
  // Per tensor: its last release download and its last speculative kernel that read it in
  // place; every release download so far.
  std::vector<StreamDevice::Event> grad_down_, grad_run_;
  StreamDevice::Event grads_down_ = 0;
};

}  // namespace tandem::offload
