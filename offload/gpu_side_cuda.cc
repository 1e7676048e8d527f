// GpuSide with CUDA: the fused hot step, the pre-pass, the CUDA transport, pointer checks
// and synchronous copies (offload/gpu_side.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <utility>

#include "cuda/cuda_check.h"
#include "cuda/gpu_step.h"
#include "engine/layout/plan_groups.h"
#include "offload/cuda_transport.h"
#include "offload/device_range.h"
#include "offload/gpu_side.h"
#include "tandem/error.h"

namespace tandem::offload {
static_assert(kSkipScalarIndex == gpu::StepPlan::kSkipSpan, "one value marks a span left out");

namespace {

// Launches `plan` over its spans, span k using scalars[span_index[k]] (kSkipScalarIndex:
// left out), in launches of at most kMaxScalarGroups distinct scalar sets, each leaving out
// the spans of the others: one launch in the usual case (a few groups).
void LaunchScalars(gpu::StepPlan& plan, const std::vector<uint32_t>& span_index,
                   const std::vector<StepScalars>& scalars, cudaStream_t stream,
                   int reserve_sms = 0) {
  const size_t per = gpu::kMaxScalarGroups;
  std::vector<uint32_t> index(span_index.size());
  for (size_t first = 0; first < std::max<size_t>(scalars.size(), 1); first += per) {
    bool any = false;
    for (size_t k = 0; k < span_index.size(); ++k) {
      const uint32_t s = span_index[k];
      const bool mine = s != kSkipScalarIndex && s >= first && s < first + per;
      index[k] = mine ? static_cast<uint32_t>(s - first) : gpu::StepPlan::kSkipSpan;
      any |= mine;
    }
    if (!any) continue;
    plan.SetScalarIndex(index, stream);
    plan.Launch(scalars.data() + first, std::min(per, scalars.size() - first), stream, reserve_sms);
  }
}

cudaEvent_t NewEvent(const char* what) {
  cudaEvent_t e = nullptr;
  TANDEM_CUDA(cudaEventCreate(&e), what);
  return e;
}

class CudaSide final : public GpuSide {
 public:
  CudaSide(void* stream, std::shared_ptr<FaultPlan> faults)
      : stream_(static_cast<cudaStream_t>(stream)), faults_(std::move(faults)) {
    for (cudaEvent_t& e : ev_) TANDEM_CUDA(cudaEventCreate(&e), "(optimizer timing events)");
    TANDEM_CUDA(cudaGetDevice(&device_), "(the optimizer's device)");
  }
  ~CudaSide() override {
    for (cudaStream_t s : {up_, run_, down_, backup_})
      if (s != nullptr) cudaStreamSynchronize(s);
    plans_.clear();
    for (cudaEvent_t e : ev_)
      if (e != nullptr) cudaEventDestroy(e);
    for (cudaEvent_t e : stream_ev_)
      if (e != nullptr) cudaEventDestroy(e);
    for (const SlotEvents& e : slot_ev_)
      for (cudaEvent_t x : {e.up, e.run, e.down, e.backup}) cudaEventDestroy(x);
    for (cudaStream_t s : {up_, run_, down_, backup_})
      if (s != nullptr) cudaStreamDestroy(s);
  }

  void CheckDevicePointer(const void* p, uint64_t need, const std::string& need_detail,
                          const std::string& who, const char* what) const override {
    cudaPointerAttributes a{};
    const cudaError_t err = cudaPointerGetAttributes(&a, p);
    cudaGetLastError();
    if (err != cudaSuccess || (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged))
      throw Error(ErrorKind::kInvalidArgument,
                  who + ": " + what + " is not device memory (GPU mode needs device pointers)");
    if (const auto have = DeviceBytesFrom(p); have && *have < need)
      throw Error(ErrorKind::kInvalidArgument,
                  who + ": " + what + " needs " + std::to_string(need) + " bytes " + need_detail +
                      " but its device allocation holds only " + std::to_string(*have) +
                      " bytes from that address");
  }

