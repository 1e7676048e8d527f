// Speculator: the speculative host update of offloaded chunks during backward
// (HybridOptimizer::BeginStep; docs/architecture.md, "Speculative early start").
//
// Note [Speculate, then commit or roll back]: between BeginStep and Step, a chunk whose
// gradient download was enqueued (GradReady) is handed to the worker thread, which waits
// for the download, copies the chunk's host state into its backup and steps the chunk in
// place with the scalars of the announced step assuming no clipping (grad_mul =
// 1 / loss_scale, exactly what Step computes when the clip coefficient is 1). A parameter
// that does not upload straight from the state is written to a holding buffer, never to
// the device: backward may still read the weights. Step then either keeps the results
// (finite gradients, no clipping: only the uploads remain) or copies every backup back,
// which restores the bytes exactly. Backup and step run piece by piece on the same
// thread, so the kernel reads the state the backup just brought into the cache; the
// backup itself is written around the cache (CopyStateArraysStreaming): it is read only
// by a rollback.
//
// Threads: Begin, Enqueue, WaitIdle, Rollback and End are called by the optimizer's
// thread; the worker runs the chunks. The chunks' spans, the backup and the holding
// buffer must not be touched by anyone else between Begin and WaitIdle. Rollback and End
// require the worker to be idle (after WaitIdle). The destructor cancels what is queued,
// waits for the chunk in progress and joins the worker.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu_simd/cpu_pinning.h"
#include "cpu_simd/host_kernels.h"
#include "engine/step_scalars.h"
#include "engine/step_span.h"
#include "offload/devices/stream_device.h"
#include "offload/pipeline/pipeline.h"

namespace tandem::offload {

class Speculator {
 public:
  // chunks: the optimizer's offload chunks (their spans point at the live host state);
  // must outlive this object and keep their spans. backup[c]: a span with chunk c's
  // formats over backup storage of the same shape. hold[c]: where chunk c's parameter is
  // written (nullptr when it uploads from param_source). early_grad[c]: where chunk c's
  // gradient lands. device: the pipeline's device, whose tickets the worker waits for
  // (StreamDevice::Synchronize, on its own thread). threads: the width of the worker's own task
  // arena (0: one per CPU of `cpus`, or all cores). cpus: where the worker thread and its arena run
  // (empty: anywhere; cpu_simd/cpu_pinning.h).
  Speculator(const std::vector<OffloadChunk>* chunks, std::vector<StepSpan> backup,
             std::vector<void*> hold, std::vector<const void*> early_grad, StreamDevice* device,
             int threads, std::vector<int> cpus = {});
  ~Speculator();
  Speculator(const Speculator&) = delete;
  Speculator& operator=(const Speculator&) = delete;

  // Starts a speculation with one StepScalars per group (indexed by scalar_index). The
  // worker waits for the upload ticket `previous_upload` (kNoEvent: none) before it
  // writes any state (Note [Uploads read the state] in offload/pipeline/pipeline.h).
  void Begin(const std::vector<StepScalars>& scalars, Event previous_upload);
  // Queues chunk c, whose gradient arrives with the download of ticket `ticket`. Each chunk at most
  // once per speculation, or once more after Forget(c). Never blocks on the worker.
  void Enqueue(size_t c, Event ticket);
  // Blocks until every queued chunk is done or skipped; returns the first error a chunk
  // raised since Begin (null: none). After an error the worker skips the rest.
  std::exception_ptr WaitIdle();
  // Makes the worker skip the chunks still queued (they stay unwritten).
  void Cancel();
  // Copies the backup back into every chunk stepped since Begin; returns how many. (A chunk
  // whose step failed was already restored by the worker.)
  size_t Rollback();
  // Undoes chunk c's speculation so that it can be queued again (its gradient changed:
  // gradient accumulation): restores it from its backup if it was stepped. Requires the
  // worker to be idle (after WaitIdle).
  void Forget(size_t c);
  // Ends the speculation (after a commit or a rollback).
  void End();

  bool stepped(size_t c) const { return status_[c] == kStepped; }
  const void* hold(size_t c) const { return hold_[c]; }
  size_t stepped_count() const;
  double busy_ms() const { return busy_ms_; }

 private:
  enum Status : uint8_t { kIdle, kQueued, kBackedUp, kStepped };
  void Work();
  void Run(size_t c, Event ticket, Event previous_upload);
  void Restore(size_t c);  // copies chunk c's backup back (mu_ held, worker idle)

  const std::vector<OffloadChunk>* chunks_;
  std::vector<StepSpan> backup_;
  std::vector<void*> hold_;
  std::vector<const void*> early_grad_;
  StreamDevice* device_;
  cpu::PinnedArena arena_;

  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  std::vector<size_t> queue_;    // chunk indices, capacity chunks->size()
  std::vector<Event> ticket_;    // per chunk: its download
  std::vector<uint8_t> status_;  // per chunk: Status
  size_t head_ = 0, tail_ = 0;
  bool running_ = false;  // the worker is in Run
  bool stop_ = false;
  bool cancel_ = false;
  std::exception_ptr error_;
  std::vector<StepScalars> scalars_;
  Event previous_upload_ = StreamDevice::kNoEvent;  // taken by the first chunk it runs
  std::vector<uint8_t> piece_saved_;  // worker-side: pieces of the running chunk backed up
  double busy_ms_ = 0;
  std::thread worker_;  // last: starts after everything above exists
};

}  // namespace tandem::offload
