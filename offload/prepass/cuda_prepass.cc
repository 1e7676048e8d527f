// The GPU pre-pass (offload/prepass/prepass.h): gpu::GradNormPlan on the caller's stream,
// timed by two events, the second of which the streamed kernels wait for; early start's
// partials on the engine's work stream, one event per tensor telling when its total
// reached the host.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/gpu_step.h"
#include "engine/layout/plan_sizes.h"
#include "engine/layout/tensor_rules.h"
#include "offload/prepass/prepass.h"
#include "offload/prepass/ready_partials.h"

namespace tandem::offload {
namespace {

class CudaPrepass final : public Prepass {
 public:
  CudaPrepass(void* stream, const std::vector<TensorSpec>& specs, DeviceAllocator* memory)
      : stream_(static_cast<cudaStream_t>(stream)), ready_(specs.size()) {
    std::vector<gpu::GradRef> refs;
    for (const TensorSpec& s : specs)
      refs.push_back({s.grad, s.numel, s.grad_dtype, layout::NormRun(s)});
    plan_ = std::make_unique<gpu::GradNormPlan>(refs, memory);
    for (cudaEvent_t& e : ev_) TANDEM_CUDA(cudaEventCreate(&e), "(pre-pass timing events)");
    tensor_ev_.assign(specs.size(), nullptr);
    pending_.assign(specs.size(), 0);
    for (cudaEvent_t& e : tensor_ev_)
      TANDEM_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                  "(early start's pre-pass events)");
  }
  ~CudaPrepass() override {
    for (cudaEvent_t e : ev_)
      if (e != nullptr) cudaEventDestroy(e);
    for (cudaEvent_t e : tensor_ev_)
      if (e != nullptr) {
        cudaEventSynchronize(e);  // the plan's buffers go next
        cudaEventDestroy(e);
      }
  }

  NormResult Run(const std::vector<uint8_t>& active, StageTimes*) override {
    plan_->SetActive(active, stream_, ready_.ready());
    TANDEM_CUDA(cudaEventRecord(ev_[0], stream_), "(prepass start)");
    plan_->Launch(stream_);
    TANDEM_CUDA(cudaEventRecord(ev_[1], stream_), "(prepass end)");
    TANDEM_CUDA(cudaEventSynchronize(ev_[1]), "(waiting for the gradient pre-pass)");
    timed_ = true;
    const gpu::GradNormPlan::Result r = plan_->Read();
    return NormResult{r.sum_squares, r.nonfinite, r.exact};
  }
  void SetGrad(size_t t, const void* grad) override { plan_->SetGrad(t, grad); }
  void TensorReady(size_t t, void* work_stream) override {
    const cudaStream_t s = static_cast<cudaStream_t>(work_stream);
    ready_.Readied(t);
    plan_->LaunchTensor(t, s);
    TANDEM_CUDA(cudaEventRecord(tensor_ev_[t], s),
                "(early start's pre-pass of tensor " + std::to_string(t) + ")");
    pending_[t] = 1;
  }
  // The tensors whose totals have landed since the last call, in tensor order.
  NormResult Known() override {
    for (size_t t = 0; t < pending_.size(); ++t) {
      if (pending_[t] == 0) continue;
      const cudaError_t q = cudaEventQuery(tensor_ev_[t]);
      if (q == cudaErrorNotReady) continue;
      TANDEM_CUDA(q, "(early start's pre-pass of tensor " + std::to_string(t) + ")");
      pending_[t] = 0;
      const gpu::GradNormPlan::Result r = plan_->ReadTensor(t);
      ready_.Landed(t, NormResult{r.sum_squares, r.nonfinite, r.exact});
    }
    return ready_.known();
  }
  void EndStep() override {
    ready_.Clear();
    std::fill(pending_.begin(), pending_.end(), uint8_t{0});
  }
  const void* done_event() const override { return ev_[1]; }
  void AddMemory(MemoryReport* r) const override {
    r->device.metadata += plan_->device_bytes();
    r->host.metadata += plan_->pinned_bytes();  // the results, pinned
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
  ReadyPartials ready_;
  std::vector<cudaEvent_t> tensor_ev_;  // per tensor: its early total reached the host
  std::vector<uint8_t> pending_;        // per tensor: readied, total not read yet
};

}  // namespace

std::unique_ptr<Prepass> MakeCudaPrepass(void* stream, const std::vector<TensorSpec>& specs,
                                         DeviceAllocator* memory) {
  return std::make_unique<CudaPrepass>(stream, specs, memory);
}

}  // namespace tandem::offload