  std::unique_ptr<Transport> MakeTransport() override {
    return std::make_unique<CudaTransport>(stream_, faults_);
  }

  uint64_t BuildPlans(Algorithm algo, const std::vector<StepSpan>& spans,
                      const std::vector<uint32_t>& index, const std::vector<size_t>& span_tensor,
                      const std::vector<HostGrad>& grads) override {
    uint64_t bytes = 0;
    grad_uses_.assign(grads.size(), {});
    // Note [One plan per format set] (engine/layout/plan_groups.h).
    std::vector<StateFormats> formats;
    for (const StepSpan& sp : spans) formats.push_back(sp.formats);
    groups_ = layout::GroupByFormats(formats);
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
      for (size_t k = 0; k < groups_.spans[p].size(); ++k)  // hot spans start at element 0
        grad_uses_[span_tensor[groups_.spans[p][k]]].push_back(
            {hot_.back().get(), static_cast<uint32_t>(k), 0});
    }
    std::vector<gpu::GradRef> refs;
    for (const HostGrad& g : grads) refs.push_back({g.ptr, g.n, g.dtype, g.run});
    norm_ = std::make_unique<gpu::GradNormPlan>(refs);
    return bytes + norm_->device_bytes();
  }

  void SetGrad(size_t t, const void* grad) override {
    norm_->SetGrad(t, grad);
    for (const GradUse& u : grad_uses_[t])
      u.plan->SetGrad(u.span, static_cast<const uint8_t*>(grad) + u.offset);
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
                 const std::vector<uint32_t>& span_index) override {
    TANDEM_CUDA(cudaEventRecord(ev_[2], stream_), "(hot step start)");
    // With streamed chunks, the hot launch leaves a few SMs to their kernels: holding
    // every SM, it would stall the first chunks' kernels, then (K slots) their copies.
    const int reserve = chunks_.empty() ? 0 : kStreamSms;
    for (size_t p = 0; p < hot_.size(); ++p) {
      std::vector<uint32_t> plan_index;
      for (uint32_t i : groups_.spans[p]) plan_index.push_back(span_index[i]);
      LaunchScalars(*hot_[p], plan_index, scalars, stream_, reserve);
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

  void CopyConcurrent(void* dst, const void* src, size_t bytes,
                      const char* context) const override {
    if (bytes == 0) return;
    TANDEM_CUDA(cudaSetDevice(device_), context);
    TANDEM_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamPerThread), context);
    TANDEM_CUDA(cudaStreamSynchronize(cudaStreamPerThread), context);
  }

  void ZeroConcurrent(void* dst, size_t bytes, const char* context) const override {
    if (bytes == 0) return;
    TANDEM_CUDA(cudaSetDevice(device_), context);
    TANDEM_CUDA(cudaMemsetAsync(dst, 0, bytes, cudaStreamPerThread), context);
    TANDEM_CUDA(cudaStreamSynchronize(cudaStreamPerThread), context);
  }

  void SyncStream(const char* context) const override {
    TANDEM_CUDA(cudaStreamSynchronize(stream_), context);
    for (cudaStream_t s : {up_, run_, down_, backup_})
      if (s != nullptr) TANDEM_CUDA(cudaStreamSynchronize(s), context);
  }

