// The offload pipeline: for every chunk of offloaded elements, copy its gradient down
// into a pinned slot, step it on the host, copy its parameter up; with K slots, the
// download of chunk i+K-1.., the host update of chunk i and the upload of chunk i-1 run
// at once. The slowest stage sets the pace; Run() reports each stage's busy time.
//
// It runs over a StreamDevice serving the two copy queues
// (offload/devices/stream_device.h): gradients go down on kDown, parameters up on kUp,
// each copy with its ticket; the CUDA device in GPU mode, the host device (a thread per
// queue) in host mode.
//
// Ordering contract (tested on the host device): chunk i's host update starts only after
// its download completed; a gradient slot is reused only after the host update that read
// it finished; a parameter staging slot is reused only after the upload that read it
// completed; the first chunk's host update waits for the previous Run's uploads of the
// same state (Note [Uploads read the state]). A chunk marked `stepped` (updated before
// Run, by the speculation worker) is only uploaded, and those uploads are enqueued first,
// in reverse chunk order (forward order, so the next forward's first tensors arrive
// first); a chunk marked `skip` is left alone.
//
// Not thread-safe: one Run at a time.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "engine/step_scalars.h"
#include "engine/step_span.h"
#include "offload/devices/stream_device.h"

namespace tandem::offload {

// A copy's ticket, or any event of the device.
using Event = StreamDevice::Event;

struct OffloadChunk {
  size_t tensor = 0;              // index of the tensor, for messages and per-tensor events
  const void* device_grad = nullptr;  // gradient of the chunk's first element (device)
  void* device_param = nullptr;       // parameter of the chunk's first element (device)
  size_t grad_bytes = 0;
  size_t param_bytes = 0;
  // Host state of the chunk. span.grad and span.param are set by the pipeline: grad to a
  // slot (or to `host_grad` when set), param to a staging slot unless `param_source` is
  // set (then the state itself is uploaded, e.g. the bf16 master that is the weight).
  StepSpan span;
  const void* host_grad = nullptr;     // gradient already on the host (early start)
  const void* param_source = nullptr;
  // Already stepped (speculative early start): Run uploads the parameter from
  // param_source, else from host_param, and neither downloads nor steps the chunk.
  bool stepped = false;
  const void* host_param = nullptr;
  // Left out of this Run (its tensor has no gradient at this step): not downloaded, not
  // stepped, not uploaded.
  bool skip = false;
  uint32_t scalar_index = 0;
};

struct PipelineTimes {
  double d2h_ms = 0, host_ms = 0, h2d_ms = 0, wall_ms = 0;
};

// Steps one chunk on the host (the optimizer passes the SIMD driver's Run).
using HostStepFn = std::function<void(const StepScalars& s, const StepSpan& span)>;

class Pipeline {
 public:
  // slots >= 2. grad_slots / param_slots: `slots` pinned buffers of at least
  // slot_grad_bytes / slot_param_bytes each (param_slots may be empty when every chunk
  // has a param_source).
  // The buffers stay owned by the caller; `device` (serving kUp and kDown) outlives the
  // pipeline.
  Pipeline(StreamDevice* device, std::vector<void*> grad_slots, std::vector<void*> param_slots);

  // Runs every chunk. On a copy failure or a throwing host step, waits for the copies in
  // flight, then throws Error naming the chunk and how many chunks were applied.
  // last_upload[tensor] receives the ticket of each tensor's last upload (for WaitParam).
  // With `times`, waits for every copy before it returns (their durations are summed).
  void Run(std::vector<OffloadChunk>& chunks, const StepScalars* scalars,
           const HostStepFn& host_step, std::vector<Event>* last_upload, PipelineTimes* times);

  // The ticket of the last upload enqueued by the last Run (kNoEvent: none, or not known
  // after a failure): a writer of the host state must wait for it first (Note [Uploads
  // read the state]).
  Event last_upload() const { return last_run_upload_; }

 private:
  // Enqueues a copy on q between two tickets (its duration: ElapsedMs between them);
  // returns the second.
  Event TimedCopy(StreamDevice::Queue q, void* dst, const void* src, size_t bytes,
                  const StreamDevice::What& w);
  // The copies' busy time on q in this Run (once they completed).
  double BusyMs(StreamDevice::Queue q) const;

  StreamDevice* device_;
  std::vector<void*> grad_slots_, param_slots_;
  std::vector<Event> param_slot_ticket_;
  Event last_run_upload_ = StreamDevice::kNoEvent;
  // Named events: the downloads wait for the caller's work so far; the caller's stream
  // waits for the uploads.
  Event after_caller_, uploads_done_;
  std::vector<size_t> work_;  // per Run: the chunks to step (not `stepped`)
  std::vector<Event> down_;   // per Run: download ticket of each entry of work_
  struct Timed {
    StreamDevice::Queue queue;
    Event start, end;
  };
  std::vector<Timed> timed_;  // per Run: each copy's tickets
};

}  // namespace tandem::offload
