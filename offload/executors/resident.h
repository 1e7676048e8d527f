// The resident executors (Note [Executors] in offload/executors/executor.h): the part of
// each tensor whose state lives next to its parameters (Placement::device_count
// elements from element 0). GPU mode keeps it in device memory and steps it with the
// fused launches on the caller's stream (gpu_resident.cc, CUDA); host mode keeps it in
// host memory and steps it with the host kernels (host_resident.cc). Both own their
// layout part and slab; where the master aliases the parameter (Note [Master aliases the
// parameter] in engine/layout/state_layout.h) the parameter is that array.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "engine/layout/state_layout.h"
#include "offload/executors/executor.h"
#include "offload/memory/slab.h"
#include "tandem/faults.h"

namespace tandem::cpu {
class HostDriver;
}

namespace tandem::offload {

struct ResidentSetup {
  Algorithm algorithm = Algorithm::kAdamW;
  const std::vector<TensorSpec>* specs = nullptr;
  const std::vector<StateFormats>* formats = nullptr;  // per tensor
  layout::StateLayout layout;                          // the memory plan's `hot`
  FaultPlan* faults = nullptr;  // asked once by the slab's allocation (may be null)
  // GPU mode: where the device slabs and the plans' tables come from (outlives the
  // executor); host mode: null.
  DeviceAllocator* device_memory = nullptr;
  // Gradient release: per tensor, its gradients' offset in the gradient buffer of
  // grad_bytes (the memory plan's hot_grad_off, hot_grad_bytes); empty without release.
  std::vector<uint64_t> grad_off = {};
  uint64_t grad_bytes = 0;
};

// SMs the fused launch of the GPU-resident spans leaves to the streamed chunks' kernels
// when there are any (its persistent grid would otherwise hold every SM and stall them).
inline constexpr int kStreamSms = 8;

// Host mode: the host kernels on `driver` (which outlives the executor).
std::unique_ptr<Executor> MakeHostResident(ResidentSetup setup, cpu::HostDriver* driver);

// GPU mode, on the caller's `stream` (a cudaStream_t as void*); reserve_sms: SMs the
// fused launch leaves to the streamed chunks' kernels (0 without any). Throws
// Error(kUnsupported) in a build without CUDA.
std::unique_ptr<Executor> MakeGpuResident(ResidentSetup setup, void* stream, int reserve_sms);

// What both keep: the layout part, its slab, and the spans (with gradient and parameter
// pointers) in tensor order, only tensors with resident elements.
class ResidentState {
 public:
  ResidentState(ResidentSetup setup, bool on_device);
  void AddMemory(MemoryReport* r) const;
  void AddInitRegions(std::vector<InitRegion>* regions) const;
  void VisitParts(size_t t, const PartVisitor& visit) const;
  bool MasterIsParam(size_t t) const { return layout_.part(t).alias_param; }
  // Points the spans of tensor t at `grad` (a resident span starts at element 0), unless
  // released in this step (then from EndRelease on); returns where they read now.
  const void* SetGrad(size_t t, const void* grad);
  bool has(size_t t) const { return layout_.part(t).count > 0; }

  // Gradient release (Note [Gradient release] in tandem/optimizer.h): tensor t's
  // resident gradients are to be copied to the gradient buffer, where its spans read
  // them until EndRelease; the copy's destination and size (bytes 0: nothing resident).
  struct Copy {
    void* dst = nullptr;
    const void* src = nullptr;
    uint64_t bytes = 0;
  };
  Copy Release(size_t t);
  // Points every released tensor's spans back at the gradient SetGrad gave, calling
  // repoint(t, grad) for each (the end of a step).
  void EndRelease(const std::function<void(size_t, const void*)>& repoint);

  Algorithm algorithm() const { return algorithm_; }
  const std::vector<StepSpan>& spans() const { return spans_; }
  const std::vector<uint32_t>& span_tensor() const { return span_tensor_; }

 private:
  Algorithm algorithm_;
  const std::vector<TensorSpec>& specs_;
  bool on_device_;
  void PointSpans(size_t t, const void* grad);

  layout::StateLayout layout_;
  Slab slab_, grads_;
  std::vector<uint64_t> grad_off_;
  std::vector<StepSpan> spans_;
  std::vector<uint32_t> span_tensor_;
  std::vector<const void*> grad_;  // per tensor: the gradient SetGrad gave
  std::vector<uint8_t> released_;  // per tensor: released in this step
};

}  // namespace tandem::offload
