// The GPU pre-pass (offload/prepass/prepass.h): gpu::GradNormPlan on the caller's stream,
// timed by two events, the second of which the streamed kernels wait for.
#include <cuda_runtime.h>

#include <memory>

#include "cuda/cuda_check.h"
#include "cuda/gpu_step.h"
#include "engine/layout/plan_sizes.h"
#include "engine/layout/tensor_rules.h"
#include "offload/prepass/prepass.h"

namespace tandem::offload {
namespace {

class CudaPrepass final : public Prepass {
 public:
  CudaPrepass(void* stream, const std::vector<TensorSpec>& specs)
      : stream_(static_cast<cudaStream_t>(stream)) {
    std::vector<gpu::GradRef> refs;
    for (const TensorSpec& s : specs)
      refs.push_back({s.grad, s.numel, s.grad_dtype, layout::NormRun(s)});
    plan_ = std::make_unique<gpu::GradNormPlan>(refs);
    for (cudaEvent_t& e : ev_) TANDEM_CUDA(cudaEventCreate(&e), "(pre-pass timing events)");
  }
  ~CudaPrepass() override {
    for (cudaEvent_t e : ev_)
      if (e != nullptr) cudaEventDestroy(e);
  }

  NormResult Run(const std::vector<uint8_t>& active, StageTimes*) override {
    plan_->SetActive(active, stream_);
    TANDEM_CUDA(cudaEventRecord(ev_[0], stream_), "(prepass start)");
    plan_->Launch(stream_);
    TANDEM_CUDA(cudaEventRecord(ev_[1], stream_), "(prepass end)");
    TANDEM_CUDA(cudaEventSynchronize(ev_[1]), "(waiting for the gradient pre-pass)");
    timed_ = true;
    const gpu::GradNormPlan::Result r = plan_->Read();
    return NormResult{r.sum_squares, r.nonfinite, r.exact};
  }
  void SetGrad(size_t t, const void* grad) override { plan_->SetGrad(t, grad); }
  const void* done_event() const override { return ev_[1]; }
  void AddMemory(MemoryReport* r) const override {
    r->device.metadata += plan_->device_bytes();
    r->host.metadata += gpu::kNormResultBytes;  // the result, pinned
  }
  void ReadTimes(StageTimes* times) override {
    if (!timed_) return;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, ev_[0], ev_[1]) == cudaSuccess) times->prepass_ms = ms;
    timed_ = false;
  }

 private:
  cudaStream_t stream_;
  std::unique_ptr<gpu::GradNormPlan> plan_;
  cudaEvent_t ev_[2] = {nullptr, nullptr};  // start, end
  bool timed_ = false;
};

}  // namespace

std::unique_ptr<Prepass> MakeCudaPrepass(void* stream, const std::vector<TensorSpec>& specs) {
  return std::make_unique<CudaPrepass>(stream, specs);
}

}  // namespace tandem::offload
