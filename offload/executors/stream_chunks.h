// StreamChunks: the GPU-stream executor's chunks in their slots (Note [Chunk-major
// streaming] in engine/layout/stream_layout.h): the streamed state and its slabs (the
// state, the slots, the speculation's spares and holding places, the released
// gradients), each chunk's programs, the device they run on, and the events that order
// a chunk's pass through its slot:
//
//   upload    kUp    WaitSlot (the slot's last download), Upload, Uploaded
//   kernel    kRun   KernelAfterUpload, the program's Run, KernelDone
//   download  kDown  Download (into the host chunk, or its spare), SlotFree
//
// The executor (offload/executors/gpu_stream.cc) puts the passes of Step together from
// these steps, the speculation (offload/executors/stream_speculator.h) the speculative
// ones, and the gradient release (offload/executors/stream_release.h) adds the
// gradients' copies. A copy the FaultPlan fails is failed by the composer
// (FailInjected), on both devices alike.
//
// Thread safety: the optimizer's thread, as the executors (the const methods too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/layout/memory_plan.h"
#include "offload/devices/stream_device.h"
#include "offload/executors/executor.h"
#include "offload/executors/gpu_stream.h"
#include "offload/memory/slab.h"
#include "tandem/faults.h"

namespace tandem::offload {

class StreamChunks {
 public:
  using Q = StreamDevice::Queue;
  static constexpr size_t kNone = ~size_t{0};

  struct Chunk {
    uint8_t* host = nullptr;
    uint8_t* slot = nullptr;
    uint64_t bytes = 0;
    // Gradient release: its gradients in the pinned area and in its slot, grad_bytes each.
    uint8_t* grad_host = nullptr;
    uint8_t* grad_slot = nullptr;
    uint64_t grad_bytes = 0;
    int slot_index = 0;
    std::vector<uint32_t> span_tensor;
    size_t program = 0, hold_program = kNone;  // kNone: never speculated
    // A speculative chunk's other copy of its state: its speculative update comes down
    // here; a commit swaps it with `host` (Note [Speculating streamed chunks]).
    uint8_t* spare = nullptr;
    std::vector<layout::StreamLayout::HoldCopy> hold_copies;
    bool speculative() const { return hold_program != kNone; }
  };

  // Allocates the slabs (setup's plan), binds the layout, builds every chunk's programs
  // and the events. Throws Error(kOutOfMemory) naming the slab that failed.
  StreamChunks(const StreamSetup& setup, std::unique_ptr<StreamDevice> device);

  const std::vector<TensorSpec>& specs() const { return specs_; }
  StreamDevice& device() const { return *device_; }
  const layout::StreamLayout& layout() const { return layout_; }
  size_t size() const { return chunks_.size(); }
  const Chunk& chunk(size_t c) const { return chunks_[c]; }
  const std::vector<size_t>& pieces(size_t t) const { return pieces_[t]; }  // tensor t's
  size_t piece_chunk(size_t i) const { return piece_chunk_[i]; }
  bool streamed(size_t t) const { return !pieces_[t].empty(); }
  // Whether tensor t has a span in chunk c.
  bool Has(size_t c, size_t t) const;

  // The executor's state (Executor: AddMemory, AddInitRegions, VisitParts, MasterIsParam).
  void AddMemory(MemoryReport* r) const;
  void AddInitRegions(std::vector<InitRegion>* regions) const;
  void VisitParts(size_t t, const PartVisitor& visit) const;
  bool MasterIsParam(size_t t) const;

  StreamDevice::What At(size_t c, const char* what) const {
    return {c, chunks_.size(), c < chunks_.size() ? chunks_[c].bytes : 0, what};
  }
  // A copy of chunk c that the FaultPlan fails throws as the device's failed copy would.
  void FailInjected(size_t c, const char* what, const std::string& note) const;

  // A chunk's pass through its slot (see above).
  void WaitSlot(size_t c);
  void MarkFirstUpload(size_t c);  // the step's streaming time starts here (ReadTimes)
  void Upload(size_t c);
  void Uploaded(size_t c);
  void KernelAfterUpload(size_t c);
  void KernelDone(size_t c, const char* what);
  void Download(size_t c, uint8_t* dst);
  // The slot's next upload waits for what was queued on kDown so far (for that wait, the
  // slot is used even when the Record throws).
  void SlotFree(size_t c, const StreamDevice::What& w);
  // A speculated chunk's parameters into its holding place, on kRun.
  void HoldParams(size_t c);
  // A committed chunk: its spare becomes its host bytes (the state's views follow) and its
  // held parameters go into place, on kRun (Note [Speculating streamed chunks]).
  void Keep(size_t c);

  // The steps' ends: `q` waits for the last step's downloads / kernels (nothing before
  // the first step); MarkEnd records this step's.
  void AfterLastDownloads(Q q, const StreamDevice::What& w);
  void AfterLastKernels(Q q, const StreamDevice::What& w);
  void MarkEnd();
  bool streamed_before() const { return streamed_before_; }
  StreamDevice::Event first_up() const { return first_up_; }
  StreamDevice::Event kernels_done() const { return kernels_done_; }
  StreamDevice::Event down_done() const { return down_done_; }

 private:
  struct SlotEvents {
    StreamDevice::Event up, run, down;
  };

  const std::vector<TensorSpec>& specs_;
  const bool gpu_;
  std::shared_ptr<FaultPlan> faults_;
  layout::StreamLayout layout_;
  Slab state_, slots_, spare_, hold_, grads_;
  std::vector<std::vector<size_t>> pieces_;  // per tensor: its pieces
  std::vector<size_t> piece_chunk_;          // per piece: its chunk
  std::vector<Chunk> chunks_;
  // Last: the device's queues stop (after what they run) before the slabs go.
  std::unique_ptr<StreamDevice> device_;
  std::vector<SlotEvents> slot_ev_;
  std::vector<uint8_t> slot_used_;  // per slot: a chunk went through it
  StreamDevice::Event first_up_ = 0, kernels_done_ = 0, down_done_ = 0;
  bool streamed_before_ = false;  // a step recorded the end events
};

}  // namespace tandem::offload
