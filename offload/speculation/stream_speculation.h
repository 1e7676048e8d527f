// StreamSpeculation: speculative early start of streamed chunks (BeginStep for the
// GPU-stream class; docs/architecture.md, "Speculative early start").
//
// Note [Speculating streamed chunks]: between BeginStep and Step, a streamed chunk whose
// tensors' gradients are all final (GradReady for each) is updated during backward, on
// the GPU, with the scalars of the announced step assuming no clipping, under the rules
// of Note [Speculate, then commit or roll back] (offload/speculation/speculator.h):
//
//   upload      host chunk -> its device slot               (as at Step)
//   hold        the chunk's parameters -> its holding place (device to device)
//   kernel      the chunk's hold spans: parameters and aliased masters read and written
//               in the holding place, never in the parameter (backward may still read it)
//   download    slot -> the chunk's spare                   (the new state; the host chunk
//                                                            keeps the old bytes)
//
// Step then keeps the update (finite gradients, no clipping, every speculated tensor
// active): the chunk's spare becomes its host chunk and the old host chunk its spare
// (StreamLayout::MoveChunk: the state's views follow), the held parameters are copied
// into place after the pre-pass and nothing is streamed for the chunk. Otherwise nothing
// is restored (the host chunk was only read) and the step runs as without BeginStep.
// Either way the bits are those of a Step without BeginStep. A second GradReady of a
// tensor (gradient accumulation) speculates its chunks again on the new gradient, from
// the same host chunk into the same spare.
//
// Only the last chunks (backward's first gradients), up to
// OptimizerConfig::speculative_stream_bytes, have a spare and a holding place; the others
// stream at Step. A speculated chunk moves over PCIe and through host memory exactly what
// it moves at Step (the old bytes read once, the new written once), so a chunk still in
// flight when Step comes costs no more than one streamed by Step, and a rollback costs
// nothing but the repeated stream. (A backup copied on the host beside the upload, the
// design before, read and wrote every speculated chunk's bytes once more in host memory
// and made the download wait for it: docs/architecture.md, "Speculative early start".)
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
  // A gradient that the kernels of the chunks speculated in one TensorReady may read where
  // it was handed over (Note [Reading the handed gradient in place] in
  // offload/executors/gpu_stream.h): tensor `tensor`'s, after its ready mark `mark` (a
  // cudaEvent_t). `read` is set once a kernel that reads it so was queued.
  struct InPlace {
    size_t tensor = 0;
    const void* mark = nullptr;
    bool read = false;
  };
  // What updates the chunks: the stream executor.
  class Chunks {
   public:
    virtual ~Chunks() = default;
    // Updates chunk c speculatively with `scalars`: the new state into its spare, the
    // parameters into its holding place (queued); the host chunk is only read. in_place:
    // a gradient its kernel may read in place when chunk c has spans of that tensor (null:
    // none).
    virtual void Speculate(size_t c, const std::vector<StepScalars>& scalars,
                           const std::vector<uint32_t>& scalar_index, InPlace* in_place) = 0;
  };
  // exec: what updates the chunks (outlives this). chunk_tensors[c]: the tensors with spans in
  // streamed chunk c. speculative[c] != 0: chunk c has a spare and a holding place (the
  // others are never speculated). tensors: the optimizer's tensor count.
  StreamSpeculation(Chunks* exec, std::vector<std::vector<uint32_t>> chunk_tensors,
                    std::vector<uint8_t> speculative, size_t tensors);

  // Starts a speculation with the scalars BeginStep computed (kept by reference: they
  // must stay until End) and speculates every chunk whose tensors are all ready[t].
  void Begin(const std::vector<StepScalars>* scalars, const std::vector<uint32_t>* scalar_index,
             const std::vector<uint8_t>& ready);
  // Tensor t's gradient is final (ready[t] already set); `again`: it was final before in
  // this step and has changed (its speculated chunks are done again). in_place: handed to
  // each chunk this call speculates (null: none).
  void TensorReady(size_t t, bool again, const std::vector<uint8_t>& ready,
                   InPlace* in_place = nullptr);
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
  // Forgets every speculated chunk (their host chunks were never written); returns how
  // many.
  size_t Rollback();
  // Ends the speculation (after Step kept it, or after Rollback).
  void End();

 private:
  void Try(size_t c, InPlace* in_place);

  Chunks* exec_;
  std::vector<std::vector<uint32_t>> chunk_tensors_;
  std::vector<std::vector<uint32_t>> tensor_chunks_;  // per tensor: its speculative chunks
  std::vector<uint8_t> speculative_;
  std::vector<uint8_t> done_;
  const std::vector<StepScalars>* scalars_ = nullptr;
  const std::vector<uint32_t>* scalar_index_ = nullptr;
  const std::vector<uint8_t>* ready_ = nullptr;
  std::exception_ptr error_;
  bool stopped_ = false;
};

}  // namespace tandem::offload
