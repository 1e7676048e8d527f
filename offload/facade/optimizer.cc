// HybridOptimizer's public methods, forwarded to Impl (offload/facade/impl.h), and the
// free functions of tandem/optimizer.h.
#include <sched.h>

#include <algorithm>
#include <thread>

#include "offload/facade/impl.h"

namespace tandem {

bool CudaDeviceAvailable() { return offload::GpuSide::Available(); }

int MaxHostThreads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cores = 0;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(16, 4 * std::max(cores, 1));
}

HybridOptimizer::HybridOptimizer(std::vector<TensorSpec> tensors, OptimizerConfig config)
    : impl_(std::make_unique<Impl>(std::move(tensors), std::move(config))) {}
HybridOptimizer::~HybridOptimizer() = default;
StepResult HybridOptimizer::Step(std::span<const double> group_lrs, const StepOptions& o) {
  return impl_->Step(group_lrs, nullptr, o);
}
StepResult HybridOptimizer::Step(double lr, const StepOptions& o) {
  return impl_->Step({}, &lr, o);
}
void HybridOptimizer::ReloadParams(std::span<const size_t> t) { impl_->ReloadParams(t); }
int64_t HybridOptimizer::tensor_step_count(size_t i) const { return impl_->tensor_step_count(i); }
void HybridOptimizer::GradReady(size_t i, const void* grad, void* ready_stream) {
  impl_->GradReady(i, grad, ready_stream);
}
void HybridOptimizer::WaitGradConsumed(size_t i, void* stream) const {
  impl_->WaitGradConsumed(i, stream);
}
bool HybridOptimizer::GradConsumed(size_t i) const { return impl_->GradConsumed(i); }
void HybridOptimizer::BeginStep(std::span<const double> group_lrs, const StepOptions& o) {
  impl_->BeginStep(group_lrs, nullptr, o);
}
void HybridOptimizer::BeginStep(double lr, const StepOptions& o) { impl_->BeginStep({}, &lr, o); }
bool HybridOptimizer::step_begun() const { return impl_->step_begun(); }
void HybridOptimizer::DiscardStep() { impl_->DiscardStep(); }
void HybridOptimizer::SetHyperParams(size_t g, const HyperParams& h) {
  impl_->SetHyperParams(g, h);
}
const HyperParams& HybridOptimizer::hyper_params(size_t g) const { return impl_->hyper_params(g); }
size_t HybridOptimizer::group_count() const { return impl_->group_count(); }
void HybridOptimizer::WaitParam(size_t i, void* s) const { impl_->WaitParam(i, s); }
ExecutionMode HybridOptimizer::mode() const { return impl_->mode(); }
const Placement& HybridOptimizer::placement() const { return impl_->placement(); }
const ComputeSplit& HybridOptimizer::compute_split() const { return impl_->compute_split(); }
MemoryReport HybridOptimizer::memory() const { return impl_->memory(); }
StageTimes HybridOptimizer::last_step_times() const { return impl_->last_step_times(); }
int64_t HybridOptimizer::step_count() const { return impl_->step_count(); }
size_t HybridOptimizer::tensor_count() const { return impl_->tensor_count(); }
OptimizerSnapshot HybridOptimizer::Snapshot() const { return impl_->Snapshot(); }
void HybridOptimizer::Restore(const OptimizerSnapshot& s) { impl_->Restore(s); }

}  // namespace tandem
