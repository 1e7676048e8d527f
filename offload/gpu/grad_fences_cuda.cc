// GradFences on CUDA (offload/gpu/grad_fences.h).
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "cuda/cuda_check.h"
#include "offload/gpu/grad_fences.h"

namespace tandem::offload {
namespace {

class CudaGradFences final : public GradFences {
 public:
  CudaGradFences(void* stream, size_t tensors) : caller_(static_cast<cudaStream_t>(stream)) {
    try {
      const char* what = "(gradient fences: streams and events)";
      TANDEM_CUDA(cudaStreamCreateWithFlags(&work_, cudaStreamNonBlocking), what);
      TANDEM_CUDA(cudaStreamCreateWithFlags(&join_, cudaStreamNonBlocking), what);
      TANDEM_CUDA(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), what);
      TANDEM_CUDA(cudaEventCreateWithFlags(&work_done_, cudaEventDisableTiming), what);
      TANDEM_CUDA(cudaEventCreateWithFlags(&step_done_, cudaEventDisableTiming), what);
      consumed_.assign(tensors, nullptr);
      for (cudaEvent_t& e : consumed_)
        TANDEM_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), what);
    } catch (...) {
      Release();
      throw;
    }
  }
  ~CudaGradFences() override { Release(); }

  const void* MarkReady(void* ready_stream) override {
    const cudaStream_t s = ready_stream != nullptr ? static_cast<cudaStream_t>(ready_stream) : caller_;
    TANDEM_CUDA(cudaEventRecord(ready_, s), "(GradReady: the gradient's ready mark)");
    TANDEM_CUDA(cudaStreamWaitEvent(work_, ready_, 0), "(GradReady: work stream waits)");
    if (step_queued_) {
      TANDEM_CUDA(cudaStreamWaitEvent(work_, step_done_, 0), "(GradReady: after the last step)");
      step_queued_ = false;
    }
    return ready_;
  }
  void* work_stream() const override { return work_; }
  void* join_stream() const override { return join_; }
  void RecordConsumed(size_t t) override {
    // Once per released gradient, on the thread that launches backward's kernels: the
    // message is built only when a call fails.
    auto what = [t] { return "(GradReady: tensor " + std::to_string(t) + "'s consumed event)"; };
    TANDEM_CUDA(cudaEventRecord(work_done_, work_), what());
    TANDEM_CUDA(cudaStreamWaitEvent(join_, work_done_, 0), what());
    TANDEM_CUDA(cudaEventRecord(consumed_.at(t), join_), what());
  }
  bool Consumed(size_t t) const override {
    const cudaError_t q = cudaEventQuery(consumed_.at(t));
    if (q == cudaErrorNotReady) return false;
    TANDEM_CUDA(q, "(GradConsumed: tensor " + std::to_string(t) + ")");
    return true;
  }
  void WaitConsumed(size_t t, void* stream) const override {
    TANDEM_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), consumed_.at(t), 0),
                "(WaitGradConsumed: tensor " + std::to_string(t) + ")");
  }
  void CallerWaitsForWork() override {
    const char* what = "(Step: the caller's stream waits for early start's work)";
    TANDEM_CUDA(cudaEventRecord(work_done_, work_), what);
    TANDEM_CUDA(cudaStreamWaitEvent(caller_, work_done_, 0), what);
  }
  void StepQueued() override {
    TANDEM_CUDA(cudaEventRecord(step_done_, caller_), "(Step: its kernels are queued)");
    step_queued_ = true;
  }
  void Synchronize() noexcept override {
    if (work_ != nullptr) cudaStreamSynchronize(work_);
    if (join_ != nullptr) cudaStreamSynchronize(join_);
  }

 private:
  void Release() noexcept {
    Synchronize();
    for (cudaEvent_t e : consumed_)
      if (e != nullptr) cudaEventDestroy(e);
    consumed_.clear();
    for (cudaEvent_t e : {ready_, work_done_, step_done_})
      if (e != nullptr) cudaEventDestroy(e);
    for (cudaStream_t s : {work_, join_})
      if (s != nullptr) cudaStreamDestroy(s);
    ready_ = work_done_ = step_done_ = nullptr;
    work_ = join_ = nullptr;
  }

  cudaStream_t caller_;
  cudaStream_t work_ = nullptr, join_ = nullptr;
  cudaEvent_t ready_ = nullptr, work_done_ = nullptr, step_done_ = nullptr;
  bool step_queued_ = false;  // step_done_ recorded, not yet waited for
  std::vector<cudaEvent_t> consumed_;
};

}  // namespace

std::unique_ptr<GradFences> MakeCudaGradFences(void* stream, size_t tensors) {
  return std::make_unique<CudaGradFences>(stream, tensors);
}

}  // namespace tandem::offload
