// The GPU-stream executor's chunks in their slots (offload/executors/stream_chunks.h).
#include "offload/executors/stream_chunks.h"

#include <algorithm>
#include <string>
#include <utility>

#include "tandem/error.h"

namespace tandem::offload {

using Kind = StreamDevice::CopyKind;

StreamChunks::StreamChunks(const StreamSetup& s, std::unique_ptr<StreamDevice> device)
    : specs_(*s.specs), gpu_(s.gpu), faults_(s.faults), layout_(s.plan->stream) {
  const layout::MemoryPlan& plan = *s.plan;
  const MemKind near = gpu_ ? MemKind::kDevice : MemKind::kHost;
  const MemKind far = gpu_ ? MemKind::kPinned : MemKind::kHost;
  FaultPlan* const faults = faults_.get();
  state_ = Slab(far, layout_.bytes(), "streamed optimizer state", faults);
  layout_.Bind(state_.data(), specs_, *s.formats);
  slots_ =
      Slab(near, plan.stream_slot_bytes, "stream executor device slots", faults, s.device_memory);
  spare_ = Slab(far, plan.spec_spare_bytes, "speculation spare of the streamed state", faults);
  hold_ = Slab(near, plan.spec_hold_bytes, "speculation holding place of streamed parameters",
               faults, s.device_memory);
  grads_ = Slab(far, plan.stream_grad_bytes, "released gradients of the streamed state", faults);
  pieces_.assign(specs_.size(), {});
  for (size_t i = 0; i < layout_.pieces().size(); ++i)
    pieces_[layout_.pieces()[i].tensor].push_back(i);
  piece_chunk_.assign(layout_.pieces().size(), 0);
  device_ = std::move(device);

  // The chunks: each in its slot, one program over its spans and, for a chunk that may be
  // speculated, one over its hold spans; with release, each span's gradients in the slot.
  const uint64_t slot_bytes = plan.slot_stride;
  const std::vector<layout::StreamChunk>& sch = layout_.chunks();
  for (size_t c = 0; c < sch.size(); ++c) {
    Chunk ch;
    ch.slot_index = static_cast<int>(c % static_cast<size_t>(s.slots));
    ch.slot = slots_.data() + ch.slot_index * slot_bytes;
    ch.host = layout_.host_chunk(c);
    ch.bytes = sch[c].bytes;
    const std::vector<StepSpan> spans = layout_.SlotSpans(c, ch.slot, specs_, &ch.span_tensor);
    std::vector<uint64_t> grad_offset;
    std::vector<const void*> slot_grad;
    if (s.release) {
      ch.grad_host = grads_.data() + plan.stream_grad_off[c];
      ch.grad_slot = ch.slot + plan.slot_grad_off;
      ch.grad_bytes = sch[c].grad_bytes;
    }
    for (uint32_t i = sch[c].first; i < sch[c].end; ++i) {
      const layout::StreamPiece& piece = layout_.pieces()[i];
      grad_offset.push_back(piece.offset * DTypeSize(specs_[piece.tensor].grad_dtype));
      if (s.release) slot_grad.push_back(ch.grad_slot + layout_.grad_offset(i));
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
    chunks_.push_back(std::move(ch));
  }
  for (int i = 0; i < s.slots; ++i)
    slot_ev_.push_back({device_->NewEvent(), device_->NewEvent(), device_->NewEvent()});
  slot_used_.assign(s.slots, 0);
  first_up_ = device_->NewEvent();
  kernels_done_ = device_->NewEvent();
  down_done_ = device_->NewEvent();
}

bool StreamChunks::Has(size_t c, size_t t) const {
  const std::vector<uint32_t>& ts = chunks_[c].span_tensor;
  return std::find(ts.begin(), ts.end(), t) != ts.end();
}

void StreamChunks::AddMemory(MemoryReport* r) const {
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
void StreamChunks::AddInitRegions(std::vector<InitRegion>* regions) const {
  for (size_t i = 0; i < layout_.pieces().size(); ++i)
    if (layout_.state().part(i).count > 0)
      regions->push_back(
          RegionOf(specs_[layout_.pieces()[i].tensor], layout_.state().part(i), false));
}

// Pinned arrays and, where aliased, the master on the parameter (device memory in GPU
// mode).
void StreamChunks::VisitParts(size_t t, const PartVisitor& visit) const {
  for (size_t i : pieces_[t]) visit(layout_.state().part(i), gpu_);
}

bool StreamChunks::MasterIsParam(size_t t) const {
  return !pieces_[t].empty() && layout_.state().part(pieces_[t][0]).alias_param;
}

void StreamChunks::FailInjected(size_t c, const char* what, const std::string& note) const {
  if (faults_ == nullptr || !faults_->CopyFails()) return;  // tandem/faults.h
  throw Error(ErrorKind::kCuda, std::string("injected failure of ") + what +
                                    " copy of streamed chunk " + std::to_string(c) + " of " +
                                    std::to_string(chunks_.size()) + " (" + note + ")");
}

void StreamChunks::WaitSlot(size_t c) {
  const int slot = chunks_[c].slot_index;
  if (slot_used_[slot])  // the slot's last chunk has gone down (or goes)
    device_->Wait(Q::kUp, slot_ev_[slot].down, At(c, "wait for its slot"));
}

void StreamChunks::MarkFirstUpload(size_t c) {
  device_->Record(first_up_, Q::kUp, At(c, "timing"));
}

void StreamChunks::Upload(size_t c) {
  const Chunk& ch = chunks_[c];
  device_->Copy(Q::kUp, ch.slot, ch.host, ch.bytes, Kind::kUp, At(c, "upload"));
}

void StreamChunks::Uploaded(size_t c) {
  device_->Record(slot_ev_[chunks_[c].slot_index].up, Q::kUp, At(c, "upload"));
}

void StreamChunks::KernelAfterUpload(size_t c) {
  device_->Wait(Q::kRun, slot_ev_[chunks_[c].slot_index].up, At(c, "kernel waits for upload"));
}

void StreamChunks::KernelDone(size_t c, const char* what) {
  const SlotEvents& ev = slot_ev_[chunks_[c].slot_index];
  device_->Record(ev.run, Q::kRun, At(c, what));
  device_->Wait(Q::kDown, ev.run, At(c, "download waits for kernel"));
}

void StreamChunks::Download(size_t c, uint8_t* dst) {
  const Chunk& ch = chunks_[c];
  device_->Copy(Q::kDown, dst, ch.slot, ch.bytes, Kind::kDown, At(c, "download"));
}

void StreamChunks::SlotFree(size_t c, const StreamDevice::What& w) {
  const int slot = chunks_[c].slot_index;
  slot_used_[slot] = 1;
  device_->Record(slot_ev_[slot].down, Q::kDown, w);
}

void StreamChunks::HoldParams(size_t c) {
  for (const layout::StreamLayout::HoldCopy& h : chunks_[c].hold_copies)
    device_->Copy(Q::kRun, h.hold, h.param, h.bytes, Kind::kDevice,
                  At(c, "parameters into the holding place"));
}

// Its spare holds the new state (downloaded on kDown, which the next uploads and Quiesce
// wait for), and its parameters go into place (its speculative kernel came earlier on
// kRun; backward's reads of the parameters ended before the pre-pass).
void StreamChunks::Keep(size_t c) {
  Chunk& ch = chunks_[c];
  std::swap(ch.host, ch.spare);
  layout_.MoveChunk(c, ch.host);
  for (const layout::StreamLayout::HoldCopy& h : ch.hold_copies)
    device_->Copy(Q::kRun, h.param, h.hold, h.bytes, Kind::kDevice,
                  At(c, "held parameters into place"));
}

void StreamChunks::AfterLastDownloads(Q q, const StreamDevice::What& w) {
  if (streamed_before_) device_->Wait(q, down_done_, w);
}

void StreamChunks::AfterLastKernels(Q q, const StreamDevice::What& w) {
  if (streamed_before_) device_->Wait(q, kernels_done_, w);
}

void StreamChunks::MarkEnd() {
  device_->Record(kernels_done_, Q::kRun, At(0, "stream executor end"));
  device_->Record(down_done_, Q::kDown, At(0, "stream executor end"));
  streamed_before_ = true;
}

}  // namespace tandem::offload
