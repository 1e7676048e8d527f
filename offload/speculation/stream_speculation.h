// StreamSpeculation: speculative early start of streamed chunks (BeginStep for the
// GPU-stream class; docs/architecture.md, "Speculative early start").
//
// Note [Speculating streamed chunks]: between BeginStep and Step, a streamed chunk whose
// tensors' gradients are all final (GradReady for each) is updated during backward, on
// the GPU, with the scalars of the announced step assuming no clipping, under the rules
// of Note [Speculate, then commit or roll back] (offload/speculation/speculator.h):
//
//   upload      host chunk -> its device slot               (as at Step)
//   backup      host chunk -> its backup, on the host       (beside the upload: both read)
//   hold        the chunk's parameters -> its holding place (device to device)
//   kernel      the chunk's hold spans: parameters and aliased masters read and written
//               in the holding place, never in the parameter (backward may still read it)
//   download    slot -> host chunk                          (the new state, after the backup)
//
// Step then keeps the update (finite gradients, no clipping, every speculated tensor
// active): the held parameters are copied into place after the pre-pass and nothing is
// streamed for the chunk. Otherwise every speculated chunk's host bytes are restored from
// its backup and the step runs as without BeginStep. Either way the bits are those of a
// Step without BeginStep. A second GradReady of a tensor (gradient accumulation) restores
// its speculated chunks and speculates them again on the new gradient.
//
// Only the last chunks (backward's first gradients), up to
// OptimizerConfig::speculative_stream_bytes, have a backup and a holding place; the others
// stream at Step. The backup is a copy on the host (a CUDA stream callback runs it on
// the optimizer's threads), so a speculated chunk moves over PCIe exactly what it moves
// at Step, once each way: a chunk still in flight when Step comes costs no more than one
// streamed by Step. (Downloading the old bytes as the backup instead costs the link a
// second download per chunk; on the H200 that made speculating beyond what backward
// covers slower than not speculating: docs/architecture.md, "Speculative early start".)
//
// Threads: the optimizer's thread (GradReady, BeginStep, Step), as the executors. The
// stream executor (offload/executors/gpu_stream.h) owns it and speculates the chunks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <vector>

#include "engine/step_scalars.h"

namespace tandem::offload {

class StreamSpeculation {
 public:
  // What updates the chunks: the stream executor.
  class Chunks {
   public:
    virtual ~Chunks() = default;
    // Updates chunk c speculatively with `scalars`: its state's old bytes into its backup,
    // the new state into the host chunk, the parameters into its holding place (queued).
    virtual void Speculate(size_t c, const std::vector<StepScalars>& scalars,
                           const std::vector<uint32_t>& scalar_index) = 0;
    // Waits until every Speculate is done: host chunks and backups are final.
    virtual void WaitSpeculated() = 0;
  };
  // What a speculative chunk restores from: its host chunk and its backup, `bytes` each.
  struct Restore {
    uint8_t* host = nullptr;
    const uint8_t* backup = nullptr;
    uint64_t bytes = 0;
  };
  // exec: what updates the chunks (outlives this). chunk_tensors[c]: the tensors with spans in
  // streamed chunk c. restore[c]: for a chunk that may be speculated, its bytes (host ==
  // nullptr: never speculated). tensors: the optimizer's tensor count.
  StreamSpeculation(Chunks* exec, std::vector<std::vector<uint32_t>> chunk_tensors,
                    std::vector<Restore> restore, size_t tensors);

  // Starts a speculation with the scalars BeginStep computed (kept by reference: they
  // must stay until End) and speculates every chunk whose tensors are all ready[t].
  void Begin(const std::vector<StepScalars>* scalars, const std::vector<uint32_t>* scalar_index,
             const std::vector<uint8_t>& ready);
  // Tensor t's gradient is final (ready[t] already set); `again`: it was final before in
  // this step and has changed (its speculated chunks are restored and done again).
  void TensorReady(size_t t, bool again, const std::vector<uint8_t>& ready);
  // No further chunk is speculated until End (the step will clip or skip).
  void Stop() { stopped_ = true; }
  // The first error a speculation raised since Begin (null: none); after one, no chunk is
  // speculated until End.
  std::exception_ptr error() const { return error_; }
  // Whether every speculated chunk's tensors are active[t] != 0 (empty: all active).
  bool AllActive(const std::vector<uint8_t>& active) const;
  // Per chunk: speculated since Begin.
  const std::vector<uint8_t>& speculated() const { return done_; }
  size_t speculated_count() const;
  // Waits for the speculations and restores every speculated chunk from its backup;
  // returns how many.
  size_t Rollback();
  // Ends the speculation (after Step kept it, or after Rollback).
  void End();

 private:
  void Try(size_t c);
  // Chunk c's host bytes from its backup, if it was speculated (after WaitSpeculated).
  void Undo(size_t c);

  Chunks* exec_;
  std::vector<std::vector<uint32_t>> chunk_tensors_;
  std::vector<std::vector<uint32_t>> tensor_chunks_;  // per tensor: its speculative chunks
  std::vector<Restore> restore_;
  std::vector<uint8_t> done_;
  const std::vector<StepScalars>* scalars_ = nullptr;
  const std::vector<uint32_t>* scalar_index_ = nullptr;
  const std::vector<uint8_t>* ready_ = nullptr;
  std::exception_ptr error_;
  bool stopped_ = false;
};

}  // namespace tandem::offload
