// The GPU-resident executor (GPU mode, CUDA): offload/executors/resident.h. The hot spans
// are stepped by one fused launch per format set on the caller's stream, timed by two
// events; the plans' span tables follow the gradients handed per step.
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <utility>

#include "cuda/cuda_check.h"
#include "offload/executors/resident.h"
#include "offload/executors/roles.h"
#include "offload/gpu/format_plans.h"

namespace tandem::offload {
namespace {

class GpuResident final : public Executor, public StreamOrdered, public DeviceTimed {
 public:
  GpuResident(ResidentSetup setup, void* stream, int reserve_sms)
      : release_(!setup.grad_off.empty()),
        memory_(setup.device_memory),
        state_(std::move(setup), /*on_device=*/true),
        stream_(static_cast<cudaStream_t>(stream)),
        reserve_sms_(reserve_sms) {
    std::vector<uint64_t> offsets(state_.spans().size(), 0);  // a span starts at element 0
    plans_ = std::make_unique<FormatPlans>(memory_, state_.algorithm(), state_.spans(),
                                           state_.span_tensor(), offsets);
    for (cudaEvent_t& e : ev_) TANDEM_CUDA(cudaEventCreate(&e), "(hot step timing events)");
  }
  ~GpuResident() override {
    plans_.reset();
    for (cudaEvent_t e : ev_)
      if (e != nullptr) cudaEventDestroy(e);
  }
  const char* name() const override { return "GPU-resident"; }
  Roles roles() override { return {.stream_ordered = this, .device_timed = this}; }

  void AddMemory(MemoryReport* r) const override {
    state_.AddMemory(r);
    r->device.metadata += plans_->device_bytes();
  }
  void AddInitRegions(std::vector<InitRegion>* regions) const override {
    state_.AddInitRegions(regions);
  }
  void VisitParts(size_t t, const PartVisitor& visit) const override {
    state_.VisitParts(t, visit);
  }
  bool MasterIsParam(size_t t) const override { return state_.MasterIsParam(t); }
  void SetGrad(size_t t, const void* grad) override { plans_->SetGrad(t, state_.SetGrad(t, grad)); }
  // Gradient release: the resident part's gradients into the gradient buffer, on the work
  // stream (after the ready mark; the consumed event follows it).
  void GradReady(size_t t, bool, const std::vector<uint8_t>&, const GradMark& mark) override {
    if (!release_) return;
    const ResidentState::Copy c = state_.Release(t);
    if (c.bytes == 0) return;
    plans_->SetGrad(t, c.dst);
    TANDEM_CUDA(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDeviceToDevice,
                                static_cast<cudaStream_t>(mark.work_stream)),
                "(gradient release: tensor " + std::to_string(t) + "'s GPU-resident gradients)");
  }
  void EndEarlyStart() noexcept override {
    state_.EndRelease([this](size_t t, const void* grad) { plans_->SetGrad(t, grad); });
  }

  // On the caller's stream: nothing to finish. With streamed chunks the launch leaves a
  // few SMs to their kernels: holding every SM, it would stall the first chunks' kernels,
  // then (K slots) their copies.
  void Launch(const StepWork& w) override {
    TANDEM_CUDA(cudaEventRecord(ev_[0], stream_), "(hot step start)");
    plans_->Launch(*w.scalars, *w.scalar_index, stream_, reserve_sms_);
    TANDEM_CUDA(cudaEventRecord(ev_[1], stream_), "(hot step end)");
    launched_ = timed_ = true;
  }
  // The hot kernel writes the parameters and reads the gradients (after the pre-pass,
  // on the same stream).
  void WaitParam(size_t t, void* stream) const override {
    if (!launched_ || !state_.has(t)) return;
    TANDEM_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), ev_[1], 0),
                "(waiting for the hot step)");
  }
  void WaitGradConsumed(size_t t, void* stream) const override { WaitParam(t, stream); }
  void ReadTimes(StageTimes* times) override {
    if (!timed_) return;
    float ms = 0;
    TANDEM_CUDA(cudaEventSynchronize(ev_[1]), "(reading step timings)");
    if (cudaEventElapsedTime(&ms, ev_[0], ev_[1]) == cudaSuccess) times->gpu_update_ms = ms;
    timed_ = false;
  }

 private:
  bool release_;
  DeviceAllocator* memory_;  // the plans' tables come from it
  ResidentState state_;
  cudaStream_t stream_;
  int reserve_sms_;
  std::unique_ptr<FormatPlans> plans_;
  cudaEvent_t ev_[2] = {nullptr, nullptr};  // hot step start, end
  bool launched_ = false, timed_ = false;
};

}  // namespace

std::unique_ptr<Executor> MakeGpuResident(ResidentSetup setup, void* stream, int reserve_sms) {
  return std::make_unique<GpuResident>(std::move(setup), stream, reserve_sms);
}

}  // namespace tandem::offload