  uint64_t BuildStream(Algorithm algo, std::vector<StreamChunkSpans> chunks, int slots,
                       HostCopy host_copy) override {
    chunks_ = std::move(chunks);
    host_copy_ = std::move(host_copy);
    backups_.clear();
    for (const StreamChunkSpans& ch : chunks_)
      backups_.push_back({this, ch.backup, ch.host, ch.bytes});
    plans_.clear();
    spec_plans_.clear();
    uint64_t bytes = 0;
    // Per chunk (in chunk order), one plan per format set of `spans`.
    auto build = [&](size_t c, const std::vector<StepSpan>& spans, std::vector<ChunkPlan>* out) {
      std::vector<StateFormats> formats;
      for (const StepSpan& sp : spans) formats.push_back(sp.formats);
      const layout::PlanGroups g = layout::GroupByFormats(formats);
      for (size_t p = 0; p < g.formats.size(); ++p) {
        ChunkPlan cp;
        cp.chunk = c;
        std::vector<StepSpan> mine;
        for (uint32_t i : g.spans[p]) {
          mine.push_back(spans[i]);
          cp.tensor.push_back(chunks_[c].span_tensor[i]);
        }
        cp.plan = std::make_unique<gpu::StepPlan>(
            algo, g.formats[p], mine, std::vector<uint32_t>(mine.size(), kSkipScalarIndex));
        bytes += cp.plan->device_bytes();
        for (size_t k = 0; k < g.spans[p].size(); ++k) {
          const uint32_t i = g.spans[p][k];
          grad_uses_[chunks_[c].span_tensor[i]].push_back(
              {cp.plan.get(), static_cast<uint32_t>(k), chunks_[c].span_grad_offset[i]});
        }
        out->push_back(std::move(cp));
      }
    };
    for (size_t c = 0; c < chunks_.size(); ++c) {
      build(c, chunks_[c].spans, &plans_);
      if (chunks_[c].speculative()) build(c, chunks_[c].hold_spans, &spec_plans_);
    }
    if (chunks_.empty()) return bytes;
    const char* what = "(stream executor streams and events)";
    TANDEM_CUDA(cudaStreamCreateWithFlags(&up_, cudaStreamNonBlocking), what);
    TANDEM_CUDA(cudaStreamCreateWithFlags(&run_, cudaStreamNonBlocking), what);
    TANDEM_CUDA(cudaStreamCreateWithFlags(&down_, cudaStreamNonBlocking), what);
    TANDEM_CUDA(cudaStreamCreateWithFlags(&backup_, cudaStreamNonBlocking), what);
    for (int i = 0; i < slots; ++i)
      slot_ev_.push_back({NewEvent(what), NewEvent(what), NewEvent(what), NewEvent(what)});
    slot_used_.assign(slots, 0);
    for (cudaEvent_t& e : stream_ev_) e = NewEvent(what);
    return bytes;
  }

