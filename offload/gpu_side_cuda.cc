// GpuSide with CUDA: the fused hot step, the pre-pass, the CUDA transport, pointer checks
// and synchronous copies (offload/gpu_side.h).
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/gpu_step.h"
#include "cuda/cuda_check.h"
#include "offload/cuda_transport.h"
#include "offload/device_range.h"
#include "offload/gpu_side.h"
#include "tandem/error.h"

namespace tandem::offload {
static_assert(GpuSide::kSkip == gpu::StepPlan::kSkipSpan, "one value marks a span left out");

namespace {

class CudaSide final : public GpuSide {
 public:
  explicit CudaSide(void* stream) : stream_(static_cast<cudaStream_t>(stream)) {
    for (cudaEvent_t& e : ev_) TANDEM_CUDA(cudaEventCreate(&e), "(optimizer timing events)");
  }
  ~CudaSide() override {
    for (cudaEvent_t e : ev_)
      if (e != nullptr) cudaEventDestroy(e);
  }

  void CheckDevicePointer(const void* p, uint64_t need, const std::string& need_detail,
                          const std::string& who, const char* what) const override {
    cudaPointerAttributes a{};
    const cudaError_t err = cudaPointerGetAttributes(&a, p);
    cudaGetLastError();
    if (err != cudaSuccess ||
        (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged))
      throw Error(ErrorKind::kInvalidArgument,
                  who + ": " + what + " is not device memory (GPU mode needs device pointers)");
    if (const auto have = DeviceBytesFrom(p); have && *have < need)
      throw Error(ErrorKind::kInvalidArgument,
                  who + ": " + what + " needs " + std::to_string(need) + " bytes " +
                      need_detail + " but its device allocation holds only " +
                      std::to_string(*have) +
                      " bytes from that address");
  }

  std::unique_ptr<Transport> MakeTransport() override {
    return std::make_unique<CudaTransport>(stream_);
  }

  uint64_t BuildPlans(Algorithm algo, const std::vector<StepSpan>& spans,
                      const std::vector<uint32_t>& index,
                      const std::vector<HostGrad>& grads) override {
    uint64_t bytes = 0;
    // Note [One plan per format set] (offload/plan_groups.h).
    std::vector<StateFormats> formats;
    for (const StepSpan& sp : spans) formats.push_back(sp.formats);
    groups_ = GroupByFormats(formats);
    hot_.clear();
    for (size_t p = 0; p < groups_.formats.size(); ++p) {
      std::vector<StepSpan> mine;
      std::vector<uint32_t> mine_index;
      for (uint32_t i : groups_.spans[p]) {
        mine.push_back(spans[i]);
        mine_index.push_back(index[i]);
      }
      hot_.push_back(std::make_unique<gpu::StepPlan>(algo, groups_.formats[p], mine, mine_index));
      bytes += hot_.back()->device_bytes();
    }
    std::vector<gpu::GradRef> refs;
    for (const HostGrad& g : grads) refs.push_back({g.ptr, g.n, g.dtype, g.run});
    norm_ = std::make_unique<gpu::GradNormPlan>(refs);
    return bytes + norm_->device_bytes();
  }

  NormResult Prepass(const std::vector<uint8_t>& active) override {
    norm_->SetActive(active, stream_);
    TANDEM_CUDA(cudaEventRecord(ev_[0], stream_), "(prepass start)");
    norm_->Launch(stream_);
    TANDEM_CUDA(cudaEventRecord(ev_[1], stream_), "(prepass end)");
    TANDEM_CUDA(cudaEventSynchronize(ev_[1]), "(waiting for the gradient pre-pass)");
    const gpu::GradNormPlan::Result r = norm_->Read();
    return NormResult{r.sum_squares, r.nonfinite, r.exact};
  }

  void LaunchHot(const std::vector<StepScalars>& scalars,
                 const std::vector<uint32_t>& slot) override {
    TANDEM_CUDA(cudaEventRecord(ev_[2], stream_), "(hot step start)");
    for (size_t p = 0; p < hot_.size(); ++p) {
      // Launches of at most kMaxScalarGroups distinct scalar sets; each leaves out the
      // spans of the other launches. One launch per plan in the usual case (a few groups).
      const std::vector<uint32_t>& spans = groups_.spans[p];
      const size_t per = gpu::kMaxScalarGroups;
      std::vector<uint32_t> index(spans.size());
      for (size_t first = 0; first < std::max<size_t>(scalars.size(), 1); first += per) {
        bool any = false;
        for (size_t k = 0; k < spans.size(); ++k) {
          const uint32_t s = slot[spans[k]];
          const bool mine = s != kSkip && s >= first && s < first + per;
          index[k] = mine ? static_cast<uint32_t>(s - first) : gpu::StepPlan::kSkipSpan;
          any |= mine;
        }
        if (!any) continue;
        hot_[p]->SetScalarIndex(index, stream_);
        hot_[p]->Launch(scalars.data() + first, std::min(per, scalars.size() - first), stream_);
      }
    }
    TANDEM_CUDA(cudaEventRecord(ev_[3], stream_), "(hot step end)");
    timed_ = true;
  }

  void StreamWaitHot(void* stream) const override {
    TANDEM_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), ev_[3], 0),
                "(waiting for the hot step)");
  }

  void ReadTimes(double* prepass_ms, double* hot_ms) override {
    if (!timed_) return;
    float ms = 0;
    TANDEM_CUDA(cudaEventSynchronize(ev_[3]), "(reading step timings)");
    if (cudaEventElapsedTime(&ms, ev_[0], ev_[1]) == cudaSuccess) *prepass_ms = ms;
    if (cudaEventElapsedTime(&ms, ev_[2], ev_[3]) == cudaSuccess) *hot_ms = ms;
    timed_ = false;
  }

  void Copy(void* dst, const void* src, size_t bytes, const char* context) const override {
    if (bytes == 0) return;
    TANDEM_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), context);
  }

  void SyncStream(const char* context) const override {
    TANDEM_CUDA(cudaStreamSynchronize(stream_), context);
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t ev_[4] = {nullptr, nullptr, nullptr, nullptr};  // prepass/hot start+end
  PlanGroups groups_;                               // the hot spans, by format set
  std::vector<std::unique_ptr<gpu::StepPlan>> hot_;  // per format set: its plan
  std::unique_ptr<gpu::GradNormPlan> norm_;
  bool timed_ = false;
};

}  // namespace

bool GpuSide::Available() noexcept { return gpu::DeviceAvailable(); }

std::unique_ptr<GpuSide> GpuSide::Create(void* stream) { return std::make_unique<CudaSide>(stream); }


}  // namespace tandem::offload
