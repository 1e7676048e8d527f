// The GPU-stream executor's speculative early start
// (offload/executors/stream_speculator.h).
#include "offload/executors/stream_speculator.h"

#include <exception>
#include <string>

#include "tandem/error.h"

namespace tandem::offload {
namespace {
using Q = StreamDevice::Queue;
constexpr size_t kNone = StreamChunks::kNone;

std::vector<std::vector<uint32_t>> ChunkTensors(const StreamChunks& chunks) {
  std::vector<std::vector<uint32_t>> tensors;
  for (size_t c = 0; c < chunks.size(); ++c) tensors.push_back(chunks.chunk(c).span_tensor);
  return tensors;
}
std::vector<uint8_t> SpeculativeChunks(const StreamChunks& chunks) {
  std::vector<uint8_t> speculative;
  for (size_t c = 0; c < chunks.size(); ++c)
    speculative.push_back(chunks.chunk(c).speculative() ? 1 : 0);
  return speculative;
}
}  // namespace

StreamSpeculator::StreamSpeculator(StreamChunks* chunks, StreamRelease* release)
    : chunks_(*chunks),
      release_(*release),
      spec_(this, ChunkTensors(*chunks), SpeculativeChunks(*chunks), chunks->specs().size()) {}

void StreamSpeculator::TensorReady(size_t t, bool again, const std::vector<uint8_t>& ready,
                                   const GradMark& mark) {
  if (!release_.on()) {  // the speculative kernels read the gradient on the device
    chunks_.device().WaitForeign(Q::kRun, mark.ready);
    if (begun_) spec_.TensorReady(t, again, ready);
    return;
  }
  if (!begun_) return;
  // With release, the chunks this call speculates may read t's gradient where it was
  // handed over (Note [Reading the handed gradient in place]); its consumed fence then
  // waits for their kernels.
  const TensorSpec& sp = chunks_.specs()[t];
  const uint64_t bytes = sp.numel * DTypeSize(sp.grad_dtype);
  StreamSpeculation::InPlace in_place{t, mark.ready};
  spec_.TensorReady(t, again, ready, release_.KeepInPlace(bytes) ? &in_place : nullptr);
  if (in_place.read) release_.ReadInPlace(t, bytes);
}

void StreamSpeculator::BeginSpeculation(const std::vector<StepScalars>* scalars,
                                        const std::vector<uint32_t>* scalar_index,
                                        const std::vector<uint8_t>& ready) {
  (void)release_.TakeUpBytes();  // this step's count starts here
  spec_.Begin(scalars, scalar_index, ready);
  begun_ = true;
  commit_ = false;
}

void StreamSpeculator::AwaitSpeculation(StageTimes*) {
  if (begun_ && spec_.error()) std::rethrow_exception(spec_.error());
}

void StreamSpeculator::CommitSpeculation(StageTimes* times) {
  if (!begun_) return;
  commit_ = true;
  times->speculated_stream_chunks = spec_.speculated_count();
}

void StreamSpeculator::RollBackSpeculation(StageTimes* times) {
  if (begun_) times->rolled_back_stream_chunks = spec_.Rollback();
}

void StreamSpeculator::End() noexcept {
  if (begun_) {
    try {
      if (!commit_) spec_.Rollback();
    } catch (...) {
      // Only a device error waiting for the copies; the next device call reports it.
    }
    spec_.End();
  }
  begun_ = commit_ = false;
}

void StreamSpeculator::Speculate(size_t c, const std::vector<StepScalars>& scalars,
                                 const std::vector<uint32_t>& scalar_index,
                                 StreamSpeculation::InPlace* handed) {
  if (c >= chunks_.size() || !chunks_.chunk(c).speculative())
    throw Error(ErrorKind::kInternal,
                "streamed chunk " + std::to_string(c) + " has no place for a speculative update");
  const StreamChunks::Chunk& ch = chunks_.chunk(c);
  StreamDevice& device = chunks_.device();
  chunks_.FailInjected(c, "upload", "speculative update");
  // The kernel comes after the ready marks of the chunk's gradients (kRun waited for
  // each at its GradReady; with release, the gradients come up with the chunk, but the
  // handed-over tensor's, read in place after its mark); the upload after the last
  // step's downloads.
  const size_t in_place =
      handed != nullptr && chunks_.Has(c, handed->tensor) ? handed->tensor : kNone;
  chunks_.AfterLastDownloads(Q::kUp, chunks_.At(c, "speculation"));
  chunks_.WaitSlot(c);
  chunks_.Upload(c);
  if (release_.ReadsReleased(c)) {
    if (in_place == kNone) release_.UploadsAfterDownloads(chunks_.At(c, "released gradients"));
    release_.UploadGrads(c, in_place);
  }
  chunks_.Uploaded(c);
  // Whatever happens from here on, the slot's next user waits for what was queued.
  struct SlotFree {
    StreamChunks& chunks;
    size_t c;
    ~SlotFree() {
      try {
        chunks.SlotFree(c, chunks.At(0, "slot free"));
      } catch (...) {  // the speculation's own error reports it
      }
    }
  } slot_free{chunks_, c};
  chunks_.KernelAfterUpload(c);
  chunks_.HoldParams(c);
  if (in_place == kNone) {
    device.Run(Q::kRun, ch.hold_program, scalars, scalar_index,
               chunks_.At(c, "speculative kernel"));
  } else {
    // Only this kernel reads the handed-over gradient: the program reads the slot again
    // after it, whatever happens (a rollback's Step reads the uploaded copy).
    struct SlotGradsAgain {
      StreamDevice& device;
      size_t program, tensor;
      ~SlotGradsAgain() {
        try {
          device.SetProgramGrad(program, tensor, nullptr);
        } catch (...) {  // cannot fail for a slot pointer; the speculation's error reports
        }
      }
    } again{device, ch.hold_program, in_place};
    device.WaitForeign(Q::kRun, handed->mark);
    device.SetProgramGrad(ch.hold_program, in_place, release_.grad(in_place));
    device.Run(Q::kRun, ch.hold_program, scalars, scalar_index,
               chunks_.At(c, "speculative kernel"));
    handed->read = true;
  }
  chunks_.KernelDone(c, "speculative kernel");
  chunks_.FailInjected(c, "download", "speculative update");
  // Into the spare: the host chunk keeps the old bytes until Step decides. The spare was
  // last read by an upload before the last step's downloads, which this upload waited for.
  chunks_.Download(c, ch.spare);
}

}  // namespace tandem::offload
