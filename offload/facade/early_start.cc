// HybridOptimizer::Impl: early start (GradReady) and speculative early start (BeginStep):
// the bookkeeping on the optimizer's thread; each executor does its part (the host-offload
// executor's downloads and worker, the stream executor's speculated chunks). Step's part
// (commit or roll back) is in step.cc.
#include <algorithm>
#include <string>

#include "offload/facade/impl.h"
#include "tandem/error.h"

namespace tandem {

void HybridOptimizer::Impl::GradReady(size_t i, const void* grad) {
  if (i >= specs_.size())
    throw Error(ErrorKind::kInvalidArgument, "GradReady: tensor index " + std::to_string(i) +
                                                 " of " + std::to_string(specs_.size()));
  const void* ptr = grad != nullptr ? grad : specs_[i].grad;
  if (ptr != grads_.checked[i]) CheckGrad(i, ptr, "GradReady");  // before anything changes
  // A second call says the gradient changed since the first (Note [A second GradReady]
  // in offload/executors/host_offload.cc): each executor redoes its early work.
  const bool again = grads_.ready[i] != 0;
  grads_.current[i] = ptr;  // this step's gradient of tensor i
  UseGrad(i, ptr);
  grads_.ready[i] = 1;
  for (const auto& e : executors_) e->GradReady(i, again, grads_.ready);
}

void HybridOptimizer::Impl::BeginStep(std::span<const double> group_lrs, const double* one_lr,
                                      const StepOptions& opt) {
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
  // Chunks whose tensors were marked ready before BeginStep are speculated on now.
  for (const auto& e : executors_)
    e->BeginSpeculation(&begun_.scalars, &begun_.scalar_index, grads_.ready);
  begun_.on = true;
  begun_.lrs = std::move(lrs);
  begun_.hyper = std::move(hyper);
  begun_.clip = opt.max_grad_norm;
  begun_.loss_scale = opt.loss_scale;
}

void HybridOptimizer::Impl::EndEarlyStart() noexcept {
  for (const auto& e : executors_) e->EndEarlyStart();
  begun_.on = false;
  std::fill(grads_.ready.begin(), grads_.ready.end(), uint8_t{0});
}

void HybridOptimizer::Impl::RequireNoBegunStep(const char* what) const {
  if (begun_.on)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(what) + ": a step is begun (BeginStep); call Step first");
}

}  // namespace tandem