  uint64_t LaunchStream(const std::vector<StepScalars>& scalars,
                        const std::vector<uint32_t>& scalar_index,
                        const std::vector<uint8_t>& committed) override {
    if (chunks_.empty()) return 0;
    // The kernels read the gradients: after the pre-pass, which came after them on the
    // caller's stream (not after the hot launch queued since: the streamed kernels run
    // beside it). Uploads read the host state: after the last step's downloads.
    TANDEM_CUDA(cudaStreamWaitEvent(run_, ev_[1], 0), "(stream executor start)");
    if (launched_)
      TANDEM_CUDA(cudaStreamWaitEvent(up_, stream_ev_[kDownDone], 0), "(stream executor start)");
    uint64_t enqueued = 0;
    // A failure part-way still marks the end of what was queued, so that the caller's
    // stream (JoinStream) and the next step's uploads wait for it.
    struct MarkEnd {
      CudaSide* self;
      bool done = false;
      ~MarkEnd() {
        if (done) return;
        cudaEventRecord(self->stream_ev_[kKernelsDone], self->run_);
        cudaEventRecord(self->stream_ev_[kDownDone], self->down_);
        self->launched_ = true;
      }
    } mark_end{this};
    size_t p = 0;
    std::vector<uint32_t> plan_index;
    for (size_t c = 0; c < chunks_.size(); ++c) {
      const StreamChunkSpans& ch = chunks_[c];
      const size_t p0 = p;
      bool any = false;
      for (; p < plans_.size() && plans_[p].chunk == c; ++p)
        for (uint32_t t : plans_[p].tensor) any |= scalar_index[t] != kSkipScalarIndex;
      if (!any) continue;
      if (!committed.empty() && committed[c] != 0) {
        // Kept from the speculation: its parameters go into place (its spec kernel came
        // earlier on run_; backward's reads of the parameters ended before the pre-pass).
        for (const layout::StreamLayout::HoldCopy& h : ch.hold_copies)
          TANDEM_CUDA(cudaMemcpyAsync(h.param, h.hold, h.bytes, cudaMemcpyDeviceToDevice, run_),
                      ctx(c, "held parameters into place"));
        continue;
      }
      SlotEvents& ev = slot_ev_[ch.slot_index];
      if (slot_used_[ch.slot_index])  // the slot's last chunk has gone down (or goes)
        TANDEM_CUDA(cudaStreamWaitEvent(up_, ev.down, 0), ctx(c, "wait for its slot"));
      if (enqueued == 0) TANDEM_CUDA(cudaEventRecord(stream_ev_[kFirstUp], up_), ctx(c, "timing"));
      fail_injected(c, "upload");
      TANDEM_CUDA(cudaMemcpyAsync(ch.slot, ch.host, ch.bytes, cudaMemcpyHostToDevice, up_),
                  ctx(c, "upload"));
      TANDEM_CUDA(cudaEventRecord(ev.up, up_), ctx(c, "upload"));
      TANDEM_CUDA(cudaStreamWaitEvent(run_, ev.up, 0), ctx(c, "kernel waits for upload"));
      for (size_t q = p0; q < p; ++q) {
        plan_index.clear();
        for (uint32_t t : plans_[q].tensor) plan_index.push_back(scalar_index[t]);
        LaunchScalars(*plans_[q].plan, plan_index, scalars, run_);
      }
      TANDEM_CUDA(cudaEventRecord(ev.run, run_), ctx(c, "kernel"));
      TANDEM_CUDA(cudaStreamWaitEvent(down_, ev.run, 0), ctx(c, "download waits for kernel"));
      fail_injected(c, "download");
      TANDEM_CUDA(cudaMemcpyAsync(ch.host, ch.slot, ch.bytes, cudaMemcpyDeviceToHost, down_),
                  ctx(c, "download"));
      TANDEM_CUDA(cudaEventRecord(ev.down, down_), ctx(c, "download"));
      slot_used_[ch.slot_index] = 1;
      ++enqueued;
    }
    mark_end.done = true;
    TANDEM_CUDA(cudaEventRecord(stream_ev_[kKernelsDone], run_), "(stream executor end)");
    TANDEM_CUDA(cudaEventRecord(stream_ev_[kDownDone], down_), "(stream executor end)");
    launched_ = true;
    stream_timed_ = enqueued > 0;
    return enqueued;
  }

