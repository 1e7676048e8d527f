#include "offload/transport/pipeline.h"

#include <chrono>
#include <exception>
#include <new>
#include <string>

#include "engine/elapsed.h"
#include "tandem/error.h"

namespace tandem::offload {

Pipeline::Pipeline(Transport* transport, std::vector<void*> grad_slots,
                   std::vector<void*> param_slots)
    : transport_(transport),
      grad_slots_(std::move(grad_slots)),
      param_slots_(std::move(param_slots)),
      param_slot_ticket_(param_slots_.size(), 0) {
  if (grad_slots_.size() < 2)
    throw Error(ErrorKind::kInvalidArgument, "offload pipeline needs >= 2 gradient slots, got " +
                                                 std::to_string(grad_slots_.size()));
  if (!param_slots_.empty() && param_slots_.size() != grad_slots_.size())
    throw Error(ErrorKind::kInvalidArgument, "offload pipeline: parameter slots (" +
                                                 std::to_string(param_slots_.size()) +
                                                 ") must match gradient slots");
}

void Pipeline::Run(std::vector<OffloadChunk>& chunks, const StepScalars* scalars,
                   const HostStepFn& host_step, std::vector<Ticket>* last_upload,
                   PipelineTimes* times) {
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  double host_ms = 0;
  const size_t n = chunks.size(), k = grad_slots_.size();
  transport_->ResetTimes();
  const Ticket previous_upload = last_run_upload_;
  size_t applied = 0;
  work_.clear();
  for (size_t i = 0; i < n; ++i)
    if (!chunks[i].stepped && !chunks[i].skip) work_.push_back(i);
  const size_t w = work_.size();
  down_.assign(w, 0);
  auto enqueue_download = [&](size_t j) {
    OffloadChunk& c = chunks[work_[j]];
    if (c.host_grad == nullptr && c.grad_bytes > 0)
      down_[j] = transport_->Download(grad_slots_[j % k], c.device_grad, c.grad_bytes);
  };
  auto enqueue_upload = [&](const OffloadChunk& c, const void* src) {
    const Ticket up = transport_->Upload(c.device_param, src, c.param_bytes);
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
      enqueue_upload(c, src);
      ++applied;
    }
    // Note [Uploads read the state]: an upload may read the host state itself (the bf16
    // master that is the weight); the previous Run's uploads must finish before this
    // Run's host updates write that state again. (Uploads just enqueued above read state
    // that this Run does not write.)
    if (previous_upload != 0 && w > 0) transport_->Wait(previous_upload);
    transport_->DownloadsAfterComputeStream();
    for (size_t j = 0; j < w && j < k; ++j) enqueue_download(j);
    for (size_t j = 0; j < w; ++j) {
      OffloadChunk& c = chunks[work_[j]];
      const size_t slot = j % k;
      if (down_[j] != 0) transport_->Wait(down_[j]);
      StepSpan span = c.span;
      span.grad = c.host_grad != nullptr ? c.host_grad : grad_slots_[slot];
      const void* up_src = c.param_source;
      if (up_src == nullptr && c.param_bytes > 0) {
        if (param_slots_.empty())
          throw Error(ErrorKind::kInternal, "chunk needs a parameter staging slot");
        if (param_slot_ticket_[slot] != 0) transport_->Wait(param_slot_ticket_[slot]);
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
        const Ticket up = enqueue_upload(c, up_src);
        if (c.param_source == nullptr) param_slot_ticket_[slot] = up;
      }
      // The slot chunk j used is free again: start the download that reuses it.
      if (j + k < w) enqueue_download(j + k);
    }
    transport_->ComputeStreamAfterUploads();
  } catch (...) {
    // Whatever failed (a copy, a host step, an allocation), no copy may still be running
    // into or out of a slot when this returns.
    transport_->Drain();
    last_run_upload_ = 0;
    for (Ticket& t : param_slot_ticket_) t = 0;
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
    times->d2h_ms = transport_->DownloadBusyMs();
    times->h2d_ms = transport_->UploadBusyMs();
  }
}

}  // namespace tandem::offload
