// StreamSpeculator: the GPU-stream executor's speculative early start (Note [Speculating
// streamed chunks] in offload/speculation/stream_speculation.h): which chunks are
// speculated (StreamSpeculation) and each one's speculative pass through its slot
// (Speculate): the chunk up (with its released gradients, or reading the handed-over one
// in place: Note [Reading the handed gradient in place] in
// offload/executors/gpu_stream.h), its parameters into the holding place, the kernel on
// the hold spans, the new state down into the spare. It is the executor's Speculative
// role (offload/executors/roles.h); the executor makes one only when a chunk has a spare.
//
// Thread safety: the optimizer's thread, as the executors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "offload/executors/executor.h"
#include "offload/executors/roles.h"
#include "offload/executors/stream_chunks.h"
#include "offload/executors/stream_release.h"
#include "offload/speculation/stream_speculation.h"

namespace tandem::offload {

class StreamSpeculator final : public Speculative, public StreamSpeculation::Chunks {
 public:
  // chunks and release outlive it.
  StreamSpeculator(StreamChunks* chunks, StreamRelease* release);

  // GradReady's part: tensor t's gradient is final after mark.ready (ready[t] is set).
  // Without release the speculative kernels read it on the device, after the mark; with
  // release, the chunks it completes read it in place when it fits the budget.
  void TensorReady(size_t t, bool again, const std::vector<uint8_t>& ready, const GradMark& mark);
  // The chunks a commit kept (Step streams none of them), or null.
  const std::vector<uint8_t>* committed() const { return commit_ ? &spec_.speculated() : nullptr; }
  // EndEarlyStart's part: a speculation not committed is rolled back. Never throws.
  void End() noexcept;

  // Speculative
  void BeginSpeculation(const std::vector<StepScalars>* scalars,
                        const std::vector<uint32_t>* scalar_index,
                        const std::vector<uint8_t>& ready) override;
  void StopSpeculation() override {
    if (begun_) spec_.Stop();
  }
  void AwaitSpeculation(StageTimes*) override;
  bool SpeculatedActiveOnly(const std::vector<uint8_t>& active) const override {
    return !begun_ || spec_.AllActive(active);
  }
  void CommitSpeculation(StageTimes* times) override;
  void RollBackSpeculation(StageTimes* times) override;

  // StreamSpeculation::Chunks
  void Speculate(size_t c, const std::vector<StepScalars>& scalars,
                 const std::vector<uint32_t>& scalar_index,
                 StreamSpeculation::InPlace* in_place) override;

 private:
  StreamChunks& chunks_;
  StreamRelease& release_;
  StreamSpeculation spec_;
  bool begun_ = false, commit_ = false;
};

}  // namespace tandem::offload
