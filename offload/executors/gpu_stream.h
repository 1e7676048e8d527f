// The GPU-stream executor (Note [Executors] in offload/executors/executor.h): the
// host-resident state the GPU kernel computes, laid out chunk-major (Note [Chunk-major
// streaming] in engine/layout/stream_layout.h), and everything that streams it: its
// slabs (the state, the device slots, the speculation's spares and holding places), its
// chunks and their programs, its events, and the speculation of its chunks during
// backward (Note [Speculating streamed chunks], offload/speculation/stream_speculation.h).
//
// Its parts: the chunks in their slots with the steps of a chunk's pass
// (offload/executors/stream_chunks.h), the gradient release
// (offload/executors/stream_release.h), the speculation
// (offload/executors/stream_speculator.h), and the executor that puts the step together
// (gpu_stream.cc). It is written once, over a StreamDevice
// (offload/devices/stream_device.h): the CUDA device in GPU mode, the host device (threads
// and memcpy) in host mode, so that CI runs the very order the GPU runs:
//
//   upload (queue kUp)      chunk c: host state -> slot c % slots, after that slot's last
//                           download and the last step's downloads
//   kernel (kRun)           after its upload and the pre-pass (the gradients; not the hot
//                           launch, which runs beside the streamed kernels)
//   download (kDown)        after its kernel: slot -> host state
//   caller                  joins the kernels at Finish (after the pipeline queued its
//                           downloads: joined at Launch, it would hold them behind every
//                           streamed chunk)
//   gradients (kGrads)      gradient release: at GradReady, after the gradient's ready
//                           mark, the tensor's streamed gradients down into the pinned
//                           gradient area; uploads of chunks that read them wait for these
//
// Note [Reading the handed gradient in place]: with release and speculation, a chunk that
// a GradReady(t) completes (its last tensor handed over) is speculated in that call. When
// the gradients kept for in-place reads whose kernels have not yet run, plus t's, fit in
// StreamSetup::in_place_bytes, its kernel reads t's gradient where it was handed over
// (after its ready mark) and only the chunk's other tensors' gradients go up from the
// pinned area; t's consumed fence then waits for that kernel too (WaitGradReads), so the
// gradient stays on the GPU until the chunk's upload and kernel have run (a link behind
// backward keeps it that long: the budget bounds what is kept). Otherwise, or with a
// budget of 0, the chunk uploads every gradient. The copy downloaded at GradReady stays
// the one a rollback's Step uploads, so the bits do not change either way; the up link
// carries 2 bytes per bf16 element read in place less (StageTimes::released_grad_up_bytes).
//
// Never waits on the host during Launch. A copy the FaultPlan fails (once per upload and
// download, in that order) throws Error(kCuda) naming the chunk and the chunks queued
// before it, which still complete; a failed download leaves that chunk's parameters
// updated but its state not, as a lost device slot would.
#pragma once

#include <memory>
#include <vector>

#include "engine/layout/memory_plan.h"
#include "offload/devices/stream_device.h"
#include "offload/executors/executor.h"
#include "tandem/faults.h"

namespace tandem::offload {

struct StreamSetup {
  Algorithm algorithm = Algorithm::kAdamW;
  const std::vector<TensorSpec>* specs = nullptr;
  const std::vector<StateFormats>* formats = nullptr;  // per tensor
  const layout::MemoryPlan* plan = nullptr;            // its stream layout, slots, spares
  int slots = 3;                                       // OptimizerConfig::stream_slots
  bool gpu = false;  // state and spares pinned, slots and holding places on the device
  // Gradient release (Note [Gradient release] in tandem/optimizer.h): GradReady downloads
  // a tensor's streamed gradients into the pinned gradient area (on kGrads); each chunk's
  // go up with its state and its kernels read them in the slot.
  bool release = false;
  // With release and speculation: the most handed-over gradient bytes kept for the
  // speculative kernels to read in place (OptimizerConfig::in_place_grad_bytes).
  uint64_t in_place_bytes = 0;
  std::shared_ptr<FaultPlan> faults;
  // GPU mode: where the device slots and holding places come from (outlives the executor).
  DeviceAllocator* device_memory = nullptr;
};

std::unique_ptr<Executor> MakeGpuStream(StreamSetup setup, std::unique_ptr<StreamDevice> device);

}  // namespace tandem::offload
