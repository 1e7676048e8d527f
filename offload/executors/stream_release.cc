// Gradient release for the GPU-stream executor (offload/executors/stream_release.h).
#include "offload/executors/stream_release.h"

#include <algorithm>

namespace tandem::offload {

using Kind = StreamDevice::CopyKind;

StreamRelease::StreamRelease(StreamChunks* chunks, bool on, uint64_t in_place_budget)
    : chunks_(*chunks), on_(on), in_place_budget_(in_place_budget) {
  const std::vector<TensorSpec>& specs = chunks_.specs();
  grad_.reserve(specs.size());
  for (const TensorSpec& sp : specs) grad_.push_back(sp.grad);
  released_.assign(specs.size(), 0);
  read_in_place_.assign(specs.size(), 0);
  grad_down_.assign(specs.size(), 0);
  grad_run_.assign(specs.size(), 0);
  if (!on_) return;
  StreamDevice& device = chunks_.device();
  grads_down_ = device.NewEvent();
  for (size_t t = 0; t < specs.size(); ++t)
    if (chunks_.streamed(t)) {
      grad_down_[t] = device.NewEvent();
      grad_run_[t] = device.NewEvent();
    }
}

void StreamRelease::SetGrad(size_t t, const void* grad) {
  grad_[t] = grad;
  if (released_[t] == 0) chunks_.device().SetGrad(t, grad);
}

void StreamRelease::Release(size_t t, const void* ready) {
  StreamDevice& device = chunks_.device();
  // The area is read by the last step's uploads, which its kernels waited for.
  chunks_.AfterLastKernels(Q::kGrads, chunks_.At(0, "released gradients"));
  device.WaitForeign(Q::kGrads, ready);
  const size_t gsz = DTypeSize(chunks_.specs()[t].grad_dtype);
  const auto* grad = static_cast<const uint8_t*>(grad_[t]);
  const layout::StreamLayout& layout = chunks_.layout();
  for (size_t i : chunks_.pieces(t)) {
    const layout::StreamPiece& p = layout.pieces()[i];
    const size_t c = chunks_.piece_chunk(i);
    device.Copy(Q::kGrads, chunks_.chunk(c).grad_host + layout.grad_offset(i),
                grad + p.offset * gsz, p.count * gsz, Kind::kDown,
                chunks_.At(c, "released gradients down"));
  }
  device.Record(grad_down_[t], Q::kGrads, chunks_.At(0, "released gradients down"));
  device.Record(grads_down_, Q::kGrads, chunks_.At(0, "released gradients down"));
  released_[t] = 1;
  any_released_ = true;
  device.SetSlotGrads(t);
}

bool StreamRelease::ReadsReleased(size_t c) const {
  for (uint32_t t : chunks_.chunk(c).span_tensor)
    if (released_[t] != 0) return true;
  return false;
}

void StreamRelease::UploadsAfterDownloads(const StreamDevice::What& w) {
  chunks_.device().Wait(Q::kUp, grads_down_, w);
}

void StreamRelease::UploadGrads(size_t c, size_t except) {
  StreamDevice& device = chunks_.device();
  const StreamChunks::Chunk& ch = chunks_.chunk(c);
  if (except == kNone) {
    device.Copy(Q::kUp, ch.grad_slot, ch.grad_host, ch.grad_bytes, Kind::kUp,
                chunks_.At(c, "released gradients up"));
    up_bytes_ += ch.grad_bytes;
    return;
  }
  // The other tensors' pieces, after their release downloads, in runs of adjacent pieces.
  uint64_t begin = 0, end = 0;
  auto flush = [&] {
    if (end == begin) return;
    device.Copy(Q::kUp, ch.grad_slot + begin, ch.grad_host + begin, end - begin, Kind::kUp,
                chunks_.At(c, "released gradients up"));
    up_bytes_ += end - begin;
    begin = end;
  };
  const layout::StreamLayout& layout = chunks_.layout();
  const layout::StreamChunk& sc = layout.chunks()[c];
  size_t waited = kNone;
  for (uint32_t i = sc.first; i < sc.end; ++i) {
    const layout::StreamPiece& p = layout.pieces()[i];
    const uint64_t off = layout.grad_offset(i);
    const uint64_t bytes = p.count * DTypeSize(chunks_.specs()[p.tensor].grad_dtype);
    if (p.tensor == except || bytes == 0) continue;
    if (waited != p.tensor)
      device.Wait(Q::kUp, grad_down_[p.tensor], chunks_.At(c, "released gradients"));
    waited = p.tensor;
    if (off != end) {
      flush();
      begin = off;
    }
    end = off + bytes;
  }
  flush();
}

uint64_t StreamRelease::TakeUpBytes() { return std::exchange(up_bytes_, 0); }

bool StreamRelease::KeepInPlace(uint64_t bytes) {
  while (!kept_.empty() && chunks_.device().Query(grad_run_[kept_.front().tensor])) {
    kept_bytes_ -= kept_.front().bytes;
    kept_.pop_front();
  }
  return in_place_budget_ > 0 && kept_bytes_ + bytes <= in_place_budget_;
}

void StreamRelease::ReadInPlace(size_t t, uint64_t bytes) {
  chunks_.device().Record(grad_run_[t], Q::kRun,
                          chunks_.At(0, "speculative kernels read the gradient"));
  read_in_place_[t] = 1;
  kept_.push_back({t, bytes});
  kept_bytes_ += bytes;
}

void StreamRelease::WaitGradReads(size_t t, void* stream) const {
  if (!on_ || !chunks_.streamed(t)) return;
  chunks_.device().StreamWait(stream, grad_down_[t]);
  if (read_in_place_[t] != 0) chunks_.device().StreamWait(stream, grad_run_[t]);
}

bool StreamRelease::GradReadsDone(size_t t) const {
  if (!on_ || !chunks_.streamed(t)) return true;
  return chunks_.device().Query(grad_down_[t]) &&
         (read_in_place_[t] == 0 || chunks_.device().Query(grad_run_[t]));
}

void StreamRelease::End() {
  for (size_t t = 0; t < released_.size(); ++t)
    if (released_[t] != 0) {
      released_[t] = 0;
      chunks_.device().SetGrad(t, grad_[t]);
    }
  any_released_ = false;
  std::fill(read_in_place_.begin(), read_in_place_.end(), uint8_t{0});
  kept_.clear();
  kept_bytes_ = 0;
  up_bytes_ = 0;
}

}  // namespace tandem::offload