  void SpeculateStream(size_t c, const std::vector<StepScalars>& scalars,
                       const std::vector<uint32_t>& scalar_index) override {
    const StreamChunkSpans& ch = chunks_.at(c);
    if (!ch.speculative())
      throw Error(ErrorKind::kInternal,
                  "streamed chunk " + std::to_string(c) + " has no place for a speculative update");
    fail_injected(c, "upload", "speculative update");
    // The gradients queued so far on the caller's stream (GradReady: this chunk's are
    // final) come before the kernel; the last step's downloads before the upload.
    TANDEM_CUDA(cudaEventRecord(stream_ev_[kGradsQueued], stream_), ctx(c, "speculation"));
    TANDEM_CUDA(cudaStreamWaitEvent(run_, stream_ev_[kGradsQueued], 0), ctx(c, "speculation"));
    if (launched_)
      TANDEM_CUDA(cudaStreamWaitEvent(up_, stream_ev_[kDownDone], 0), ctx(c, "speculation"));
    SlotEvents& ev = slot_ev_[ch.slot_index];
    if (slot_used_[ch.slot_index])
      TANDEM_CUDA(cudaStreamWaitEvent(up_, ev.down, 0), ctx(c, "wait for its slot"));
    TANDEM_CUDA(cudaMemcpyAsync(ch.slot, ch.host, ch.bytes, cudaMemcpyHostToDevice, up_),
                ctx(c, "upload"));
    TANDEM_CUDA(cudaEventRecord(ev.up, up_), ctx(c, "upload"));
    // Whatever happens from here on, the slot's next user waits for what was queued.
    struct SlotFree {
      CudaSide* self;
      int slot;
      ~SlotFree() {
        cudaEventRecord(self->slot_ev_[slot].down, self->down_);
        cudaEventRecord(self->stream_ev_[kSpecDone], self->down_);
        self->slot_used_[slot] = 1;
        self->spec_pending_ = true;
      }
    } slot_free{this, ch.slot_index};
    // The old bytes into the backup on the host, beside the upload (both only read the
    // host chunk), off the PCIe link; the download of the new bytes waits for it.
    if (launched_)
      TANDEM_CUDA(cudaStreamWaitEvent(backup_, stream_ev_[kDownDone], 0), ctx(c, "backup"));
    TANDEM_CUDA(cudaLaunchHostFunc(backup_, &CudaSide::RunBackup, &backups_[c]),
                ctx(c, "backup on the host"));
    TANDEM_CUDA(cudaEventRecord(ev.backup, backup_), ctx(c, "backup on the host"));
    TANDEM_CUDA(cudaStreamWaitEvent(run_, ev.up, 0), ctx(c, "kernel waits for upload"));
    for (const layout::StreamLayout::HoldCopy& h : ch.hold_copies)
      TANDEM_CUDA(cudaMemcpyAsync(h.hold, h.param, h.bytes, cudaMemcpyDeviceToDevice, run_),
                  ctx(c, "parameters into the holding place"));
    std::vector<uint32_t> plan_index;
    for (const ChunkPlan& cp : spec_plans_) {
      if (cp.chunk != c) continue;
      plan_index.clear();
      for (uint32_t t : cp.tensor) plan_index.push_back(scalar_index[t]);
      LaunchScalars(*cp.plan, plan_index, scalars, run_);
    }
    TANDEM_CUDA(cudaEventRecord(ev.run, run_), ctx(c, "speculative kernel"));
    TANDEM_CUDA(cudaStreamWaitEvent(down_, ev.run, 0), ctx(c, "download waits for kernel"));
    TANDEM_CUDA(cudaStreamWaitEvent(down_, ev.backup, 0), ctx(c, "download waits for backup"));
    fail_injected(c, "download", "speculative update");
    TANDEM_CUDA(cudaMemcpyAsync(ch.host, ch.slot, ch.bytes, cudaMemcpyDeviceToHost, down_),
                ctx(c, "download"));
  }

  void WaitSpeculated() override {
    if (!spec_pending_) return;
    TANDEM_CUDA(cudaEventSynchronize(stream_ev_[kSpecDone]), "(waiting for the speculated chunks)");
    spec_pending_ = false;
  }

  void JoinStream() override {
    if (!launched_) return;
    TANDEM_CUDA(cudaStreamWaitEvent(stream_, stream_ev_[kKernelsDone], 0),
                "(caller's stream waits for the streamed kernels)");
  }

