// The resident state both modes keep, and the host-resident executor (host mode):
// offload/executors/resident.h.
#include <chrono>
#include <cstring>
#include <utility>

#include "cpu_simd/host_kernels.h"
#include "engine/elapsed.h"
#include "offload/executors/resident.h"
#include "offload/memory/slab.h"

namespace tandem::offload {

ResidentState::ResidentState(ResidentSetup s, bool on_device)
    : algorithm_(s.algorithm),
      specs_(*s.specs),
      on_device_(on_device),
      layout_(std::move(s.layout)),
      slab_(on_device ? MemKind::kDevice : MemKind::kHost, layout_.bytes(), "hot optimizer state",
            s.faults, s.device_memory),
      grads_(on_device ? MemKind::kDevice : MemKind::kHost, s.grad_bytes,
             "released gradients of the GPU-resident state", s.faults, s.device_memory),
      grad_off_(std::move(s.grad_off)) {
  layout_.Bind(slab_.data());
  released_.assign(specs_.size(), 0);
  for (const TensorSpec& sp : specs_) grad_.push_back(sp.grad);
  for (size_t t = 0; t < specs_.size(); ++t) {
    if (layout_.part(t).alias_param)
      layout_.AliasMaster(t, specs_[t].param, (*s.formats)[t].master);
    const layout::Part& p = layout_.part(t);
    if (p.count == 0) continue;
    StepSpan sp = p.state;
    sp.grad = specs_[t].grad;
    sp.grad_dtype = specs_[t].grad_dtype;
    sp.param_dtype = specs_[t].param_dtype;
    sp.param = p.alias_param ? nullptr : specs_[t].param;
    spans_.push_back(sp);
    span_tensor_.push_back(static_cast<uint32_t>(t));
  }
}

void ResidentState::AddMemory(MemoryReport* r) const {
  layout_.Report(on_device_ ? &r->device : &r->host);
  r->classes.gpu_resident += layout_.bytes();
  (on_device_ ? r->device : r->host).grads += grads_.size();
}

void ResidentState::AddInitRegions(std::vector<InitRegion>* regions) const {
  for (size_t t = 0; t < specs_.size(); ++t)
    if (layout_.part(t).count > 0)
      regions->push_back(RegionOf(specs_[t], layout_.part(t), /*staged=*/on_device_));
}

void ResidentState::VisitParts(size_t t, const PartVisitor& visit) const {
  visit(layout_.part(t), on_device_);
}

void ResidentState::PointSpans(size_t t, const void* grad) {
  for (size_t i = 0; i < spans_.size(); ++i)
    if (span_tensor_[i] == t) spans_[i].grad = grad;
}

const void* ResidentState::SetGrad(size_t t, const void* grad) {
  grad_[t] = grad;
  if (released_[t] != 0) return grads_.data() + grad_off_[t];
  PointSpans(t, grad);
  return grad;
}

ResidentState::Copy ResidentState::Release(size_t t) {
  if (!has(t) || grad_off_.empty()) return {};
  uint8_t* dst = grads_.data() + grad_off_[t];
  released_[t] = 1;
  PointSpans(t, dst);
  return {dst, grad_[t], layout_.part(t).count * DTypeSize(specs_[t].grad_dtype)};
}

void ResidentState::EndRelease(const std::function<void(size_t, const void*)>& repoint) {
  for (size_t t = 0; t < released_.size(); ++t) {
    if (released_[t] == 0) continue;
    released_[t] = 0;
    PointSpans(t, grad_[t]);
    repoint(t, grad_[t]);
  }
}

namespace {

class HostResident final : public Executor {
 public:
  HostResident(ResidentSetup setup, cpu::HostDriver* driver)
      : release_(!setup.grad_off.empty()),
        state_(std::move(setup), /*on_device=*/false),
        driver_(driver) {}
  const char* name() const override { return "host-resident"; }
  Roles roles() override { return {}; }  // the host kernels on the calling thread: none
  void AddMemory(MemoryReport* r) const override { state_.AddMemory(r); }
  void AddInitRegions(std::vector<InitRegion>* regions) const override {
    state_.AddInitRegions(regions);
  }
  void VisitParts(size_t t, const PartVisitor& visit) const override {
    state_.VisitParts(t, visit);
  }
  bool MasterIsParam(size_t t) const override { return state_.MasterIsParam(t); }
  void SetGrad(size_t t, const void* grad) override { state_.SetGrad(t, grad); }
  // Host mode's "device copy" of a released gradient: at once, on this thread.
  void GradReady(size_t t, bool, const std::vector<uint8_t>&, const GradMark&) override {
    if (!release_) return;
    const ResidentState::Copy c = state_.Release(t);
    if (c.bytes > 0) std::memcpy(c.dst, c.src, c.bytes);
  }
  void EndEarlyStart() noexcept override {
    state_.EndRelease([](size_t, const void*) {});
  }
  void Launch(const StepWork& w) override {
    if (state_.spans().empty()) return;
    const auto t0 = std::chrono::steady_clock::now();
    work_.clear();
    for (size_t i = 0; i < state_.spans().size(); ++i) {
      const uint32_t k = (*w.scalar_index)[state_.span_tensor()[i]];
      if (k != kSkipScalarIndex) work_.push_back({&(*w.scalars)[k], state_.spans()[i]});
    }
    driver_->Run(work_.data(), work_.size());
    // Host mode: the "device" is the host.
    w.times->gpu_update_ms = MsSince(t0);
  }

 private:
  bool release_;
  ResidentState state_;
  cpu::HostDriver* driver_;
  std::vector<cpu::HostWork> work_;
};

}  // namespace

std::unique_ptr<Executor> MakeHostResident(ResidentSetup setup, cpu::HostDriver* driver) {
  return std::make_unique<HostResident>(std::move(setup), driver);
}

}  // namespace tandem::offload
