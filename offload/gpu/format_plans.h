// FormatPlans: the fused step over a list of spans as gpu::StepPlans, one per format set
// (Note [One plan per format set] in engine/layout/plan_groups.h), launched together with
// a step's scalars; each span reads its tensor's gradient at a fixed offset, which SetGrad
// moves. Used by the GPU-resident executor (the hot spans) and the CUDA stream device
// (each streamed chunk's spans). Built only with CUDA (TANDEM_HAS_CUDA == 1); no CUDA
// type appears here.
//
// Thread safety: one thread at a time; the device current at construction must be
// current when it launches.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/gpu_step.h"
#include "engine/layout/plan_groups.h"
#include "engine/step_scalars.h"

namespace tandem::offload {

class FormatPlans {
 public:
  // span_tensor[i]: the tensor of span i; grad_offset[i]: span i's gradient, in bytes
  // from its tensor's element 0; slot_grad[i] (empty: none): where span i's gradient is
  // once SetSlotGrads (gradient release: uploaded with a streamed chunk). Every span
  // starts left out (kSkipScalarIndex). The plans' device tables come from `memory` (it
  // must outlive them).
  FormatPlans(DeviceAllocator* memory, Algorithm algo, const std::vector<StepSpan>& spans,
              std::vector<uint32_t> span_tensor, std::vector<uint64_t> grad_offset,
              std::vector<const void*> slot_grad = {});

  uint64_t device_bytes() const { return bytes_; }
  // Whether some span's tensor has a scalar index (is stepped).
  bool AnyActive(const std::vector<uint32_t>& scalar_index) const;
  // Launches every plan on `stream` (a cudaStream_t as void*), in format-set order: span i
  // with scalars[scalar_index[span_tensor[i]]]; one launch per plan and per 32 distinct
  // indices (gpu::kMaxScalarGroups). reserve_sms: SMs each launch leaves to other streams.
  void Launch(const std::vector<StepScalars>& scalars, const std::vector<uint32_t>& scalar_index,
              void* stream, int reserve_sms = 0);
  // Spans of tensor t read `grad` + their offset from the next Launch on.
  void SetGrad(size_t t, const void* grad);
  // Spans of tensor t read their slot_grad from the next Launch on (until SetGrad(t)).
  void SetSlotGrads(size_t t);

 private:
  layout::PlanGroups groups_;
  std::vector<std::unique_ptr<gpu::StepPlan>> plans_;  // per format set
  std::vector<uint32_t> span_tensor_;
  std::vector<uint64_t> grad_offset_;
  std::vector<const void*> slot_grad_;
  uint64_t bytes_ = 0;
  std::vector<uint32_t> index_;  // scratch: one plan's indices
};

// Launches `plan` over its spans, span k using scalars[span_index[k]] (kSkipScalarIndex:
// left out), in launches of at most kMaxScalarGroups distinct scalar sets, each leaving out
// the spans of the others: one launch in the usual case (a few groups).
void LaunchScalars(gpu::StepPlan& plan, const std::vector<uint32_t>& span_index,
                   const std::vector<StepScalars>& scalars, void* stream, int reserve_sms = 0);

}  // namespace tandem::offload
