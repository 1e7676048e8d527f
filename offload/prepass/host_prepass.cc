// The host pre-pass (offload/prepass/prepass.h).
#include <chrono>

#include "cpu_simd/host_kernels.h"
#include "engine/elapsed.h"
#include "engine/layout/tensor_rules.h"
#include "offload/prepass/prepass.h"
#include "offload/prepass/ready_partials.h"

namespace tandem::offload {
namespace {

class HostPrepass final : public Prepass {
 public:
  HostPrepass(cpu::HostDriver* driver, const std::vector<TensorSpec>& specs)
      : driver_(driver), ready_(specs.size()) {
    for (const TensorSpec& s : specs)
      grads_.push_back({s.grad, s.numel, s.grad_dtype, layout::NormRun(s)});
    numels_.reserve(specs.size());
    for (const TensorSpec& s : specs) numels_.push_back(s.numel);
  }
  NormResult Run(const std::vector<uint8_t>& active, StageTimes* times) override {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<uint8_t>& early = ready_.ready();
    for (size_t t = 0; t < grads_.size(); ++t)
      grads_[t].n = (active.empty() || active[t] != 0) && early[t] == 0 ? numels_[t] : 0;
    NormResult norm;
    driver_->Execute([&] { norm = HostGradNorm(grads_); });
    for (size_t t = 0; t < grads_.size(); ++t)
      if ((active.empty() || active[t] != 0) && early[t] != 0) AddNorm(norm, ready_.partial(t));
    times->prepass_ms = MsSince(t0);
    return norm;
  }
  void SetGrad(size_t t, const void* grad) override { grads_[t].ptr = grad; }
  // The tensor's statistics at once, on the optimizer's threads.
  void TensorReady(size_t t, void*) override {
    ready_.Readied(t);
    std::vector<HostGrad> one{grads_[t]};
    one[0].n = numels_[t];
    NormResult r;
    driver_->Execute([&] { r = HostGradNorm(one); });
    ready_.Landed(t, r);
  }
  NormResult Known() override { return ready_.known(); }
  void EndStep() override { ready_.Clear(); }

 private:
  cpu::HostDriver* driver_;
  std::vector<HostGrad> grads_;  // n: the tensor's, or 0 when not read by this Run
  std::vector<uint64_t> numels_;
  ReadyPartials ready_;
};

}  // namespace

std::unique_ptr<Prepass> MakeHostPrepass(cpu::HostDriver* driver,
                                         const std::vector<TensorSpec>& specs) {
  return std::make_unique<HostPrepass>(driver, specs);
}

}  // namespace tandem::offload
