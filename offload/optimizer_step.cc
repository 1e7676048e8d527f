// HybridOptimizer: the step (pre-pass, hot launch, offload pipeline), early start,
// per-group hyper-parameters and stage timings.
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <string>
#include <utility>

#include "offload/grad_stats.h"
#include "offload/optimizer_impl.h"
#include "tandem/error.h"

namespace tandem {

using Clock = std::chrono::steady_clock;
using offload::MemKind;

// ---------------------------------------------------------------------------------------
// The step

namespace {
// The clip coefficient min(1, max_grad_norm / (norm + 1e-6)) where clipping triggers; 1.0
// exactly otherwise (what the speculation of BeginStep assumes).
double ClipCoefficient(double grad_norm, const StepOptions& opt) {
  if (opt.max_grad_norm > 0 && grad_norm > opt.max_grad_norm)
    return opt.max_grad_norm / (grad_norm + 1e-6);
  return 1.0;
}

std::string Describe(double lr, const StepOptions& o) {
  return "lr " + std::to_string(lr) + ", max_grad_norm " + std::to_string(o.max_grad_norm) +
         ", loss_scale " + std::to_string(o.loss_scale);
}
}  // namespace

void ValidateStepArgs(double lr, const StepOptions& opt) {
  if (!std::isfinite(lr) || lr < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "learning rate must be finite and >= 0, got " + std::to_string(lr));
  if (!std::isfinite(opt.loss_scale) || opt.loss_scale <= 0)
    throw Error(ErrorKind::kInvalidArgument,
                "loss_scale must be finite and > 0, got " + std::to_string(opt.loss_scale));
  if (!std::isfinite(opt.max_grad_norm) || opt.max_grad_norm < 0)
    throw Error(ErrorKind::kInvalidArgument, "max_grad_norm must be finite and >= 0, got " +
                                                 std::to_string(opt.max_grad_norm));
}

// Note [Scalar slots]: torch.optim keeps one step count per parameter, so one step may
// update tensors whose bias corrections differ. Each distinct (group, tensor step + 1) of
// the step's active tensors gets one StepScalars slot, in tensor order (deterministic);
// a tensor left out of the step gets GpuSide::kSkip. The usual step has one slot per
// group. The same (group, step) gives the same floats wherever it is computed, which is
// what lets the speculation's slots (BeginStep) and Step's agree.
void HybridOptimizer::Impl::AssignSlots(const std::vector<uint8_t>& active, double lr,
                                        double grad_mul, std::vector<StepScalars>* scalars,
                                        std::vector<uint32_t>* slot_of_tensor) const {
  scalars->clear();
  slot_of_tensor->assign(specs_.size(), offload::GpuSide::kSkip);
  std::vector<std::pair<uint32_t, int64_t>> keys;
  for (size_t t = 0; t < specs_.size(); ++t) {
    if (!active.empty() && active[t] == 0) continue;
    const std::pair<uint32_t, int64_t> key{specs_[t].group, tensor_step_[t] + 1};
    size_t k = 0;
    while (k < keys.size() && keys[k] != key) ++k;
    if (k == keys.size()) {
      keys.push_back(key);
      scalars->push_back(ComputeStepScalars(cfg_.algorithm, cfg_.groups[key.first], lr,
                                            key.second, grad_mul));
    }
    (*slot_of_tensor)[t] = static_cast<uint32_t>(k);
  }
}

StepResult HybridOptimizer::Impl::Step(double lr, const StepOptions& opt) {
  const auto t0 = Clock::now();
  // Whatever way this call ends, the early start of the step ends with it; a speculation
  // not committed below is rolled back (Note [Speculate, then commit or roll back]).
  struct EndOfStep {
    Impl* self;
    ~EndOfStep() { self->EndEarlyStart(); }
  } end_of_step{this};
  ValidateStepArgs(lr, opt);
  if (!opt.active.empty() && opt.active.size() != specs_.size())
    throw Error(ErrorKind::kInvalidArgument,
                "StepOptions::active has " + std::to_string(opt.active.size()) +
                    " entries for " + std::to_string(specs_.size()) + " tensors");
  if (begun_ && (lr != begun_lr_ || opt.max_grad_norm != begun_opt_.max_grad_norm ||
                 opt.loss_scale != begun_opt_.loss_scale))
    throw Error(ErrorKind::kInvalidArgument,
                "Step(" + Describe(lr, opt) + ") does not match BeginStep(" +
                    Describe(begun_lr_, begun_opt_) +
                    "); the speculative update was undone, nothing changed: call Step again");
  times_ = {};
  active_.assign(specs_.size(), 1);
  for (size_t t = 0; t < opt.active.size(); ++t) active_[t] = opt.active[t] != 0 ? 1 : 0;
  // 1. Pre-pass over the gradient of every active tensor, hot and offloaded, before any
  // update.
  offload::NormResult norm;
  if (gpu()) {
    norm = gpu_->Prepass(active_);
  } else {
    const auto p0 = Clock::now();
    std::vector<offload::HostGrad> grads;
    for (size_t t = 0; t < specs_.size(); ++t)
      grads.push_back({specs_[t].grad, active_[t] != 0 ? specs_[t].numel : 0,
                       specs_[t].grad_dtype, offload::NormRun(specs_[t])});
    driver_.Execute([&] { norm = offload::HostGradNorm(grads); });
    times_.prepass_ms = std::chrono::duration<double, std::milli>(Clock::now() - p0).count();
  }
  // Sharded training: the whole model's statistics, from every process's partials (the
  // collective overlaps the speculation's last chunks).
  if (opt.combine_grad_stats)
    norm = offload::FromGradStats(opt.combine_grad_stats(offload::ToGradStats(norm)));
  // The speculation (if any) has had all of backward; its last chunks overlapped the
  // pre-pass. A chunk that failed fails the step, which EndOfStep rolls back.
  const bool speculating = begun_ && speculator_ != nullptr;
  if (speculating) {
    const std::exception_ptr err = speculator_->WaitIdle();
    times_.speculative_host_ms = speculator_->busy_ms();
    if (err) std::rethrow_exception(err);
  }
  const bool stream_speculating = begun_ && stream_spec_ != nullptr;
  if (stream_speculating && stream_spec_->error()) std::rethrow_exception(stream_spec_->error());
  StepResult result;
  result.step = step_;
  result.grad_norm = std::sqrt(norm.sum_squares) / opt.loss_scale;
  if (norm.nonfinite || !std::isfinite(result.grad_norm)) {
    result.applied = false;
    if (!std::isfinite(result.grad_norm) || norm.nonfinite)
      result.grad_norm = std::numeric_limits<double>::infinity();
    if (speculating) times_.rolled_back_chunks = speculator_->Rollback();
    if (stream_speculating) times_.rolled_back_stream_chunks = stream_spec_->Rollback();
    times_.step_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return result;
  }
  const double clip = ClipCoefficient(result.grad_norm, opt);
  const double grad_mul = clip / opt.loss_scale;
  if (speculating || stream_speculating) {
    // A chunk speculated on for a tensor that this step leaves out was stepped wrongly.
    bool all_active = !stream_speculating || stream_spec_->AllActive(active_);
    if (speculating)
      for (size_t c = 0; c < chunks_.size(); ++c)
        if (speculator_->stepped(c) && active_[chunks_[c].tensor] == 0) all_active = false;
    if (clip == 1.0 && all_active) {
      // Commit: the speculated chunks keep their update; only their uploads (host
      // pipeline) or their parameter copies (streamed) remain.
      if (speculating) {
        spec_commit_ = true;
        for (size_t c = 0; c < chunks_.size(); ++c) {
          chunks_[c].stepped = speculator_->stepped(c);
          chunks_[c].host_param = speculator_->hold(c);
          times_.speculated_chunks += chunks_[c].stepped ? 1 : 0;
        }
      }
      if (stream_speculating) {
        stream_commit_ = true;
        times_.speculated_stream_chunks = stream_spec_->speculated_count();
      }
    } else {
      // Clipping (or a tensor left out): the speculation assumed the wrong step. Undo it;
      // the normal path below steps every chunk (from the gradients already on the host).
      if (speculating) times_.rolled_back_chunks = speculator_->Rollback();
      if (stream_speculating) times_.rolled_back_stream_chunks = stream_spec_->Rollback();
    }
  }
  // 2. Scalar slots (Note [Scalar slots]), validated before anything is written.
  AssignSlots(active_, lr, grad_mul, &scalars_, &slot_);
  for (const offload::OffloadChunk& c : chunks_)
    if (c.stepped && slot_[c.tensor] == offload::GpuSide::kSkip)
      throw Error(ErrorKind::kInternal, "a committed chunk belongs to an inactive tensor");

  // 3. The executors (Note [Executors], offload/executor.h): every one launched, then
  // every one finished; on a failure, the one that failed and those before it are
  // abandoned (their queued work still orders the caller's stream).
  const offload::StepWork work{&scalars_, &slot_, &times_,
                               stream_commit_ ? &stream_spec_->speculated() : nullptr};
  size_t launched = 0;
  try {
    for (; launched < executors_.size(); ++launched) executors_[launched]->Launch(work);
    for (const auto& e : executors_) e->Finish();
  } catch (...) {
    for (size_t i = 0; i <= launched && i < executors_.size(); ++i) executors_[i]->Abandon();
    throw;
  }
  ++step_;
  for (size_t t = 0; t < specs_.size(); ++t)
    if (slot_[t] != offload::GpuSide::kSkip) {
      ++tensor_step_[t];
      ++result.stepped_tensors;
    }
  result.applied = true;
  result.step = step_;
  times_.step_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return result;
}

// The host-offload executor: every host-computed chunk through the pipeline (gradient
// down, host kernels, parameter up), chunks already downloaded by early start from the
// early-start buffer, chunks committed by the speculation only uploaded.
void HybridOptimizer::Impl::RunOffload(const offload::StepWork& w) {
  const std::vector<uint32_t>& slot = *w.slot_of_tensor;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    offload::OffloadChunk& c = chunks_[i];
    c.host_grad = nullptr;
    c.skip = slot[c.tensor] == offload::GpuSide::kSkip;
    c.scalar_index = c.skip ? 0 : slot[c.tensor];
    if (!c.skip && !c.stepped && chunk_ticket_[i] != 0) {
      transport_->Wait(chunk_ticket_[i]);
      c.host_grad = EarlyGrad(i);
    }
  }
  offload::PipelineTimes pt;
  cpu::HostDriver& drv = driver_;
  pipeline_->Run(
      chunks_, w.scalars->data(),
      [&drv](const StepScalars& s, const StepSpan& span) {
        const cpu::HostWork hw{&s, span};
        drv.Run(&hw, 1);
      },
      &last_upload_, &pt);
  w.times->d2h_ms = pt.d2h_ms;
  w.times->host_update_ms = pt.host_ms;
  w.times->h2d_ms = pt.h2d_ms;
  w.times->chunks = chunks_.size();
}

