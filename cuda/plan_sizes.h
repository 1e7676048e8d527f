// Device memory of the CUDA plans, computed without CUDA: the memory report and the
// planner need these figures in builds without a CUDA toolkit too. The constants mirror
// the device structures; cuda/step_plan.cu and cuda/grad_norm.cu static_assert that they
// agree (Note [Plan sizes]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem::gpu {

// StepPlan: one SpanMeta per span, one WorkUnit per kStepUnitElems elements of a span.
inline constexpr size_t kSpanMetaBytes = 88;
inline constexpr size_t kWorkUnitBytes = 8;
inline constexpr uint64_t kStepUnitElems = 32768;

// GradNormPlan: one NormTensor per tensor; per unit of kNormUnitElems elements a NormUnit
// and a double partial sum; one double total.
inline constexpr size_t kNormTensorBytes = 24;
inline constexpr size_t kNormUnitBytes = 8;
inline constexpr uint64_t kNormUnitElems = 16 * 1024;

inline size_t PredictStepPlanBytes(const std::vector<uint64_t>& span_numels) {
  size_t units = 0;
  for (uint64_t n : span_numels) units += (n + kStepUnitElems - 1) / kStepUnitElems;
  return span_numels.size() * kSpanMetaBytes + units * kWorkUnitBytes;
}

inline size_t PredictGradNormPlanBytes(const std::vector<uint64_t>& tensor_numels) {
  size_t units = 0;
  for (uint64_t n : tensor_numels) units += (n + kNormUnitElems - 1) / kNormUnitElems;
  return tensor_numels.size() * kNormTensorBytes + units * (kNormUnitBytes + sizeof(double)) +
         sizeof(double);
}

}  // namespace tandem::gpu
