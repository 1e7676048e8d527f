#include "offload/pipeline/pipeline.h"

#include <chrono>
#include <exception>
#include <new>
#include <string>

#include "engine/elapsed.h"
#include "tandem/error.h"

namespace tandem::offload {

namespace {
using Q = StreamDevice::Queue;
constexpr Event kNone = StreamDevice::kNoEvent;
}  // namespace

Pipeline::Pipeline(StreamDevice* device, std::vector<void*> grad_slots,
                   std::vector<void*> param_slots)
    : device_(device),
      grad_slots_(std::move(grad_slots)),
      param_slots_(std::move(param_slots)),
      param_slot_ticket_(param_slots_.size(), kNone) {
  if (grad_slots_.size() < 2)
    throw Error(ErrorKind::kInvalidArgument, "offload pipeline needs >= 2 gradient slots, got " +
                                                 std::to_string(grad_slots_.size()));
  if (!param_slots_.empty() && param_slots_.size() != grad_slots_.size())
    throw Error(ErrorKind::kInvalidArgument, "offload pipeline: parameter slots (" +
                                                 std::to_string(param_slots_.size()) +
                                                 ") must match gradient slots");
  after_caller_ = device_->NewEvent();
  uploads_done_ = device_->NewEvent();
}

Event Pipeline::TimedCopy(Q q, void* dst, const void* src, size_t bytes,
                          const StreamDevice::What& w) {
  const Event start = device_->Ticket(q);
  device_->Copy(q, dst, src, bytes,
                q == Q::kUp ? StreamDevice::CopyKind::kUp : StreamDevice::CopyKind::kDown, w);
  const Event end = device_->Ticket(q);
  timed_.push_back({q, start, end});
  return end;
}

// Tickets older than the ring name newer copies: only the last copies' are summed.
double Pipeline::BusyMs(Q q) const {
  const size_t keep = StreamDevice::kTicketRing / 2;
  double total = 0;
  for (size_t i = timed_.size() > keep ? timed_.size() - keep : 0; i < timed_.size(); ++i)
    if (timed_[i].queue == q) total += device_->ElapsedMs(timed_[i].start, timed_[i].end);
  return total;
}

void Pipeline::Run(std::vector<OffloadChunk>& chunks, const StepScalars* scalars,
                   const HostStepFn& host_step, std::vector<Event>* last_upload,
                   PipelineTimes* times) {
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  double host_ms = 0;
  const size_t n = chunks.size(), k = grad_slots_.size();
  timed_.clear();
  const Event previous_upload = last_run_upload_;
  size_t applied = 0;
  work_.clear();
  for (size_t i = 0; i < n; ++i)
    if (!chunks[i].stepped && !chunks[i].skip) work_.push_back(i);
  const size_t w = work_.size();
  down_.assign(w, kNone);
  auto what = [&](size_t i, uint64_t bytes, const char* op) {
    return StreamDevice::What{i, n, bytes, op, "offload chunk"};
  };
  auto enqueue_download = [&](size_t j) {
    OffloadChunk& c = chunks[work_[j]];
    if (c.host_grad == nullptr && c.grad_bytes > 0)
      down_[j] = TimedCopy(Q::kDown, grad_slots_[j % k], c.device_grad, c.grad_bytes,
                           what(work_[j], c.grad_bytes, "gradient download"));
  };
  auto enqueue_upload = [&](size_t i, const void* src) {
    const OffloadChunk& c = chunks[i];
    const Event up = TimedCopy(Q::kUp, c.device_param, src, c.param_bytes,
                               what(i, c.param_bytes, "parameter upload"));
    if (last_upload != nullptr) (*last_upload)[c.tensor] = up;
    last_run_upload_ = up;
    return up;
  };
  try {
    // Chunks stepped before Run: their state is final, only the parameter goes up.
    for (size_t i = n; i-- > 0;) {
      const OffloadChunk& c = chunks[i];
      if (!c.stepped || c.skip || c.param_bytes == 0) continue;
      const void* src = c.param_source != nullptr ? c.param_source : c.host_param;
      if (src == nullptr)
        throw Error(ErrorKind::kInternal, "stepped chunk of tensor " + std::to_string(c.tensor) +
                                              " has no parameter to upload");
      enqueue_upload(i, src);
      ++applied;
    }
    // Note [Uploads read the state]: an upload may read the host state itself (the bf16
    // master that is the weight); the previous Run's uploads must finish before this
    // Run's host updates write that state again. (Uploads just enqueued above read state
    // that this Run does not write.)
    if (w > 0) device_->Synchronize(previous_upload);
    // The downloads read the gradients: after the caller's work so far.
    device_->Record(after_caller_, Q::kCaller, what(0, 0, "gradients final"));
    device_->Wait(Q::kDown, after_caller_, what(0, 0, "downloads wait for the gradients"));
    for (size_t j = 0; j < w && j < k; ++j) enqueue_download(j);
    for (size_t j = 0; j < w; ++j) {
      OffloadChunk& c = chunks[work_[j]];
      const size_t slot = j % k;
      device_->Synchronize(down_[j]);
      StepSpan span = c.span;
      span.grad = c.host_grad != nullptr ? c.host_grad : grad_slots_[slot];
      const void* up_src = c.param_source;
      if (up_src == nullptr && c.param_bytes > 0) {
        if (param_slots_.empty())
          throw Error(ErrorKind::kInternal, "chunk needs a parameter staging slot");
        device_->Synchronize(param_slot_ticket_[slot]);
        span.param = param_slots_[slot];
        up_src = param_slots_[slot];
      } else {
        span.param = nullptr;
      }
      const auto h0 = Clock::now();
      host_step(scalars[c.scalar_index], span);
      host_ms += MsSince(h0);
      ++applied;
      if (c.param_bytes > 0) {
        const Event up = enqueue_upload(work_[j], up_src);
        if (c.param_source == nullptr) param_slot_ticket_[slot] = up;
      }
      // The slot chunk j used is free again: start the download that reuses it.
      if (j + k < w) enqueue_download(j + k);
    }
    // The caller's stream after the uploads (host mode: they landed; a failure is thrown).
    device_->Record(uploads_done_, Q::kUp, what(0, 0, "uploads done"));
    device_->Wait(Q::kCaller, uploads_done_, what(0, 0, "caller waits for the uploads"));
  } catch (...) {
    // Whatever failed (a copy, a host step, an allocation), no copy may still be running
    // into or out of a slot when this returns.
    device_->Drain();
    last_run_upload_ = kNone;
    for (Event& t : param_slot_ticket_) t = kNone;
    const std::string where = " (offload pipeline: " + std::to_string(applied) + " of " +
                              std::to_string(n) + " chunks applied)";
    try {
      throw;
    } catch (const Error& e) {
      throw Error(e.kind(), e.message() + where);
    } catch (const std::bad_alloc&) {
      throw Error(ErrorKind::kOutOfMemory, "host allocation failed" + where);
    } catch (const std::exception& e) {
      throw Error(ErrorKind::kInternal, std::string(e.what()) + where);
    }
  }
  if (times != nullptr) {
    times->host_ms = host_ms;
    times->wall_ms = MsSince(t_start);
    device_->Drain();  // the copies' durations are known once they completed
    times->d2h_ms = BusyMs(Q::kDown);
    times->h2d_ms = BusyMs(Q::kUp);
  }
}

}  // namespace tandem::offload
