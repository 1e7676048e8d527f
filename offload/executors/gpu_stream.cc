// The GPU-stream executor (offload/executors/gpu_stream.h).
#include "offload/executors/gpu_stream.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <string>
#include <utility>

#include "engine/layout/slab_layout.h"
#include "offload/executors/roles.h"
#include "offload/memory/slab.h"
#include "offload/speculation/stream_speculation.h"
#include "tandem/error.h"

namespace tandem::offload {
namespace {

using Q = StreamDevice::Queue;
using Kind = StreamDevice::CopyKind;
constexpr size_t kNone = ~size_t{0};

class GpuStream final : public Executor,
                        public Speculative,
                        public Queued,
                        public StreamOrdered,
                        public DeviceTimed,
                        public Joined,
                        public StreamSpeculation::Chunks {
 public:
  GpuStream(StreamSetup s, std::unique_ptr<StreamDevice> device);

  const char* name() const override { return "GPU-stream"; }
  Roles roles() override { return {this, this, this, this, this}; }

  void AddMemory(MemoryReport* r) const override {
    MemoryReport::Bytes& dev = gpu_ ? r->device : r->host;
    layout_.Report(&r->host);
    r->host.grads += grads_.size();
    r->classes.streamed += layout_.bytes();
    r->classes.stream_slots += slots_.size();
    dev.staging += slots_.size();
    r->host.speculation += spare_.size();
    dev.speculation += hold_.size();
    r->device.metadata += device_->program_bytes();
  }
  // The host slab (an aliased master, on the device, is not written).
  void AddInitRegions(std::vector<InitRegion>* regions) const override {
    for (size_t i = 0; i < layout_.pieces().size(); ++i)
      if (layout_.state().part(i).count > 0)
        regions->push_back(
            RegionOf(specs_[layout_.pieces()[i].tensor], layout_.state().part(i), false));
  }
  // Pinned arrays and, where aliased, the master on the parameter (device memory in GPU
  // mode).
  void VisitParts(size_t t, const PartVisitor& visit) const override {
    for (size_t i : pieces_[t]) visit(layout_.state().part(i), gpu_);
  }
  bool MasterIsParam(size_t t) const override {
    return !pieces_[t].empty() && layout_.state().part(pieces_[t][0]).alias_param;
  }
  void Quiesce() const override { device_->SynchronizeAll(); }

  void SetGrad(size_t t, const void* grad) override {
    grad_[t] = grad;
    if (released_[t] == 0) device_->SetGrad(t, grad);
  }

  void GradReady(size_t t, bool again, const std::vector<uint8_t>& ready,
                 const GradMark& mark) override {
    if (streamed_[t] == 0) return;
    if (release_) ReleaseGrads(t, mark);
    if (!spec_) return;
    if (!release_) {  // the speculative kernels read the gradient on the device
      device_->WaitForeign(Q::kRun, mark.ready);
      if (begun_) spec_->TensorReady(t, again, ready);
      return;
    }
    if (!begun_) return;
    // With release, the chunks this call speculates may read t's gradient where it was
    // handed over (Note [Reading the handed gradient in place]); its consumed fence then
    // waits for their kernels.
    const uint64_t bytes = specs_[t].numel * DTypeSize(specs_[t].grad_dtype);
    StreamSpeculation::InPlace in_place{t, mark.ready};
    spec_->TensorReady(t, again, ready, KeepInPlace(bytes) ? &in_place : nullptr);
    if (in_place.read) {
      device_->Record(grad_run_[t], Q::kRun, At(0, "speculative kernels read the gradient"));
      read_in_place_[t] = 1;
      kept_.push_back({t, bytes});
      kept_bytes_ += bytes;
    }
  }
  void WaitGradReads(size_t t, void* stream) const override {
    if (!release_ || streamed_[t] == 0) return;
    device_->StreamWait(stream, grad_down_[t]);
    if (read_in_place_[t] != 0) device_->StreamWait(stream, grad_run_[t]);
  }
  bool GradReadsDone(size_t t) const override {
    if (!release_ || streamed_[t] == 0) return true;
    return device_->Query(grad_down_[t]) &&
           (read_in_place_[t] == 0 || device_->Query(grad_run_[t]));
  }
  void StopSpeculation() override {
    if (spec_ && begun_) spec_->Stop();
  }
  void BeginSpeculation(const std::vector<StepScalars>* scalars,
                        const std::vector<uint32_t>* scalar_index,
                        const std::vector<uint8_t>& ready) override {
    if (!spec_) return;
    grad_up_bytes_ = 0;  // this step's
    spec_->Begin(scalars, scalar_index, ready);
    begun_ = true;
    commit_ = false;
  }
  void AwaitSpeculation(StageTimes*) override {
    if (begun_ && spec_ && spec_->error()) std::rethrow_exception(spec_->error());
  }
  bool SpeculatedActiveOnly(const std::vector<uint8_t>& active) const override {
    return !begun_ || !spec_ || spec_->AllActive(active);
  }
  void CommitSpeculation(StageTimes* times) override {
    if (!begun_ || !spec_) return;
    commit_ = true;
    times->speculated_stream_chunks = spec_->speculated_count();
  }
  void RollBackSpeculation(StageTimes* times) override {
    if (begun_ && spec_) times->rolled_back_stream_chunks = spec_->Rollback();
  }
  void EndEarlyStart() noexcept override {
    if (begun_ && spec_) {
      try {
        if (!commit_) spec_->Rollback();
      } catch (...) {
        // Only a device error waiting for the copies; the next device call reports it.
      }
      spec_->End();
    }
    begun_ = commit_ = false;
    // Released tensors read their gradients where SetGrad says again.
    for (size_t t = 0; t < released_.size(); ++t)
      if (released_[t] != 0) {
        released_[t] = 0;
        device_->SetGrad(t, grad_[t]);
      }
    any_released_ = false;
    std::fill(read_in_place_.begin(), read_in_place_.end(), uint8_t{0});
    kept_.clear();
    kept_bytes_ = 0;
    grad_up_bytes_ = 0;
  }

  void Launch(const StepWork& w) override;
  // The caller's stream joins the streamed kernels only now: joined at Launch, it would
  // hold the pipeline's gradient downloads (ordered after the caller's stream when the
  // pipeline starts) behind every streamed chunk.
  void Finish() override {
    if (!joining_) return;
    joining_ = false;
    if (streamed_before_) device_->Wait(Q::kCaller, kernels_done_, At(0, "caller joins"));
  }
  void Abandon() noexcept override {
    try {
      Finish();
    } catch (...) {  // the step's own error (or the next device call) reports it
    }
  }
  // The streamed kernels read the gradients and write the parameters.
  void WaitParam(size_t t, void* stream) const override {
    if (waited_on_ && streamed_[t] != 0) device_->StreamWait(stream, kernels_done_);
  }
  void WaitGradConsumed(size_t t, void* stream) const override { WaitParam(t, stream); }
  void ReadTimes(StageTimes* times) override {
    if (!timed_) return;
    device_->Synchronize(down_done_);
    times->stream_ms = device_->ElapsedMs(first_up_, down_done_);
    timed_ = false;
  }

  // StreamSpeculation::Chunks
  void Speculate(size_t c, const std::vector<StepScalars>& scalars,
                 const std::vector<uint32_t>& scalar_index,
                 StreamSpeculation::InPlace* in_place) override;

 private:
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
  struct SlotEvents {
    StreamDevice::Event up, run, down;
  };

  StreamDevice::What At(size_t c, const char* what) const {
    return {c, chunks_.size(), c < chunks_.size() ? chunks_[c].bytes : 0, what};
  }
  // A copy of chunk c that the FaultPlan fails throws as the device's failed copy would.
  void FailInjected(size_t c, const char* what, const std::string& note) const {
    if (faults_ == nullptr || !faults_->CopyFails()) return;  // tandem/faults.h
    throw Error(ErrorKind::kCuda, std::string("injected failure of ") + what +
                                      " copy of streamed chunk " + std::to_string(c) + " of " +
                                      std::to_string(chunks_.size()) + " (" + note + ")");
  }
  uint64_t LaunchChunks(const StepWork& w, const std::vector<uint8_t>* committed);
  // Gradient release: tensor t's streamed gradients down into the gradient area, after
  // the mark; its spans read them in the slots until the step ends.
  void ReleaseGrads(size_t t, const GradMark& mark);
  // Whether chunk c reads released gradients (its upload takes them along).
  bool ReadsReleased(size_t c) const {
    for (uint32_t t : chunks_[c].span_tensor)
      if (released_[t] != 0) return true;
    return false;
  }
  // Uploads chunk c's gradients into its slot on kUp, but those of tensor `except`
  // (kNone: every one), which its kernel reads in place; the caller ordered kUp after the
  // release downloads of what is uploaded.
  void UploadGrads(size_t c, size_t except = kNone);
  // Whether a gradient of `bytes` fits the in-place budget beside those kept whose
  // kernels have not run yet (forgets those that have).
  bool KeepInPlace(uint64_t bytes) {
    while (!kept_.empty() && device_->Query(grad_run_[kept_.front().tensor])) {
      kept_bytes_ -= kept_.front().bytes;
      kept_.pop_front();
    }
    return in_place_budget_ > 0 && kept_bytes_ + bytes <= in_place_budget_;
  }
  // Whether tensor t has a span in chunk c.
  bool ChunkHas(size_t c, size_t t) const {
    const std::vector<uint32_t>& ts = chunks_[c].span_tensor;
    return std::find(ts.begin(), ts.end(), t) != ts.end();
  }

  const std::vector<TensorSpec>& specs_;
  const bool gpu_;
  std::shared_ptr<FaultPlan> faults_;
  layout::StreamLayout layout_;
  const bool release_;
  Slab state_, slots_, spare_, hold_, grads_;
  std::vector<std::vector<size_t>> pieces_;  // per tensor: its pieces
  std::vector<size_t> piece_chunk_;          // per piece: its chunk
  std::vector<uint8_t> streamed_;            // per tensor: has streamed elements
  // Per tensor: the gradient SetGrad gave (the device reads it unless released), released
  // in this step (gradient release).
  std::vector<const void*> grad_;
  std::vector<uint8_t> released_;
  bool any_released_ = false;
  // Gradient release with speculation: per tensor, whether a speculative kernel read its
  // gradient in place in this step (grad_run_ marks the last such kernel).
  std::vector<uint8_t> read_in_place_;
  // The budget; the gradients read in place in this step, oldest first, and their bytes
  // (those whose kernels have run are forgotten as new ones come).
  const uint64_t in_place_budget_;
  struct Kept {
    size_t tensor;
    uint64_t bytes;
  };
  std::deque<Kept> kept_;
  uint64_t kept_bytes_ = 0;
  // Released gradient bytes uploaded since the last Launch (StageTimes).
  uint64_t grad_up_bytes_ = 0;
  std::vector<Chunk> chunks_;
  // Last: the device's queues stop (after what they run) before the slabs go.
  std::unique_ptr<StreamDevice> device_;
  std::vector<SlotEvents> slot_ev_;
  StreamDevice::Event first_up_ = 0, kernels_done_ = 0, down_done_ = 0;
  // Gradient release: per tensor, its last release download and its last speculative
  // kernel that read it in place; every release download so far.
  std::vector<StreamDevice::Event> grad_down_, grad_run_;
  StreamDevice::Event grads_down_ = 0;
  std::vector<uint8_t> slot_used_;  // per slot: a chunk went through it
  // streamed_before_: a Launch recorded the end events (the next step's uploads wait for
  // its downloads); joining_: the caller's stream is yet to join this step's kernels;
  // waited_on_: a step queued kernels another stream may wait for (WaitParam); timed_: the
  // last Launch streamed a chunk.
  bool streamed_before_ = false, joining_ = false, waited_on_ = false, timed_ = false;
  std::unique_ptr<StreamSpeculation> spec_;  // with speculative chunks only
  bool begun_ = false, commit_ = false;
};

GpuStream::GpuStream(StreamSetup s, std::unique_ptr<StreamDevice> device)
    : specs_(*s.specs),
      gpu_(s.gpu),
      faults_(std::move(s.faults)),
      layout_(s.plan->stream),
      release_(s.release),
      in_place_budget_(s.in_place_bytes) {
  const layout::MemoryPlan& plan = *s.plan;
  const MemKind near = gpu_ ? MemKind::kDevice : MemKind::kHost;
  const MemKind far = gpu_ ? MemKind::kPinned : MemKind::kHost;
  FaultPlan* const faults = faults_.get();
  state_ = Slab(far, layout_.bytes(), "streamed optimizer state", faults);
  layout_.Bind(state_.data(), specs_, *s.formats);
  slots_ = Slab(near, plan.stream_slot_bytes, "stream executor device slots", faults,
                s.device_memory);
  spare_ = Slab(far, plan.spec_spare_bytes, "speculation spare of the streamed state", faults);
  hold_ = Slab(near, plan.spec_hold_bytes, "speculation holding place of streamed parameters",
               faults, s.device_memory);
  grads_ = Slab(far, plan.stream_grad_bytes, "released gradients of the streamed state", faults);
  pieces_.assign(specs_.size(), {});
  for (size_t i = 0; i < layout_.pieces().size(); ++i)
    pieces_[layout_.pieces()[i].tensor].push_back(i);
  streamed_.assign(specs_.size(), 0);
  for (const layout::StreamPiece& p : layout_.pieces()) streamed_[p.tensor] = 1;
  grad_.reserve(specs_.size());
  for (const TensorSpec& sp : specs_) grad_.push_back(sp.grad);
  released_.assign(specs_.size(), 0);
  piece_chunk_.assign(layout_.pieces().size(), 0);
  device_ = std::move(device);

  // The chunks: each in its slot, one program over its spans and, for a chunk that may be
  // speculated, one over its hold spans; with release, each span's gradients in the slot.
  const uint64_t slot_bytes = plan.slot_stride;
  const std::vector<layout::StreamChunk>& sch = layout_.chunks();
  std::vector<std::vector<uint32_t>> chunk_tensors;
  std::vector<uint8_t> speculative_chunk;
  bool speculative = false;
  for (size_t c = 0; c < sch.size(); ++c) {
    Chunk ch;
    ch.slot_index = static_cast<int>(c % static_cast<size_t>(s.slots));
    ch.slot = slots_.data() + ch.slot_index * slot_bytes;
    ch.host = layout_.host_chunk(c);
    ch.bytes = sch[c].bytes;
    const std::vector<StepSpan> spans = layout_.SlotSpans(c, ch.slot, specs_, &ch.span_tensor);
    std::vector<uint64_t> grad_offset;
    std::vector<const void*> slot_grad;
    if (release_) {
      ch.grad_host = grads_.data() + plan.stream_grad_off[c];
      ch.grad_slot = ch.slot + plan.slot_grad_off;
      ch.grad_bytes = sch[c].grad_bytes;
    }
    for (uint32_t i = sch[c].first; i < sch[c].end; ++i) {
      const layout::StreamPiece& piece = layout_.pieces()[i];
      grad_offset.push_back(piece.offset * DTypeSize(specs_[piece.tensor].grad_dtype));
      if (release_) slot_grad.push_back(ch.grad_slot + layout_.grad_offset(i));
      piece_chunk_[i] = c;
    }
    ch.program = device_->AddProgram(s.algorithm, spans, ch.span_tensor, grad_offset, slot_grad);
    if (plan.spec_spare_off[c] != layout::kNoOffset) {
      ch.spare = spare_.data() + plan.spec_spare_off[c];
      const std::vector<StepSpan> hold = layout_.HoldSpans(
          c, spans, specs_, hold_.data() + plan.spec_hold_off[c], &ch.hold_copies);
      ch.hold_program =
          device_->AddProgram(s.algorithm, hold, ch.span_tensor, grad_offset, slot_grad);
    }
    chunk_tensors.push_back(ch.span_tensor);
    speculative_chunk.push_back(ch.speculative() ? 1 : 0);
    speculative |= ch.speculative();
    chunks_.push_back(std::move(ch));
  }
  for (int i = 0; i < s.slots; ++i)
    slot_ev_.push_back({device_->NewEvent(), device_->NewEvent(), device_->NewEvent()});
  slot_used_.assign(s.slots, 0);
  first_up_ = device_->NewEvent();
  kernels_done_ = device_->NewEvent();
  down_done_ = device_->NewEvent();
  grad_down_.assign(specs_.size(), 0);
  grad_run_.assign(specs_.size(), 0);
  read_in_place_.assign(specs_.size(), 0);
  if (release_) {
    grads_down_ = device_->NewEvent();
    for (size_t t = 0; t < specs_.size(); ++t)
      if (streamed_[t] != 0) {
        grad_down_[t] = device_->NewEvent();
        grad_run_[t] = device_->NewEvent();
      }
  }
  if (speculative)
    spec_ = std::make_unique<StreamSpeculation>(this, std::move(chunk_tensors),
                                                std::move(speculative_chunk), specs_.size());
}

void GpuStream::Launch(const StepWork& w) {
  joining_ = true;  // a launch that fails part-way is joined too (Abandon)
  const std::vector<uint8_t>* committed = commit_ ? &spec_->speculated() : nullptr;
  w.times->stream_chunks = LaunchChunks(w, committed);
  w.times->released_grad_up_bytes = grad_up_bytes_;
  grad_up_bytes_ = 0;
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
  // The kernels read the gradients: after the pre-pass, which came after them on the
  // caller's stream (not after the hot launch queued since: the streamed kernels run
  // beside it). Uploads read the host state: after the last step's downloads.
  device_->WaitForeign(Q::kRun, w.prepass_done);
  if (streamed_before_) device_->Wait(Q::kUp, down_done_, At(0, "stream executor start"));
  if (any_released_) device_->Wait(Q::kUp, grads_down_, At(0, "released gradients"));
  uint64_t enqueued = 0;
  // A failure part-way still marks the end of what was queued, so that the caller's
  // stream (Finish) and the next step's uploads wait for it.
  struct MarkEnd {
    GpuStream* self;
    bool done = false;
    ~MarkEnd() {
      if (done) return;
      try {
        self->device_->Record(self->kernels_done_, Q::kRun, self->At(0, "stream executor end"));
        self->device_->Record(self->down_done_, Q::kDown, self->At(0, "stream executor end"));
        self->streamed_before_ = true;
      } catch (...) {  // the step's own error reports it
      }
    }
  } mark_end{this};
  for (size_t c = 0; c < chunks_.size(); ++c) {
    Chunk& ch = chunks_[c];
    bool any = false;
    for (uint32_t t : ch.span_tensor) any |= index[t] != kSkipScalarIndex;
    if (!any) continue;
    if (committed != nullptr && (*committed)[c] != 0) {
      // Kept from the speculation: its spare holds the new state (downloaded on kDown,
      // which the next uploads and Quiesce wait for), and its parameters go into place
      // (its speculative kernel came earlier on kRun; backward's reads of the parameters
      // ended before the pre-pass).
      std::swap(ch.host, ch.spare);
      layout_.MoveChunk(c, ch.host);
      for (const layout::StreamLayout::HoldCopy& h : ch.hold_copies)
        device_->Copy(Q::kRun, h.param, h.hold, h.bytes, Kind::kDevice,
                      At(c, "held parameters into place"));
      continue;
    }
    const SlotEvents& ev = slot_ev_[ch.slot_index];
    if (slot_used_[ch.slot_index])  // the slot's last chunk has gone down (or goes)
      device_->Wait(Q::kUp, ev.down, At(c, "wait for its slot"));
    if (enqueued == 0) device_->Record(first_up_, Q::kUp, At(c, "timing"));
    const std::string applied = std::to_string(enqueued) + " streamed chunks applied";
    FailInjected(c, "upload", applied);
    device_->Copy(Q::kUp, ch.slot, ch.host, ch.bytes, Kind::kUp, At(c, "upload"));
    if (ReadsReleased(c)) UploadGrads(c);
    device_->Record(ev.up, Q::kUp, At(c, "upload"));
    device_->Wait(Q::kRun, ev.up, At(c, "kernel waits for upload"));
    device_->Run(Q::kRun, ch.program, *w.scalars, index, At(c, "kernel"));
    device_->Record(ev.run, Q::kRun, At(c, "kernel"));
    device_->Wait(Q::kDown, ev.run, At(c, "download waits for kernel"));
    FailInjected(c, "download", applied);
    device_->Copy(Q::kDown, ch.host, ch.slot, ch.bytes, Kind::kDown, At(c, "download"));
    device_->Record(ev.down, Q::kDown, At(c, "download"));
    slot_used_[ch.slot_index] = 1;
    ++enqueued;
  }
  mark_end.done = true;
  device_->Record(kernels_done_, Q::kRun, At(0, "stream executor end"));
  device_->Record(down_done_, Q::kDown, At(0, "stream executor end"));
  streamed_before_ = true;
  return enqueued;
}

void GpuStream::Speculate(size_t c, const std::vector<StepScalars>& scalars,
                          const std::vector<uint32_t>& scalar_index,
                          StreamSpeculation::InPlace* handed) {
  const Chunk& ch = chunks_.at(c);
  if (!ch.speculative())
    throw Error(ErrorKind::kInternal,
                "streamed chunk " + std::to_string(c) + " has no place for a speculative update");
  FailInjected(c, "upload", "speculative update");
  // The kernel comes after the ready marks of the chunk's gradients (kRun waited for
  // each at its GradReady; with release, the gradients come up with the chunk, but the
  // handed-over tensor's, read in place after its mark); the upload after the last
  // step's downloads.
  const size_t in_place =
      handed != nullptr && ChunkHas(c, handed->tensor) ? handed->tensor : kNone;
  if (streamed_before_) device_->Wait(Q::kUp, down_done_, At(c, "speculation"));
  const SlotEvents& ev = slot_ev_[ch.slot_index];
  if (slot_used_[ch.slot_index]) device_->Wait(Q::kUp, ev.down, At(c, "wait for its slot"));
  device_->Copy(Q::kUp, ch.slot, ch.host, ch.bytes, Kind::kUp, At(c, "upload"));
  if (ReadsReleased(c)) {
    if (in_place == kNone) device_->Wait(Q::kUp, grads_down_, At(c, "released gradients"));
    UploadGrads(c, in_place);
  }
  device_->Record(ev.up, Q::kUp, At(c, "upload"));
  // Whatever happens from here on, the slot's next user waits for what was queued.
  struct SlotFree {
    GpuStream* self;
    const SlotEvents& ev;
    int slot;
    ~SlotFree() {
      try {
        self->device_->Record(ev.down, Q::kDown, self->At(0, "slot free"));
      } catch (...) {  // the speculation's own error reports it
      }
      self->slot_used_[slot] = 1;
    }
  } slot_free{this, ev, ch.slot_index};
  device_->Wait(Q::kRun, ev.up, At(c, "kernel waits for upload"));
  for (const layout::StreamLayout::HoldCopy& h : ch.hold_copies)
    device_->Copy(Q::kRun, h.hold, h.param, h.bytes, Kind::kDevice,
                  At(c, "parameters into the holding place"));
  if (in_place == kNone) {
    device_->Run(Q::kRun, ch.hold_program, scalars, scalar_index, At(c, "speculative kernel"));
  } else {
    // Only this kernel reads the handed-over gradient: the program reads the slot again
    // after it, whatever happens (a rollback's Step reads the uploaded copy).
    struct SlotGradsAgain {
      StreamDevice* device;
      size_t program, tensor;
      ~SlotGradsAgain() {
        try {
          device->SetProgramGrad(program, tensor, nullptr);
        } catch (...) {  // cannot fail for a slot pointer; the speculation's error reports
        }
      }
    } again{device_.get(), ch.hold_program, in_place};
    device_->WaitForeign(Q::kRun, handed->mark);
    device_->SetProgramGrad(ch.hold_program, in_place, grad_[in_place]);
    device_->Run(Q::kRun, ch.hold_program, scalars, scalar_index, At(c, "speculative kernel"));
    handed->read = true;
  }
  device_->Record(ev.run, Q::kRun, At(c, "speculative kernel"));
  device_->Wait(Q::kDown, ev.run, At(c, "download waits for kernel"));
  FailInjected(c, "download", "speculative update");
  // Into the spare: the host chunk keeps the old bytes until Step decides. The spare was
  // last read by an upload before the last step's downloads, which this upload waited for.
  device_->Copy(Q::kDown, ch.spare, ch.slot, ch.bytes, Kind::kDown, At(c, "download"));
}

void GpuStream::ReleaseGrads(size_t t, const GradMark& mark) {
  // The area is read by the last step's uploads, which its kernels waited for.
  if (streamed_before_) device_->Wait(Q::kGrads, kernels_done_, At(0, "released gradients"));
  device_->WaitForeign(Q::kGrads, mark.ready);
  const size_t gsz = DTypeSize(specs_[t].grad_dtype);
  const auto* grad = static_cast<const uint8_t*>(grad_[t]);
  for (size_t i : pieces_[t]) {
    const layout::StreamPiece& p = layout_.pieces()[i];
    const size_t c = piece_chunk_[i];
    device_->Copy(Q::kGrads, chunks_[c].grad_host + layout_.grad_offset(i), grad + p.offset * gsz,
                  p.count * gsz, Kind::kDown, At(c, "released gradients down"));
  }
  device_->Record(grad_down_[t], Q::kGrads, At(0, "released gradients down"));
  device_->Record(grads_down_, Q::kGrads, At(0, "released gradients down"));
  released_[t] = 1;
  any_released_ = true;
  device_->SetSlotGrads(t);
}

void GpuStream::UploadGrads(size_t c, size_t except) {
  const Chunk& ch = chunks_[c];
  if (except == kNone) {
    device_->Copy(Q::kUp, ch.grad_slot, ch.grad_host, ch.grad_bytes, Kind::kUp,
                  At(c, "released gradients up"));
    grad_up_bytes_ += ch.grad_bytes;
    return;
  }
  // The other tensors' pieces, after their release downloads, in runs of adjacent pieces.
  uint64_t begin = 0, end = 0;
  auto flush = [&] {
    if (end == begin) return;
    device_->Copy(Q::kUp, ch.grad_slot + begin, ch.grad_host + begin, end - begin, Kind::kUp,
                  At(c, "released gradients up"));
    grad_up_bytes_ += end - begin;
    begin = end;
  };
  const layout::StreamChunk& sc = layout_.chunks()[c];
  size_t waited = kNone;
  for (uint32_t i = sc.first; i < sc.end; ++i) {
    const layout::StreamPiece& p = layout_.pieces()[i];
    const uint64_t off = layout_.grad_offset(i);
    const uint64_t bytes = p.count * DTypeSize(specs_[p.tensor].grad_dtype);
    if (p.tensor == except || bytes == 0) continue;
    if (waited != p.tensor)
      device_->Wait(Q::kUp, grad_down_[p.tensor], At(c, "released gradients"));
    waited = p.tensor;
    if (off != end) {
      flush();
      begin = off;
    }
    end = off + bytes;
  }
  flush();
}

}  // namespace

std::unique_ptr<Executor> MakeGpuStream(StreamSetup setup, std::unique_ptr<StreamDevice> device) {
  return std::make_unique<GpuStream>(std::move(setup), std::move(device));
}

}  // namespace tandem::offload