int64_t HybridOptimizer::Impl::tensor_step_count(size_t i) const {
  if (i >= specs_.size())
    throw Error(ErrorKind::kInvalidArgument, "tensor_step_count: tensor index " +
                                                 std::to_string(i) + " of " +
                                                 std::to_string(specs_.size()));
  return tensor_step_[i];
}

void HybridOptimizer::Impl::SetHyperParams(size_t g, const HyperParams& h) {
  RequireNoBegunStep("SetHyperParams");
  if (g >= cfg_.groups.size())
    throw Error(ErrorKind::kInvalidArgument, "SetHyperParams: group " + std::to_string(g) +
                                                 " of " + std::to_string(cfg_.groups.size()));
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
    throw Error(ErrorKind::kInvalidArgument, "hyper_params: group " + std::to_string(g) +
                                                 " of " + std::to_string(cfg_.groups.size()));
  return cfg_.groups[g];
}

StageTimes HybridOptimizer::Impl::last_step_times() {
  for (const auto& e : executors_) e->ReadTimes(&times_);
  return times_;
}

void HybridOptimizer::Impl::WaitParam(size_t i, void* stream) const {
  if (i >= specs_.size())
    throw Error(ErrorKind::kInvalidArgument, "WaitParam: tensor index " + std::to_string(i) +
                                                 " of " + std::to_string(specs_.size()));
  if (!gpu()) return;
  for (const auto& e : executors_) e->WaitParam(i, stream);
}



}  // namespace tandem
