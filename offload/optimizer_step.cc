// HybridOptimizer: the step (pre-pass, hot launch, offload pipeline), early start,
// per-group hyper-parameters and stage timings.
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <string>

#include "offload/host_norm.h"
#include "offload/cuda_check.h"
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

StepResult HybridOptimizer::Impl::Step(double lr, const StepOptions& opt) {
  const auto t0 = Clock::now();
  // Whatever way this call ends, the early start of the step ends with it; a speculation
  // not committed below is rolled back (Note [Speculate, then commit or roll back]).
  struct EndOfStep {
    Impl* self;
    ~EndOfStep() { self->EndEarlyStart(); }
  } end_of_step{this};
  ValidateStepArgs(lr, opt);
  if (begun_ && (lr != begun_lr_ || opt.max_grad_norm != begun_opt_.max_grad_norm ||
                 opt.loss_scale != begun_opt_.loss_scale))
    throw Error(ErrorKind::kInvalidArgument,
                "Step(" + Describe(lr, opt) + ") does not match BeginStep(" +
                    Describe(begun_lr_, begun_opt_) +
                    "); the speculative update was undone, nothing changed: call Step again");
  times_ = {};
  // 1. Pre-pass over every gradient, hot and offloaded, before any update.
  offload::NormResult norm;
  if (gpu()) {
    TANDEM_CUDA(cudaEventRecord(ev_[0], stream()), "(prepass start)");
    norm_plan_->Launch(cfg_.cuda_stream);
    TANDEM_CUDA(cudaEventRecord(ev_[1], stream()), "(prepass end)");
    TANDEM_CUDA(cudaEventSynchronize(ev_[1]), "(waiting for the gradient pre-pass)");
    const gpu::GradNormPlan::Result r = norm_plan_->Read();
    norm.sum_squares = r.sum_squares;
    norm.nonfinite = r.nonfinite;
  } else {
    const auto p0 = Clock::now();
    std::vector<offload::HostGrad> grads;
    for (const TensorSpec& s : specs_) grads.push_back({s.grad, s.numel, s.grad_dtype});
    norm = offload::HostGradNorm(grads);
    times_.prepass_ms = std::chrono::duration<double, std::milli>(Clock::now() - p0).count();
  }
  // The speculation (if any) has had all of backward; its last chunks overlapped the
  // pre-pass. A chunk that failed fails the step, which EndOfStep rolls back.
  const bool speculating = begun_ && speculator_ != nullptr;
  if (speculating) {
    const std::exception_ptr err = speculator_->WaitIdle();
    times_.speculative_host_ms = speculator_->busy_ms();
    if (err) std::rethrow_exception(err);
  }
  StepResult result;
  result.step = step_;
  result.grad_norm = std::sqrt(norm.sum_squares) / opt.loss_scale;
  if (norm.nonfinite || !std::isfinite(result.grad_norm)) {
    result.applied = false;
    if (!std::isfinite(result.grad_norm) || norm.nonfinite)
      result.grad_norm = std::numeric_limits<double>::infinity();
    if (speculating) times_.rolled_back_chunks = speculator_->Rollback();
    times_.step_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return result;
  }
  const double clip = ClipCoefficient(result.grad_norm, opt);
  const double grad_mul = clip / opt.loss_scale;
  if (speculating) {
    if (clip == 1.0) {
      // Commit: the speculated chunks keep their update; only their uploads remain.
      spec_commit_ = true;
      for (size_t c = 0; c < chunks_.size(); ++c) {
        chunks_[c].stepped = speculator_->stepped(c);
        chunks_[c].host_param = speculator_->hold(c);
        times_.speculated_chunks += chunks_[c].stepped ? 1 : 0;
      }
    } else {
      // Clipping: the speculation assumed the wrong multiplier. Undo it; the normal path
      // below steps every chunk (from the gradients already on the host).
      times_.rolled_back_chunks = speculator_->Rollback();
    }
  }
  // 2. Per-group scalars, validated before anything is written.
  for (size_t g = 0; g < cfg_.groups.size(); ++g)
    scalars_[g] = ComputeStepScalars(cfg_.algorithm, cfg_.groups[g], lr, step_ + 1, grad_mul);

  // 3. Hot elements: one fused launch (GPU) or one driver run (host).
  if (gpu()) {
    TANDEM_CUDA(cudaEventRecord(ev_[2], stream()), "(hot step start)");
    if (hot_plan_) hot_plan_->Launch(scalars_.data(), scalars_.size(), cfg_.cuda_stream);
    TANDEM_CUDA(cudaEventRecord(ev_[3], stream()), "(hot step end)");
    times_pending_gpu_ = true;
  } else if (!hot_work_.empty()) {
    const auto h0 = Clock::now();
    for (size_t i = 0; i < hot_work_.size(); ++i) hot_work_[i].scalars = &scalars_[hot_index_[i]];
    driver_.Run(hot_work_.data(), hot_work_.size());
    times_.gpu_update_ms = std::chrono::duration<double, std::milli>(Clock::now() - h0).count();
  }

  // 4. Offloaded elements through the pipeline, overlapping the hot step.
  if (pipeline_) {
    for (size_t i = 0; i < chunks_.size(); ++i) {
      offload::OffloadChunk& c = chunks_[i];
      c.host_grad = nullptr;
      if (!c.stepped && chunk_ticket_[i] != 0) {
        transport_->Wait(chunk_ticket_[i]);
        c.host_grad = EarlyGrad(i);
      }
    }
    offload::PipelineTimes pt;
    cpu::HostDriver& drv = driver_;
    pipeline_->Run(
        chunks_, scalars_.data(),
        [&drv](const StepScalars& s, const StepSpan& span) {
          const cpu::HostWork w{&s, span};
          drv.Run(&w, 1);
        },
        &last_upload_, &pt);
    times_.d2h_ms = pt.d2h_ms;
    times_.host_update_ms = pt.host_ms;
    times_.h2d_ms = pt.h2d_ms;
    times_.chunks = chunks_.size();
  }
  ++step_;
  result.applied = true;
  result.step = step_;
  times_.step_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return result;
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
  if (gpu() && times_pending_gpu_) {
    float ms = 0;
    TANDEM_CUDA(cudaEventSynchronize(ev_[3]), "(reading step timings)");
    if (cudaEventElapsedTime(&ms, ev_[0], ev_[1]) == cudaSuccess) times_.prepass_ms = ms;
    if (cudaEventElapsedTime(&ms, ev_[2], ev_[3]) == cudaSuccess) times_.gpu_update_ms = ms;
    times_pending_gpu_ = false;
  }
  return times_;
}

void HybridOptimizer::Impl::WaitParam(size_t i, void* stream) const {
  if (i >= specs_.size())
    throw Error(ErrorKind::kInvalidArgument, "WaitParam: tensor index " + std::to_string(i) +
                                                 " of " + std::to_string(specs_.size()));
  if (!gpu()) return;
  if (placement_.tensors[i].device_count > 0 && step_ > 0)
    TANDEM_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), ev_[3], 0),
                "(waiting for the hot step of tensor '" + specs_[i].name + "')");
  if (last_upload_[i] != 0) transport_->StreamWaitFor(last_upload_[i], stream);
}



}  // namespace tandem
