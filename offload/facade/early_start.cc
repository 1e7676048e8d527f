// HybridOptimizer::Impl: early start (GradReady), gradient release (GradConsumed) and
// speculative early start (BeginStep): the bookkeeping on the optimizer's thread; the
// pre-pass takes each gradient's partial, each executor does its part (the host-offload
// executor's downloads and worker, the stream executor's speculated chunks, the copies of
// released gradients). Step's part (commit or roll back) is in step.cc.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "engine/elapsed.h"
#include "offload/facade/impl.h"
#include "tandem/error.h"

namespace tandem {
namespace {

// Adds the time of the enclosing call to `*ms` (StageTimes::handover_ms), however it ends.
class HandoverTimer {
 public:
  explicit HandoverTimer(double* ms) : ms_(ms), t0_(std::chrono::steady_clock::now()) {}
  ~HandoverTimer() { *ms_ += MsSince(t0_); }
  HandoverTimer(const HandoverTimer&) = delete;
  HandoverTimer& operator=(const HandoverTimer&) = delete;

 private:
  double* ms_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

void HybridOptimizer::Impl::GradReady(size_t i, const void* grad, void* ready_stream) {
  HandoverTimer timer(&grads_.handover_ms);
  if (i >= specs_.size())
    throw Error(ErrorKind::kInvalidArgument, "GradReady: tensor index " + std::to_string(i) +
                                                 " of " + std::to_string(specs_.size()));
  const void* ptr = grad != nullptr ? grad : specs_[i].grad;
  if (ptr != grads_.checked[i]) CheckGrad(i, ptr, "GradReady");  // before anything changes
  // A second call says the gradient changed since the first (Note [A second GradReady]
  // in offload/executors/host_offload.cc): each executor redoes its early work. With
  // release the first one is gone.
  const bool again = grads_.ready[i] != 0;
  if (again && cfg_.release_grads)
    throw Error(ErrorKind::kInvalidArgument,
                "GradReady: tensor " + std::to_string(i) + " '" + specs_[i].name +
                    "' was handed a second time in one step with release_grads; its first "
                    "gradient was released (the step keeps its copies): accumulate the "
                    "micro-batches before handing the gradient over, once per step");
  // GPU mode: every read below comes after the producer's work so far (Note [Gradient
  // release] in tandem/optimizer.h).
  offload::GradMark mark;
  if (gpu()) {
    mark.ready = fences_->MarkReady(ready_stream);
    mark.work_stream = fences_->work_stream();
  }
  grads_.current[i] = ptr;  // this step's gradient of tensor i
  UseGrad(i, ptr);
  grads_.ready[i] = 1;
  // Its norm partial first: a speculation that the partials already rule out takes no
  // more chunks, this tensor's included.
  prepass_->TensorReady(i, mark.work_stream);
  if (begun_.on && !begun_.stopped) StopIfClipOrSkip();
  for (const auto& e : executors_.all()) e->GradReady(i, again, grads_.ready, mark);
  if (cfg_.release_grads && gpu()) {
    for (offload::Queued* e : executors_.queued()) e->WaitGradReads(i, fences_->join_stream());
    fences_->RecordConsumed(i);
  }
}

void HybridOptimizer::Impl::StopIfClipOrSkip() {
  // Step's own tests on the known partials: the global sum only adds to them, so a local
  // clip or non-finite value is the step's (Note [Exact sum of squares]).
  const offload::NormResult known = prepass_->Known();
  const double norm = std::sqrt(known.sum_squares) / begun_.loss_scale;
  if (!known.nonfinite && std::isfinite(norm) && !(begun_.clip > 0 && norm > begun_.clip)) return;
  begun_.stopped = true;
  for (offload::Speculative* e : executors_.speculative()) e->StopSpeculation();
}

bool HybridOptimizer::Impl::GradConsumed(size_t i) const {
  if (i >= specs_.size())
    throw Error(ErrorKind::kInvalidArgument, "GradConsumed: tensor index " + std::to_string(i) +
                                                 " of " + std::to_string(specs_.size()));
  if (!cfg_.release_grads)
    throw Error(ErrorKind::kInvalidArgument,
                "GradConsumed needs OptimizerConfig::release_grads (without it the gradient is "
                "read until Step returns: WaitGradConsumed after Step)");
  if (gpu()) return fences_->Consumed(i);
  for (const offload::Queued* e : executors_.queued())
    if (!e->GradReadsDone(i)) return false;
  return true;
}

void HybridOptimizer::Impl::BeginStep(std::span<const double> group_lrs, const double* one_lr,
                                      const StepOptions& opt) {
  HandoverTimer timer(&grads_.handover_ms);
  if (!cfg_.speculative_early_start)
    throw Error(ErrorKind::kInvalidArgument,
                "BeginStep needs OptimizerConfig::speculative_early_start = true (it allocates "
                "the speculation's backup at construction)");
  if (begun_.on)
    throw Error(ErrorKind::kInvalidArgument,
                "BeginStep: a step is already begun; call Step before the next BeginStep");
  std::vector<double> lrs = one_lr != nullptr ? OneLr(*one_lr) : GroupLrs(group_lrs);
  ValidateStepArgs(opt);
  std::vector<HyperParams> hyper = StepHyper(opt);
  // The scalars Step computes when the clip coefficient is exactly 1: grad_mul =
  // clip / loss_scale = 1.0 / loss_scale, the same double, so the same float; one entry
  // per (group, tensor step) as Step assigns them (Note [Scalar index]), every tensor
  // active.
  AssignScalars({}, lrs, hyper, 1.0 / opt.loss_scale, &begun_.scalars, &begun_.scalar_index);
  // Chunks whose tensors were marked ready before BeginStep are speculated on now,
  // unless their partials already rule the speculation out.
  for (offload::Speculative* e : executors_.speculative())
    e->BeginSpeculation(&begun_.scalars, &begun_.scalar_index, grads_.ready);
  begun_.on = true;
  begun_.stopped = false;
  begun_.lrs = std::move(lrs);
  begun_.hyper = std::move(hyper);
  begun_.clip = opt.max_grad_norm;
  begun_.loss_scale = opt.loss_scale;
  StopIfClipOrSkip();
}

void HybridOptimizer::Impl::EndEarlyStart() noexcept {
  grads_.handover_ms = 0;
  for (const auto& e : executors_.all()) e->EndEarlyStart();
  prepass_->EndStep();
  begun_.on = begun_.stopped = false;
  std::fill(grads_.ready.begin(), grads_.ready.end(), uint8_t{0});
}

void HybridOptimizer::Impl::RequireNoBegunStep(const char* what) const {
  if (begun_.on)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(what) + ": a step is begun (BeginStep); call Step first");
}

}  // namespace tandem
