#include "offload/executors.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "tandem/error.h"

namespace tandem::offload {

namespace {

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

class GpuResident final : public Executor {
 public:
  GpuResident(GpuSide* gpu, std::vector<size_t> hot_tensor, size_t tensors)
      : gpu_(gpu), hot_tensor_(std::move(hot_tensor)), hot_(tensors, 0) {
    for (size_t t : hot_tensor_) hot_[t] = 1;
  }
  const char* name() const override { return "GPU-resident"; }
  void Launch(const StepWork& w) override {
    std::vector<uint32_t> span_index(hot_tensor_.size());
    for (size_t i = 0; i < hot_tensor_.size(); ++i)
      span_index[i] = (*w.scalar_index)[hot_tensor_[i]];
    gpu_->LaunchHot(*w.scalars, span_index);  // on the caller's stream: nothing to finish
    launched_ = pending_ = true;
  }
  void WaitParam(size_t t, void* stream) const override {
    if (launched_ && hot_[t] != 0) gpu_->StreamWaitHot(stream);
  }
  void ReadTimes(StageTimes* times) override {
    if (!pending_) return;
    gpu_->ReadTimes(&times->prepass_ms, &times->gpu_update_ms);
    pending_ = false;
  }

 private:
  GpuSide* gpu_;
  std::vector<size_t> hot_tensor_;
  std::vector<uint8_t> hot_;  // per tensor: has hot elements
  bool launched_ = false, pending_ = false;
};

class HostResident final : public Executor {
 public:
  HostResident(cpu::HostDriver* driver, std::vector<StepSpan> hot, std::vector<size_t> hot_tensor)
      : driver_(driver), hot_(std::move(hot)), hot_tensor_(std::move(hot_tensor)) {}
  const char* name() const override { return "host-resident"; }
  void Launch(const StepWork& w) override {
    if (hot_.empty()) return;
    const auto t0 = Clock::now();
    work_.clear();
    for (size_t i = 0; i < hot_.size(); ++i) {
      const uint32_t k = (*w.scalar_index)[hot_tensor_[i]];
      if (k != kSkipScalarIndex) work_.push_back({&(*w.scalars)[k], hot_[i]});
    }
    driver_->Run(work_.data(), work_.size());
    w.times->gpu_update_ms = MsSince(t0);  // host mode: the "device" is the host
  }
  void SetGrad(size_t t, const void* grad) override {
    for (size_t i = 0; i < hot_.size(); ++i)  // a hot span starts at its tensor's element 0
      if (hot_tensor_[i] == t) hot_[i].grad = grad;
  }

 private:
  cpu::HostDriver* driver_;
  std::vector<StepSpan> hot_;
  std::vector<size_t> hot_tensor_;
  std::vector<cpu::HostWork> work_;
};

class GpuStream final : public StreamExecutor {
 public:
  GpuStream(GpuSide* gpu, std::vector<uint8_t> streamed)
      : gpu_(gpu), streamed_(std::move(streamed)) {}
  const char* name() const override { return "GPU-stream"; }
  void Launch(const StepWork& w) override {
    joining_ = true;  // a launch that fails part-way is joined too (Abandon)
    static const std::vector<uint8_t> kNone;
    const std::vector<uint8_t>& committed = w.stream_committed ? *w.stream_committed : kNone;
    w.times->stream_chunks = gpu_->LaunchStream(*w.scalars, *w.scalar_index, committed);
    // Kept chunks queue their parameter copies (after their speculative kernels, which
    // read the gradients) without being counted: the caller's stream joins those too.
    const bool kept = std::any_of(committed.begin(), committed.end(),
                                  [](uint8_t k) { return k != 0; });
    pending_ = w.times->stream_chunks > 0;
    joining_ = pending_ || kept;
    launched_ |= joining_;
  }
  // The caller's stream joins the streamed kernels only now: joined at Launch, it would
  // hold the pipeline's gradient downloads (ordered after the caller's stream when the
  // pipeline starts) behind every streamed chunk.
  void Finish() override {
    if (!joining_) return;
    joining_ = false;
    gpu_->JoinStream();
  }
  void Abandon() noexcept override {
    try {
      Finish();
    } catch (...) {  // the step's own error (or the next CUDA call) reports it
    }
  }
  void WaitParam(size_t t, void* stream) const override {
    if (launched_ && streamed_[t] != 0) gpu_->StreamWaitStreamed(stream);
  }
  void Speculate(size_t c, const std::vector<StepScalars>& scalars,
                 const std::vector<uint32_t>& scalar_index) override {
    gpu_->SpeculateStream(c, scalars, scalar_index);
  }
  void WaitSpeculated() override { gpu_->WaitSpeculated(); }
  void ReadTimes(StageTimes* times) override {
    if (!pending_) return;
    times->stream_ms = gpu_->ReadStreamMs();
    pending_ = false;
  }

