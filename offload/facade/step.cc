// HybridOptimizer::Impl: the step (its arguments, the pre-pass, the speculation's
// decision, the scalars, the executors), per-group hyper-parameters, stage times.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <string>
#include <utility>

#include "engine/elapsed.h"
#include "offload/facade/impl.h"
#include "offload/prepass/grad_stats.h"
#include "tandem/error.h"

namespace tandem {

using Clock = std::chrono::steady_clock;

namespace {
// The clip coefficient min(1, max_grad_norm / (norm + 1e-6)) where clipping triggers; 1.0
// exactly otherwise (what the speculation of BeginStep assumes).
double ClipCoefficient(double grad_norm, const StepOptions& opt) {
  if (opt.max_grad_norm > 0 && grad_norm > opt.max_grad_norm)
    return opt.max_grad_norm / (grad_norm + 1e-6);
  return 1.0;
}

// "lr 0.001000, ..." when every group has one lr, else "lr 0.001000/0.000500, ...".
std::string Describe(const std::vector<double>& lrs, double clip, double loss_scale) {
  std::string text = "lr";
  const bool one = std::all_of(lrs.begin(), lrs.end(), [&](double x) { return x == lrs[0]; });
  for (size_t g = 0; g < (one ? std::min<size_t>(1, lrs.size()) : lrs.size()); ++g)
    text.append(g == 0 ? " " : "/").append(std::to_string(lrs[g]));
  text.append(", max_grad_norm ").append(std::to_string(clip));
  text.append(", loss_scale ").append(std::to_string(loss_scale));
  return text;
}

[[noreturn]] void Invalid(const std::string& m) { throw Error(ErrorKind::kInvalidArgument, m); }
}  // namespace

void ValidateStepArgs(const StepOptions& opt) {
  if (!std::isfinite(opt.loss_scale) || opt.loss_scale <= 0)
    Invalid("loss_scale must be finite and > 0, got " + std::to_string(opt.loss_scale));
  if (!std::isfinite(opt.max_grad_norm) || opt.max_grad_norm < 0)
    Invalid("max_grad_norm must be finite and >= 0, got " + std::to_string(opt.max_grad_norm));
}

std::vector<double> HybridOptimizer::Impl::GroupLrs(std::span<const double> group_lrs) const {
  if (group_lrs.size() != cfg_.groups.size())
    Invalid(std::to_string(group_lrs.size()) + " learning rates given for " +
            std::to_string(cfg_.groups.size()) + " groups (one per group)");
  for (size_t g = 0; g < group_lrs.size(); ++g)
    if (!std::isfinite(group_lrs[g]) || group_lrs[g] < 0)
      Invalid("group " + std::to_string(g) + ": learning rate must be finite and >= 0, got " +
              std::to_string(group_lrs[g]));
  return {group_lrs.begin(), group_lrs.end()};
}

std::vector<double> HybridOptimizer::Impl::OneLr(double lr) const {
  if (!std::isfinite(lr) || lr < 0)
    Invalid("learning rate must be finite and >= 0, got " + std::to_string(lr));
  std::vector<double> lrs;
  for (const HyperParams& h : cfg_.groups) lrs.push_back(lr * h.lr_scale);
  return GroupLrs(lrs);
}

std::vector<HyperParams> HybridOptimizer::Impl::StepHyper(const StepOptions& opt) const {
  if (opt.group_hyper.empty()) return cfg_.groups;
  if (opt.group_hyper.size() != cfg_.groups.size())
    Invalid("StepOptions::group_hyper has " + std::to_string(opt.group_hyper.size()) +
            " entries for " + std::to_string(cfg_.groups.size()) + " groups");
  for (size_t g = 0; g < cfg_.groups.size(); ++g) {
    const std::string where = "StepOptions::group_hyper[" + std::to_string(g) + "]";
    ValidateHyperParams(cfg_.algorithm, opt.group_hyper[g], where);
    if (HasMomentum(cfg_.algorithm, opt.group_hyper[g]) !=
        HasMomentum(cfg_.algorithm, cfg_.groups[g]))
      Invalid(where +
              ": momentum cannot be switched between zero and non-zero after "
              "construction (it decides whether a momentum buffer exists)");
  }
  return {opt.group_hyper.begin(), opt.group_hyper.end()};
}

void HybridOptimizer::Impl::CheckGrad(size_t t, const void* grad, const char* where) const {
  const TensorSpec& s = specs_[t];
  if (s.numel == 0) return;
  const std::string who = "tensor " + std::to_string(t) + " '" + s.name + "'";
  if (grad == nullptr) Invalid(who + ": " + where + " gradient is null");
  if (!gpu()) return;
  std::string detail = std::to_string(s.numel);
  detail.insert(0, 1, '(');
  detail.append(" elements of ").append(Name(s.grad_dtype)).append(")");
  gpu_->CheckDevicePointer(grad, s.numel * DTypeSize(s.grad_dtype), detail, who,
                           (std::string(where) + " gradient").c_str());
}

std::vector<const void*> HybridOptimizer::Impl::StepGrads(
    const StepOptions& opt, const std::vector<uint8_t>& active) const {
  if (!opt.grads.empty() && opt.grads.size() != specs_.size())
    Invalid("StepOptions::grads has " + std::to_string(opt.grads.size()) + " entries for " +
            std::to_string(specs_.size()) + " tensors");
  std::vector<const void*> grads(specs_.size());
  for (size_t t = 0; t < specs_.size(); ++t) {
    const void* given = opt.grads.empty() ? nullptr : opt.grads[t];
    grads[t] = grads_.ready[t] != 0 ? grads_.current[t] : specs_[t].grad;
    if (given == nullptr) continue;
    if (grads_.ready[t] != 0 && given != grads_.current[t])
      Invalid("tensor " + std::to_string(t) + " '" + specs_[t].name +
              "': StepOptions::grads hands another gradient than GradReady was given in this "
              "step");
    grads[t] = given;
    if (active[t] != 0 && given != grads_.checked[t]) CheckGrad(t, given, "StepOptions::grads");
  }
  return grads;
}

void HybridOptimizer::Impl::UseGrad(size_t t, const void* grad) {
  if (grads_.used[t] == grad) return;
  prepass_->SetGrad(t, grad);
  for (const auto& e : executors_.all()) e->SetGrad(t, grad);
  grads_.used[t] = grad;
  grads_.checked[t] = grad;
}

// Note [Scalar index] (engine/step_scalars.h): torch.optim keeps one step count per
// parameter, so one step may update tensors whose bias corrections differ. Each distinct
// (group, tensor step + 1) of the step's active tensors gets one StepScalars entry, in
// tensor order, from that group's learning rate and hyper-parameters.
void HybridOptimizer::Impl::AssignScalars(const std::vector<uint8_t>& active,
                                          const std::vector<double>& lrs,
                                          const std::vector<HyperParams>& hyper, double grad_mul,
                                          std::vector<StepScalars>* scalars,
                                          std::vector<uint32_t>* scalar_index) const {
  scalars->clear();
  scalar_index->assign(specs_.size(), kSkipScalarIndex);
  std::vector<std::pair<uint32_t, int64_t>> keys;
  for (size_t t = 0; t < specs_.size(); ++t) {
    if (!active.empty() && active[t] == 0) continue;
    const std::pair<uint32_t, int64_t> key{specs_[t].group, steps_.tensor[t] + 1};
    size_t k = 0;
    while (k < keys.size() && keys[k] != key) ++k;
    if (k == keys.size()) {
      keys.push_back(key);
      scalars->push_back(
          GroupStepScalars(cfg_.algorithm, hyper[key.first], lrs[key.first], key.second, grad_mul));
    }
    (*scalar_index)[t] = static_cast<uint32_t>(k);
  }
}

StepResult HybridOptimizer::Impl::Step(std::span<const double> group_lrs, const double* one_lr,
                                       const StepOptions& opt) {
  const auto t0 = Clock::now();
  // Whatever way this call ends, the early start of the step ends with it; a speculation
  // not committed below is rolled back (Note [Speculate, then commit or roll back]).
  struct EndOfStep {
    Impl* self;
    ~EndOfStep() { self->EndEarlyStart(); }
  } end_of_step{this};
  // Every argument is checked before anything changes.
  const std::vector<double> lrs = one_lr != nullptr ? OneLr(*one_lr) : GroupLrs(group_lrs);
  ValidateStepArgs(opt);
  const std::vector<HyperParams> hyper = StepHyper(opt);
  if (!opt.active.empty() && opt.active.size() != specs_.size())
    Invalid("StepOptions::active has " + std::to_string(opt.active.size()) + " entries for " +
            std::to_string(specs_.size()) + " tensors");
  if (begun_.on && (lrs != begun_.lrs || opt.max_grad_norm != begun_.clip ||
                    opt.loss_scale != begun_.loss_scale || hyper != begun_.hyper))
    Invalid("Step(" + Describe(lrs, opt.max_grad_norm, opt.loss_scale) +
            (hyper != begun_.hyper ? ", other hyper-parameters" : "") +
            ") does not match BeginStep(" + Describe(begun_.lrs, begun_.clip, begun_.loss_scale) +
            "); the speculative update was undone, nothing changed: call Step again");
  std::vector<uint8_t> active(specs_.size(), 1);
  for (size_t t = 0; t < opt.active.size(); ++t) active[t] = opt.active[t] != 0 ? 1 : 0;
  const std::vector<const void*> grads = StepGrads(opt, active);
  // The step's times, kept as the last step's however the call ends.
  struct KeepTimes {
    Times* cell;
    StageTimes times;
    ~KeepTimes() {
      std::lock_guard<std::mutex> lock(cell->mu);
      cell->last = times;
    }
  } kept{&times_, {}};
  StageTimes& times = kept.times;
  times.handover_ms = grads_.handover_ms;
  for (size_t t = 0; t < specs_.size(); ++t)
    if (active[t] != 0) UseGrad(t, grads[t]);

  // 1. Pre-pass over the gradient of every active tensor, hot and offloaded, before any
  // update; the partials of the tensors handed to GradReady come from there (GPU mode:
  // the caller's stream waits for early start's work first).
  if (gpu() &&
      std::any_of(grads_.ready.begin(), grads_.ready.end(), [](uint8_t r) { return r != 0; }))
    fences_->CallerWaitsForWork();
  times.speculation_stopped = begun_.stopped;
  offload::NormResult norm = prepass_->Run(active, &times);
  // Sharded training: the whole model's statistics, from every process's partials (the
  // collective overlaps the speculation's last chunks).
  if (opt.combine_grad_stats)
    norm = offload::FromGradStats(opt.combine_grad_stats(offload::ToGradStats(norm)));
  // The speculation (if any) has had all of backward; its last chunks overlapped the
  // pre-pass. A chunk that failed fails the step, which EndOfStep rolls back.
  if (begun_.on) {
    std::exception_ptr failed;
    for (offload::Speculative* e : executors_.speculative()) {
      try {
        e->AwaitSpeculation(&times);
      } catch (...) {
        if (!failed) failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
  }
  StepResult result;
  result.step = steps_.applied;
  result.grad_norm = std::sqrt(norm.sum_squares) / opt.loss_scale;
  if (norm.nonfinite || !std::isfinite(result.grad_norm)) {
    result.applied = false;
    result.grad_norm = std::numeric_limits<double>::infinity();
    if (begun_.on)
      for (offload::Speculative* e : executors_.speculative()) e->RollBackSpeculation(&times);
    cfg_.groups = hyper;  // in force once Step returns, applied or skipped
    times.step_ms = MsSince(t0);
    return result;
  }
  const double clip = ClipCoefficient(result.grad_norm, opt);
  const double grad_mul = clip / opt.loss_scale;
  if (begun_.on) {
    // Kept when clipping does not trigger and no chunk was speculated for a tensor this
    // step leaves out; otherwise the speculation assumed the wrong step: undone, and the
    // executors step every chunk (from the gradients already on the host).
    bool keep = clip == 1.0;
    for (offload::Speculative* e : executors_.speculative())
      keep = keep && e->SpeculatedActiveOnly(active);
    for (offload::Speculative* e : executors_.speculative())
      keep ? e->CommitSpeculation(&times) : e->RollBackSpeculation(&times);
  }
  // 2. The scalars (Note [Scalar index]), validated before anything is written.
  std::vector<StepScalars> scalars;
  std::vector<uint32_t> scalar_index;
  AssignScalars(active, lrs, hyper, grad_mul, &scalars, &scalar_index);

  // 3. The executors (Note [Executors], offload/executors/executor.h): every one launched,
  // then those the caller's stream joins finished; on a failure they are abandoned (what
  // they queued still orders the caller's stream).
  const offload::StepWork work{&scalars, &scalar_index, &times, prepass_->done_event()};
  try {
    for (const auto& e : executors_.all()) e->Launch(work);
    for (offload::Joined* e : executors_.joined()) e->Finish();
  } catch (...) {
    for (offload::Joined* e : executors_.joined()) e->Abandon();
    if (gpu()) fences_->StepQueued();
    throw;
  }
  if (gpu()) fences_->StepQueued();  // the next step's early work comes after these reads
  ++steps_.applied;
  cfg_.groups = hyper;
  for (size_t t = 0; t < specs_.size(); ++t)
    if (scalar_index[t] != kSkipScalarIndex) {
      ++steps_.tensor[t];
      ++result.stepped_tensors;
    }
  result.applied = true;
  result.step = steps_.applied;
  times.step_ms = MsSince(t0);
  return result;
}

int64_t HybridOptimizer::Impl::tensor_step_count(size_t i) const {
  if (i >= specs_.size())
    throw Error(ErrorKind::kInvalidArgument, "tensor_step_count: tensor index " +
                                                 std::to_string(i) + " of " +
                                                 std::to_string(specs_.size()));
  return steps_.tensor[i];
}

void HybridOptimizer::Impl::SetHyperParams(size_t g, const HyperParams& h) {
  RequireNoBegunStep("SetHyperParams");
  if (g >= cfg_.groups.size())
    throw Error(ErrorKind::kInvalidArgument, "SetHyperParams: group " + std::to_string(g) + " of " +
                                                 std::to_string(cfg_.groups.size()));
  ValidateHyperParams(cfg_.algorithm, h, "group " + std::to_string(g));
  if (HasMomentum(cfg_.algorithm, h) != HasMomentum(cfg_.algorithm, cfg_.groups[g]))
    throw Error(ErrorKind::kInvalidArgument,
                "group " + std::to_string(g) +
                    ": momentum cannot be switched between zero and non-zero after "
                    "construction (it decides whether a momentum buffer exists)");
  cfg_.groups[g] = h;
}

const HyperParams& HybridOptimizer::Impl::hyper_params(size_t g) const {
  if (g >= cfg_.groups.size())
    throw Error(ErrorKind::kInvalidArgument, "hyper_params: group " + std::to_string(g) + " of " +
                                                 std::to_string(cfg_.groups.size()));
  return cfg_.groups[g];
}

StageTimes HybridOptimizer::Impl::last_step_times() const {
  std::lock_guard<std::mutex> lock(times_.mu);
  prepass_->ReadTimes(&times_.last);
  for (offload::DeviceTimed* e : executors_.device_timed()) e->ReadTimes(&times_.last);
  return times_.last;
}

void HybridOptimizer::Impl::WaitParam(size_t i, void* stream) const {
  if (i >= specs_.size())
    Invalid("WaitParam: tensor index " + std::to_string(i) + " of " +
            std::to_string(specs_.size()));
  if (!gpu()) return;
  for (offload::StreamOrdered* e : executors_.stream_ordered()) e->WaitParam(i, stream);
}

// Note [Gradient reads] (tandem/optimizer.h): once Step returned, the reads of a tensor's
// gradient that may still run on the device are the GPU-resident kernel (on cuda_stream)
// and its streamed chunks' kernels; the downloads of its host-computed chunks completed
// before Step returned (the pipeline waited for each). With release_grads, the reads of a
// gradient handed to GradReady are those GradReady enqueued (Note [Gradient release]).
void HybridOptimizer::Impl::WaitGradConsumed(size_t i, void* stream) const {
  if (i >= specs_.size())
    Invalid("WaitGradConsumed: tensor index " + std::to_string(i) + " of " +
            std::to_string(specs_.size()));
  const bool released = cfg_.release_grads && grads_.ready[i] != 0;
  if ((begun_.on || grads_.ready[i] != 0) && !released)
    Invalid("WaitGradConsumed: tensor " + std::to_string(i) + " '" + specs_[i].name +
            "': a step is under way (BeginStep or GradReady since the last Step); the coming "
            "Step's pre-pass still reads the gradient: call it after that Step (or, with "
            "release_grads, after GradReady of the tensor)");
  if (released) {
    if (gpu())
      fences_->WaitConsumed(i, stream);
    else
      for (offload::Queued* e : executors_.queued()) e->WaitGradReads(i, nullptr);
    return;
  }
  if (!gpu()) return;
  for (offload::StreamOrdered* e : executors_.stream_ordered()) e->WaitGradConsumed(i, stream);
  if (cfg_.release_grads) fences_->WaitConsumed(i, stream);  // a release of the last step
}

}  // namespace tandem
