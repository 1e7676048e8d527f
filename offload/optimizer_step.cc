// HybridOptimizer: the step (pre-pass, hot launch, offload pipeline), early start,
// per-group hyper-parameters and stage timings.
#include <chrono>
#include <cmath>
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

StepResult HybridOptimizer::Impl::Step(double lr, const StepOptions& opt) {
  const auto t0 = Clock::now();
  if (!std::isfinite(opt.loss_scale) || opt.loss_scale <= 0)
    throw Error(ErrorKind::kInvalidArgument,
                "loss_scale must be finite and > 0, got " + std::to_string(opt.loss_scale));
  if (!std::isfinite(opt.max_grad_norm) || opt.max_grad_norm < 0)
    throw Error(ErrorKind::kInvalidArgument, "max_grad_norm must be finite and >= 0, got " +
                                                 std::to_string(opt.max_grad_norm));
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
  StepResult result;
  result.step = step_;
  result.grad_norm = std::sqrt(norm.sum_squares) / opt.loss_scale;
  if (norm.nonfinite || !std::isfinite(result.grad_norm)) {
    result.applied = false;
    if (!std::isfinite(result.grad_norm) || norm.nonfinite)
      result.grad_norm = std::numeric_limits<double>::infinity();
    early_ticket_.assign(specs_.size(), 0);
    times_.step_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return result;
  }
  double clip = 1.0;
  if (opt.max_grad_norm > 0 && result.grad_norm > opt.max_grad_norm)
    clip = opt.max_grad_norm / (result.grad_norm + 1e-6);
  const double grad_mul = clip / opt.loss_scale;
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
    for (offload::OffloadChunk& c : chunks_) {
      const offload::Ticket et = early_ticket_[c.tensor];
      c.host_grad = nullptr;
      if (et != 0) {
        transport_->Wait(et);
        c.host_grad = early_grad_for(c);
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
  early_ticket_.assign(specs_.size(), 0);
  ++step_;
  result.applied = true;
  result.step = step_;
  times_.step_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return result;
}

void HybridOptimizer::Impl::SetHyperParams(size_t g, const HyperParams& h) {
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

// Early start: the tensor's offloaded gradients go down into a full-size buffer as soon as
// backward produced them; Step then finds them on the host.
void HybridOptimizer::Impl::GradReady(size_t i) {
  if (i >= specs_.size())
    throw Error(ErrorKind::kInvalidArgument, "GradReady: tensor index " + std::to_string(i) +
                                                 " of " + std::to_string(specs_.size()));
  const offload::Part& p = cold_.part(i);
  if (!pipeline_ || p.count == 0 || early_ticket_[i] != 0) return;
  if (early_offset_.empty()) {
    offload::SlabLayout l;
    early_offset_.assign(specs_.size(), 0);
    for (size_t t = 0; t < specs_.size(); ++t)
      early_offset_[t] = l.Add(cold_.part(t).count * DTypeSize(specs_[t].grad_dtype));
    early_slab_ = offload::Slab(gpu() ? MemKind::kPinned : MemKind::kHost, l.total(),
                                "early-start gradient buffer");
    report_.host.staging += l.total();
  }
  const size_t gsz = DTypeSize(specs_[i].grad_dtype);
  transport_->DownloadsAfterComputeStream();
  early_ticket_[i] = transport_->Download(
      early_slab_.data() + early_offset_[i],
      static_cast<const uint8_t*>(specs_[i].grad) + p.offset * gsz, p.count * gsz);
}

const void* HybridOptimizer::Impl::early_grad_for(const offload::OffloadChunk& c) const {
  const size_t gsz = DTypeSize(specs_[c.tensor].grad_dtype);
  const uint8_t* part_start =
      static_cast<const uint8_t*>(specs_[c.tensor].grad) + cold_.part(c.tensor).offset * gsz;
  return early_slab_.data() + early_offset_[c.tensor] +
         (static_cast<const uint8_t*>(c.device_grad) - part_start);
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