 private:
  GpuSide* gpu_;
  std::vector<uint8_t> streamed_;
  bool launched_ = false, joining_ = false, pending_ = false;
};

class HostStream final : public StreamExecutor {
 public:
  HostStream(cpu::HostDriver* driver, std::vector<GpuSide::StreamChunkSpans> chunks,
             std::shared_ptr<FaultPlan> faults)
      : driver_(driver), chunks_(std::move(chunks)), faults_(std::move(faults)) {}
  const char* name() const override { return "GPU-stream (host stand-in)"; }
  void Launch(const StepWork& w) override {
    const auto t0 = Clock::now();
    uint64_t ran = 0;
    for (size_t c = 0; c < chunks_.size(); ++c) {
      const GpuSide::StreamChunkSpans& ch = chunks_[c];
      Collect(ch, ch.spans, *w.scalars, *w.scalar_index);
      if (work_.empty()) continue;
      if (w.stream_committed != nullptr && !w.stream_committed->empty() &&
          (*w.stream_committed)[c] != 0) {
        for (const layout::StreamLayout::HoldCopy& h : ch.hold_copies)
          std::memcpy(h.param, h.hold, h.bytes);
        continue;
      }
      FailInjected(c, "upload", Applied(ran));
      std::memcpy(ch.slot, ch.host, ch.bytes);
      driver_->Run(work_.data(), work_.size());
      FailInjected(c, "download", Applied(ran));
      std::memcpy(ch.host, ch.slot, ch.bytes);
      ++ran;
    }
    w.times->stream_chunks = ran;
    w.times->stream_ms = MsSince(t0);
  }
  // The data path of GpuSide::SpeculateStream, in host memory.
  void Speculate(size_t c, const std::vector<StepScalars>& scalars,
                 const std::vector<uint32_t>& scalar_index) override {
    const GpuSide::StreamChunkSpans& ch = chunks_.at(c);
    if (!ch.speculative())
      throw Error(ErrorKind::kInternal, "streamed chunk " + std::to_string(c) +
                                            " has no place for a speculative update");
    FailInjected(c, "upload", "speculative update");
    std::memcpy(ch.slot, ch.host, ch.bytes);
    std::memcpy(ch.backup, ch.slot, ch.bytes);
    for (const layout::StreamLayout::HoldCopy& h : ch.hold_copies) std::memcpy(h.hold, h.param, h.bytes);
    Collect(ch, ch.hold_spans, scalars, scalar_index);
    driver_->Run(work_.data(), work_.size());
    FailInjected(c, "download", "speculative update");
    std::memcpy(ch.host, ch.slot, ch.bytes);
  }
  void WaitSpeculated() override {}
  void SetGrad(size_t t, const void* grad) override {
    for (GpuSide::StreamChunkSpans& ch : chunks_)
      for (size_t i = 0; i < ch.spans.size(); ++i) {
        if (ch.span_tensor[i] != t) continue;
        const void* at = static_cast<const uint8_t*>(grad) + ch.span_grad_offset[i];
        ch.spans[i].grad = at;
        if (ch.speculative()) ch.hold_spans[i].grad = at;
      }
  }

 private:
  // work_ = the active spans among `spans` (those of chunk ch or its hold spans).
  void Collect(const GpuSide::StreamChunkSpans& ch, const std::vector<StepSpan>& spans,
               const std::vector<StepScalars>& scalars, const std::vector<uint32_t>& slot) {
    work_.clear();
    for (size_t i = 0; i < spans.size(); ++i) {
      const uint32_t k = slot[ch.span_tensor[i]];
      if (k != kSkipScalarIndex) work_.push_back({&scalars[k], spans[i]});
    }
  }

  // A copy of chunk c that the FaultPlan fails throws as GPU mode's failed copy would.
  // `note` ends the message.
  void FailInjected(size_t c, const char* what, const std::string& note) const {
    if (faults_ == nullptr || !faults_->CopyFails()) return;
    throw Error(ErrorKind::kCuda, std::string("injected failure of ") + what +
                                      " copy of streamed chunk " + std::to_string(c) + " of " +
                                      std::to_string(chunks_.size()) + " (" + note + ")");
  }
  static std::string Applied(uint64_t n) { return std::to_string(n) + " streamed chunks applied"; }

  cpu::HostDriver* driver_;
  std::vector<GpuSide::StreamChunkSpans> chunks_;
  std::shared_ptr<FaultPlan> faults_;
  std::vector<cpu::HostWork> work_;
};

class FnExecutor final : public Executor {
 public:
  explicit FnExecutor(ExecutorFns fns) : fns_(std::move(fns)) {}
  const char* name() const override { return fns_.name; }
  void Launch(const StepWork& w) override {
    if (fns_.launch) fns_.launch(w);
  }
  void WaitParam(size_t t, void* stream) const override {
    if (fns_.wait_param) fns_.wait_param(t, stream);
  }

 private:
  ExecutorFns fns_;
};

}  // namespace

std::unique_ptr<Executor> MakeGpuResident(GpuSide* gpu, std::vector<size_t> hot_tensor,
                                          size_t tensors) {
  return std::make_unique<GpuResident>(gpu, std::move(hot_tensor), tensors);
}
std::unique_ptr<Executor> MakeHostResident(cpu::HostDriver* driver, std::vector<StepSpan> hot,
                                           std::vector<size_t> hot_tensor) {
  return std::make_unique<HostResident>(driver, std::move(hot), std::move(hot_tensor));
}
std::unique_ptr<StreamExecutor> MakeGpuStream(GpuSide* gpu, std::vector<uint8_t> streamed) {
  return std::make_unique<GpuStream>(gpu, std::move(streamed));
}
std::unique_ptr<StreamExecutor> MakeHostStream(cpu::HostDriver* driver,
                                         std::vector<GpuSide::StreamChunkSpans> chunks,
                                         std::shared_ptr<FaultPlan> faults) {
  return std::make_unique<HostStream>(driver, std::move(chunks), std::move(faults));
}
std::unique_ptr<Executor> MakeExecutor(ExecutorFns fns) {
  return std::make_unique<FnExecutor>(std::move(fns));
}

}  // namespace tandem::offload
