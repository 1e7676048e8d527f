// HybridOptimizer: early start (GradReady) and speculative early start (BeginStep); the
// bookkeeping on the optimizer's thread. The worker is offload/speculation.h; Step's part
// (commit or roll back) is in optimizer_step.cc.
#include <algorithm>
#include <string>

#include "offload/optimizer_impl.h"
#include "tandem/error.h"

namespace tandem {

using offload::MemKind;

// The early-start gradient buffer: allocated here on the first GradReady (and reported as
// staging from then on), or at construction with speculative_early_start.
void HybridOptimizer::Impl::AllocateEarlyBuffer() {
  if (early_allocated_) return;
  early_slab_ = offload::Slab(gpu() ? MemKind::kPinned : MemKind::kHost, early_bytes_,
                              "early-start gradient buffer", cfg_.faults.get());
  early_allocated_ = true;
  if (!cfg_.speculative_early_start) report_.host.staging += early_bytes_;  // else planned
}

const void* HybridOptimizer::Impl::EarlyGrad(size_t c) const {
  const size_t t = chunks_[c].tensor;
  return early_slab_.data() + early_offset_[t] +
         chunk_part_off_[c] * DTypeSize(specs_[t].grad_dtype);
}

// The tensor's offloaded gradients go down chunk by chunk into the early-start buffer as
// soon as backward produced them; Step then finds them on the host. Between BeginStep and
// Step each chunk is also handed to the speculation worker.
//
// Note [A second GradReady]: under gradient accumulation the hook fires once per
// micro-batch, and only the last gradient is final. A second call for a tensor in one
// step therefore redoes its early work: the worker is waited for (it may be reading the
// early buffer of these chunks), the tensor's speculated chunks are restored from their
// backup, and the downloads are enqueued again; the download queue is FIFO and ordered
// after the compute stream, so the new gradient lands after the old one. The step then
// gives the bits it gives without early start.
void HybridOptimizer::Impl::GradReady(size_t i, const void* grad) {
  if (i >= specs_.size())
    throw Error(ErrorKind::kInvalidArgument, "GradReady: tensor index " + std::to_string(i) +
                                                 " of " + std::to_string(specs_.size()));
  const void* ptr = grad != nullptr ? grad : specs_[i].grad;
  if (ptr != checked_grad_[i]) CheckGrad(i, ptr, "GradReady");  // before anything changes
  const bool again = grad_ready_[i] != 0;
  grad_[i] = ptr;  // this step's gradient of tensor i (a second call may move it)
  UseGrad(i, ptr);
  if (stream_spec_) {  // streamed chunks: the gradient stays on the GPU
    grad_ready_[i] = 1;
    if (begun_) stream_spec_->TensorReady(i, again, grad_ready_);
  }
  if (!pipeline_ || cold_.part(i).count == 0) {
    grad_ready_[i] = 1;
    return;
  }
  AllocateEarlyBuffer();
  if (again && begun_ && speculator_) {
    (void)speculator_->WaitIdle();  // a chunk's error stays recorded; Step reports it
    for (size_t c = chunk_begin_[i]; c < chunk_end_[i]; ++c) speculator_->Forget(c);
  }
  transport_->DownloadsAfterComputeStream();
  for (size_t c = chunk_begin_[i]; c < chunk_end_[i]; ++c) {
    if (!again && chunk_ticket_[c] != 0) continue;  // a retry after a failed enqueue
    const offload::OffloadChunk& ch = chunks_[c];
    chunk_ticket_[c] =
        transport_->Download(const_cast<void*>(EarlyGrad(c)), ch.device_grad, ch.grad_bytes);
    if (begun_ && speculator_) speculator_->Enqueue(c, chunk_ticket_[c]);
  }
  grad_ready_[i] = 1;
}

void HybridOptimizer::Impl::BeginStep(std::span<const double> group_lrs, const double* one_lr,
                                      const StepOptions& opt) {
  if (!cfg_.speculative_early_start)
    throw Error(ErrorKind::kInvalidArgument,
                "BeginStep needs OptimizerConfig::speculative_early_start = true (it allocates "
                "the speculation's backup at construction)");
  if (begun_)
    throw Error(ErrorKind::kInvalidArgument,
                "BeginStep: a step is already begun; call Step before the next BeginStep");
  std::vector<double> lrs = one_lr != nullptr ? OneLr(*one_lr) : GroupLrs(group_lrs);
  ValidateStepArgs(opt);
  std::vector<HyperParams> hyper = StepHyper(opt);
  // The scalars Step computes when the clip coefficient is exactly 1: grad_mul =
  // clip / loss_scale = 1.0 / loss_scale, the same double, so the same float; one entry
  // per (group, tensor step) as Step assigns them (Note [Scalar index]), every tensor
  // active.
  AssignScalars({}, lrs, hyper, 1.0 / opt.loss_scale, &spec_scalars_, &spec_index_);
  for (offload::OffloadChunk& c : chunks_) c.scalar_index = spec_index_[c.tensor];
  if (speculator_) {
    speculator_->Begin(spec_scalars_, pipeline_->last_upload());
    // Gradients marked ready before BeginStep are speculated on too.
    for (size_t c = 0; c < chunks_.size(); ++c)
      if (chunk_ticket_[c] != 0) speculator_->Enqueue(c, chunk_ticket_[c]);
  }
  // Streamed chunks whose tensors were marked ready before BeginStep go now.
  if (stream_spec_) stream_spec_->Begin(&spec_scalars_, &spec_index_, grad_ready_);
  begun_ = true;
  spec_commit_ = false;
  stream_commit_ = false;
  begun_lrs_ = std::move(lrs);
  begun_hyper_ = std::move(hyper);
  begun_clip_ = opt.max_grad_norm;
  begun_loss_scale_ = opt.loss_scale;
}

void HybridOptimizer::Impl::EndEarlyStart() noexcept {
  if (begun_ && speculator_) {
    try {
      if (!spec_commit_) speculator_->Cancel();
      speculator_->WaitIdle();
      if (!spec_commit_) speculator_->Rollback();
    } catch (...) {
      // Rollback copies host memory only; WaitIdle and Cancel do not throw.
    }
    speculator_->End();
  }
  if (begun_ && stream_spec_) {
    try {
      if (!stream_commit_) stream_spec_->Rollback();
    } catch (...) {
      // Only a CUDA error waiting for the copies; the next CUDA call reports it.
    }
    stream_spec_->End();
  }
  begun_ = false;
  spec_commit_ = false;
  stream_commit_ = false;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    chunk_ticket_[c] = 0;
    chunks_[c].stepped = false;
    chunks_[c].host_param = nullptr;
  }
  std::fill(grad_ready_.begin(), grad_ready_.end(), uint8_t{0});
}

void HybridOptimizer::Impl::RequireNoBegunStep(const char* what) const {
  if (begun_)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(what) + ": a step is begun (BeginStep); call Step first");
}

}  // namespace tandem