  void StreamWaitStreamed(void* stream) const override {
    if (!launched_) return;
    TANDEM_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), stream_ev_[kKernelsDone], 0),
                "(waiting for the streamed kernels)");
  }

  double ReadStreamMs() override {
    if (!stream_timed_) return 0;
    TANDEM_CUDA(cudaEventSynchronize(stream_ev_[kDownDone]), "(reading stream timings)");
    float ms = 0;
    stream_timed_ = false;
    if (cudaEventElapsedTime(&ms, stream_ev_[kFirstUp], stream_ev_[kDownDone]) == cudaSuccess)
      return ms;
    cudaGetLastError();
    return 0;
  }

  void ProbeRates(uint64_t bytes, double kernel_bytes, MachineRates* rates) override;

 private:
  cudaStream_t stream_;
  int device_ = 0;  // current at construction: CopyConcurrent makes it current on its thread
  std::shared_ptr<FaultPlan> faults_;
  cudaEvent_t ev_[4] = {nullptr, nullptr, nullptr, nullptr};  // prepass/hot start+end
  layout::PlanGroups groups_;                                 // the hot spans, by format set
  std::vector<std::unique_ptr<gpu::StepPlan>> hot_;           // per format set: its plan
  std::unique_ptr<gpu::GradNormPlan> norm_;
  bool timed_ = false;
  // Per tensor: the spans of the hot and stream plans that read its gradient, and where
  // (bytes from the gradient's element 0), so SetGrad can point them elsewhere.
  struct GradUse {
    gpu::StepPlan* plan;
    uint32_t span;
    uint64_t offset;
  };
  std::vector<std::vector<GradUse>> grad_uses_;

  // The stream executor: per chunk its copies and spans, per (chunk, format set) a plan
  // (in chunk order), per slot its events, and three streams: uploads, kernels, downloads.
  struct ChunkPlan {
    size_t chunk = 0;
    std::vector<uint32_t> tensor;  // per span of the plan
    std::unique_ptr<gpu::StepPlan> plan;
  };
  struct SlotEvents {
    cudaEvent_t up, run, down, backup;
  };
  std::string ctx(size_t c, const char* what) const {
    return std::string("(streamed chunk ") + std::to_string(c) + " of " +
           std::to_string(chunks_.size()) + ", " + std::to_string(chunks_[c].bytes) +
           " bytes: " + what + ")";
  }
  void fail_injected(size_t c, const char* what, const char* note = nullptr) const {
    if (faults_ != nullptr && faults_->CopyFails())  // tandem/faults.h
      throw Error(ErrorKind::kCuda, std::string("injected failure of ") + what +
                                        " copy of streamed chunk " + std::to_string(c) + " of " +
                                        std::to_string(chunks_.size()) +
                                        (note ? std::string(" (") + note + ")" : ""));
  }
  enum { kFirstUp, kKernelsDone, kDownDone, kGradsQueued, kSpecDone, kStreamEvents };
  // One speculative backup: a host function on backup_ (cudaLaunchHostFunc).
  struct Backup {
    CudaSide* self;
    void* dst;
    const void* src;
    uint64_t bytes;
  };
  static void CUDART_CB RunBackup(void* arg) {
    const Backup* b = static_cast<const Backup*>(arg);
    b->self->host_copy_(b->dst, b->src, b->bytes);
  }
  HostCopy host_copy_;
  std::vector<Backup> backups_;         // per chunk
  static constexpr int kStreamSms = 8;  // SMs the hot launch leaves to streamed kernels
  std::vector<StreamChunkSpans> chunks_;
  std::vector<ChunkPlan> plans_;
  std::vector<ChunkPlan> spec_plans_;  // over the hold spans of the speculative chunks
  std::vector<SlotEvents> slot_ev_;
  cudaEvent_t stream_ev_[kStreamEvents] = {};
  std::vector<uint8_t> slot_used_;  // per slot: a chunk went through it
  cudaStream_t up_ = nullptr, run_ = nullptr, down_ = nullptr, backup_ = nullptr;
  bool launched_ = false, stream_timed_ = false, spec_pending_ = false;
};

