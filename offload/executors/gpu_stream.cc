// The GPU-stream executor (offload/executors/gpu_stream.h): its chunks in their slots
// (stream_chunks.h), their gradient release (stream_release.h) and speculation
// (stream_speculator.h), and here the executor over them: the step's streaming order,
// the caller's stream joining it, its roles.
#include "offload/executors/gpu_stream.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "offload/executors/roles.h"
#include "offload/executors/stream_chunks.h"
#include "offload/executors/stream_release.h"
#include "offload/executors/stream_speculator.h"

namespace tandem::offload {
namespace {

using Q = StreamDevice::Queue;

class GpuStream final : public Executor,
                        public Queued,
                        public StreamOrdered,
                        public DeviceTimed,
                        public Joined {
 public:
  GpuStream(StreamSetup s, std::unique_ptr<StreamDevice> device)
      : chunks_(s, std::move(device)), release_(&chunks_, s.release, s.in_place_bytes) {
    for (size_t c = 0; c < chunks_.size(); ++c)
      if (chunks_.chunk(c).speculative()) {
        speculator_ = std::make_unique<StreamSpeculator>(&chunks_, &release_);
        break;
      }
  }

  const char* name() const override { return "GPU-stream"; }
  Roles roles() override {
    return {.speculative = speculator_.get(),  // null without speculative chunks
            .queued = this,
            .stream_ordered = this,
            .device_timed = this,
            .joined = this};
  }

  void AddMemory(MemoryReport* r) const override { chunks_.AddMemory(r); }
  void AddInitRegions(std::vector<InitRegion>* regions) const override {
    chunks_.AddInitRegions(regions);
  }
  void VisitParts(size_t t, const PartVisitor& visit) const override {
    chunks_.VisitParts(t, visit);
  }
  bool MasterIsParam(size_t t) const override { return chunks_.MasterIsParam(t); }

  void SetGrad(size_t t, const void* grad) override { release_.SetGrad(t, grad); }
  void GradReady(size_t t, bool again, const std::vector<uint8_t>& ready,
                 const GradMark& mark) override {
    if (!chunks_.streamed(t)) return;
    if (release_.on()) release_.Release(t, mark.ready);
    if (speculator_) speculator_->TensorReady(t, again, ready, mark);
  }
  void EndEarlyStart() noexcept override {
    if (speculator_) speculator_->End();
    release_.End();  // released tensors read their gradients where SetGrad says again
  }

  void Launch(const StepWork& w) override;

  // Queued
  void Quiesce() const override { chunks_.device().SynchronizeAll(); }
  void WaitGradReads(size_t t, void* stream) const override { release_.WaitGradReads(t, stream); }
  bool GradReadsDone(size_t t) const override { return release_.GradReadsDone(t); }

  // StreamOrdered: the streamed kernels read the gradients and write the parameters.
  void WaitParam(size_t t, void* stream) const override {
    if (waited_on_ && chunks_.streamed(t))
      chunks_.device().StreamWait(stream, chunks_.kernels_done());
  }
  void WaitGradConsumed(size_t t, void* stream) const override { WaitParam(t, stream); }

  // DeviceTimed
  void ReadTimes(StageTimes* times) override {
    if (!timed_) return;
    chunks_.device().Synchronize(chunks_.down_done());
    times->stream_ms = chunks_.device().ElapsedMs(chunks_.first_up(), chunks_.down_done());
    timed_ = false;
  }

  // Joined: the caller's stream joins the streamed kernels only now: joined at Launch, it
  // would hold the pipeline's gradient downloads (ordered after the caller's stream when
  // the pipeline starts) behind every streamed chunk.
  void Finish() override {
    if (!joining_) return;
    joining_ = false;
    chunks_.AfterLastKernels(Q::kCaller, chunks_.At(0, "caller joins"));
  }
  void Abandon() noexcept override {
    try {
      Finish();
    } catch (...) {  // the step's own error (or the next device call) reports it
    }
  }

 private:
  // Queues every active chunk's pass, or a kept chunk's parameter copies; returns how
  // many chunks it streamed.
  uint64_t LaunchChunks(const StepWork& w, const std::vector<uint8_t>* committed);

  // Declared first: destroyed last, the device's queues stopping before its slabs go.
  StreamChunks chunks_;
  StreamRelease release_;
  std::unique_ptr<StreamSpeculator> speculator_;  // with speculative chunks only
  // joining_: the caller's stream is yet to join this step's kernels; waited_on_: a step
  // queued kernels another stream may wait for (WaitParam); timed_: the last Launch
  // streamed a chunk.
  bool joining_ = false, waited_on_ = false, timed_ = false;
};

void GpuStream::Launch(const StepWork& w) {
  joining_ = true;  // a launch that fails part-way is joined too (Abandon)
  const std::vector<uint8_t>* committed = speculator_ ? speculator_->committed() : nullptr;
  w.times->stream_chunks = LaunchChunks(w, committed);
  w.times->released_grad_up_bytes = release_.TakeUpBytes();
  // Kept chunks queue their parameter copies (after their speculative kernels, which
  // read the gradients) without being counted: the caller's stream joins those too.
  const bool kept = committed != nullptr && std::any_of(committed->begin(), committed->end(),
                                                        [](uint8_t k) { return k != 0; });
  timed_ = w.times->stream_chunks > 0;
  joining_ = timed_ || kept;
  waited_on_ |= joining_;
}

uint64_t GpuStream::LaunchChunks(const StepWork& w, const std::vector<uint8_t>* committed) {
  const std::vector<uint32_t>& index = *w.scalar_index;
  StreamDevice& device = chunks_.device();
  // The kernels read the gradients: after the pre-pass, which came after them on the
  // caller's stream (not after the hot launch queued since: the streamed kernels run
  // beside it). Uploads read the host state: after the last step's downloads.
  device.WaitForeign(Q::kRun, w.prepass_done);
  chunks_.AfterLastDownloads(Q::kUp, chunks_.At(0, "stream executor start"));
  if (release_.any_released()) release_.UploadsAfterDownloads(chunks_.At(0, "released gradients"));
  uint64_t enqueued = 0;
  // A failure part-way still marks the end of what was queued, so that the caller's
  // stream (Finish) and the next step's uploads wait for it.
  struct MarkEnd {
    StreamChunks& chunks;
    bool done = false;
    ~MarkEnd() {
      if (done) return;
      try {
        chunks.MarkEnd();
      } catch (...) {  // the step's own error reports it
      }
    }
  } mark_end{chunks_};
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const StreamChunks::Chunk& ch = chunks_.chunk(c);
    bool any = false;
    for (uint32_t t : ch.span_tensor) any |= index[t] != kSkipScalarIndex;
    if (!any) continue;
    if (committed != nullptr && (*committed)[c] != 0) {  // kept from the speculation
      chunks_.Keep(c);
      continue;
    }
    chunks_.WaitSlot(c);
    if (enqueued == 0) chunks_.MarkFirstUpload(c);
    const std::string applied = std::to_string(enqueued) + " streamed chunks applied";
    chunks_.FailInjected(c, "upload", applied);
    chunks_.Upload(c);
    if (release_.ReadsReleased(c)) release_.UploadGrads(c);
    chunks_.Uploaded(c);
    chunks_.KernelAfterUpload(c);
    device.Run(Q::kRun, ch.program, *w.scalars, index, chunks_.At(c, "kernel"));
    chunks_.KernelDone(c, "kernel");
    chunks_.FailInjected(c, "download", applied);
    chunks_.Download(c, ch.host);
    chunks_.SlotFree(c, chunks_.At(c, "download"));
    ++enqueued;
  }
  mark_end.done = true;
  chunks_.MarkEnd();
  return enqueued;
}

}  // namespace

std::unique_ptr<Executor> MakeGpuStream(StreamSetup setup, std::unique_ptr<StreamDevice> device) {
  return std::make_unique<GpuStream>(std::move(setup), std::move(device));
}

}  // namespace tandem::offload