void CudaSide::ProbeRates(uint64_t bytes, double kernel_bytes, MachineRates* rates) {
  const char* what = "(measuring PCIe and HBM for offload_compute = auto)";
  void *h_up = nullptr, *h_down = nullptr, *d_up = nullptr, *d_down = nullptr;
  cudaStream_t s_up = nullptr, s_down = nullptr;
  cudaEvent_t ev[6] = {};
  auto release = [&] {
    for (cudaEvent_t e : ev)
      if (e != nullptr) cudaEventDestroy(e);
    for (cudaStream_t st : {s_up, s_down})
      if (st != nullptr) cudaStreamDestroy(st);
    for (void* h : {h_up, h_down})
      if (h != nullptr) cudaFreeHost(h);
    for (void* d : {d_up, d_down})
      if (d != nullptr) cudaFree(d);
  };
  try {
    TANDEM_CUDA(cudaHostAlloc(&h_up, bytes, cudaHostAllocDefault), what);
    TANDEM_CUDA(cudaHostAlloc(&h_down, bytes, cudaHostAllocDefault), what);
    TANDEM_CUDA(cudaMalloc(&d_up, bytes), what);
    TANDEM_CUDA(cudaMalloc(&d_down, bytes), what);
    TANDEM_CUDA(cudaStreamCreateWithFlags(&s_up, cudaStreamNonBlocking), what);
    TANDEM_CUDA(cudaStreamCreateWithFlags(&s_down, cudaStreamNonBlocking), what);
    for (cudaEvent_t& e : ev) TANDEM_CUDA(cudaEventCreate(&e), what);
    double best_up = 0, best_down = 0, best_hbm = 0;
    for (int rep = 0; rep < 4; ++rep) {  // the first is a warm-up
      TANDEM_CUDA(cudaEventRecord(ev[0], s_up), what);
      TANDEM_CUDA(cudaStreamWaitEvent(s_down, ev[0], 0), what);
      TANDEM_CUDA(cudaEventRecord(ev[2], s_down), what);
      TANDEM_CUDA(cudaMemcpyAsync(d_up, h_up, bytes, cudaMemcpyHostToDevice, s_up), what);
      TANDEM_CUDA(cudaMemcpyAsync(h_down, d_down, bytes, cudaMemcpyDeviceToHost, s_down), what);
      TANDEM_CUDA(cudaEventRecord(ev[1], s_up), what);
      TANDEM_CUDA(cudaEventRecord(ev[3], s_down), what);
      TANDEM_CUDA(cudaEventRecord(ev[4], s_up), what);
      TANDEM_CUDA(cudaMemcpyAsync(d_down, d_up, bytes, cudaMemcpyDeviceToDevice, s_up), what);
      TANDEM_CUDA(cudaEventRecord(ev[5], s_up), what);
      TANDEM_CUDA(cudaEventSynchronize(ev[5]), what);
      TANDEM_CUDA(cudaEventSynchronize(ev[3]), what);
      float up = 0, down = 0, hbm = 0;
      TANDEM_CUDA(cudaEventElapsedTime(&up, ev[0], ev[1]), what);
      TANDEM_CUDA(cudaEventElapsedTime(&down, ev[2], ev[3]), what);
      TANDEM_CUDA(cudaEventElapsedTime(&hbm, ev[4], ev[5]), what);
      if (rep == 0) continue;
      best_up = std::max(best_up, bytes / (up * 1e6));
      best_down = std::max(best_down, bytes / (down * 1e6));
      best_hbm = std::max(best_hbm, 2.0 * bytes / (hbm * 1e6));  // read + write
    }
    rates->h2d_gbps = best_up;
    rates->d2h_gbps = best_down;
    // The fused kernel reaches about 3/4 of the copy bandwidth (docs/gpu_kernels.md).
    rates->gpu_gparams = 0.75 * best_hbm / kernel_bytes;
  } catch (...) {
    release();
    throw;
  }
  release();
}

}  // namespace

bool GpuSide::Available() noexcept { return gpu::DeviceAvailable(); }

std::unique_ptr<GpuSide> GpuSide::Create(void* stream, std::shared_ptr<FaultPlan> faults) {
  return std::make_unique<CudaSide>(stream, std::move(faults));
}

}  // namespace tandem::offload
