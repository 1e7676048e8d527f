// Device memory of the CUDA plans, computed without CUDA: the memory report and the
// planner need these figures in builds without a CUDA toolkit too. The constants mirror
// the device structures; cuda/step_plan.cu and cuda/grad_norm.cu static_assert that they
// agree (Note [Plan sizes]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/grain.h"

namespace tandem::gpu {

// StepPlan: one SpanMeta per span, one WorkUnit per kStepUnitElems elements of a span.
inline constexpr size_t kSpanMetaBytes = 88;
inline constexpr size_t kWorkUnitBytes = 8;
inline constexpr uint64_t kStepUnitElems = 32768;

// GradNormPlan (Note [Exact sum of squares] in engine/exact_sum.h): one NormTensor per
// tensor; per unit (the pieces of about kNormUnitElems elements of one tensor) a NormUnit
// and its partial sum (16 limbs and a flag); the total (the same) and its pinned copy;
// per tensor, its own total (early start's partials) and its pinned copy.
inline constexpr size_t kNormTensorBytes = 32;
inline constexpr size_t kNormUnitBytes = 16;
inline constexpr size_t kNormPartialBytes = 17 * 8;
inline constexpr size_t kNormResultBytes = 17 * 8;
inline constexpr uint64_t kNormUnitElems = kGrainElements;  // Note [Grain]
inline constexpr uint64_t kNormPieceElems = 8192;  // exact::kNormPiece

struct NormSize {
  uint64_t n;
  uint64_t run;  // 0: the whole tensor
};

// Pieces of tensor `s` and how many one unit takes.
inline uint64_t NormPieces(const NormSize& s) {
  if (s.n == 0) return 0;
  const uint64_t run = s.run == 0 ? s.n : s.run;
  return s.n / run * ((run + kNormPieceElems - 1) / kNormPieceElems);
}
inline uint64_t NormPiecesPerUnit(const NormSize& s) {
  const uint64_t run = s.run == 0 ? s.n : s.run;
  const uint64_t piece = run < kNormPieceElems ? run : kNormPieceElems;
  return piece == 0 || kNormUnitElems / piece == 0 ? 1 : kNormUnitElems / piece;
}
inline uint64_t NormUnits(const NormSize& s) {
  const uint64_t per = NormPiecesPerUnit(s);
  return (NormPieces(s) + per - 1) / per;
}

inline size_t PredictStepPlanBytes(const std::vector<uint64_t>& span_numels) {
  size_t units = 0;
  for (uint64_t n : span_numels) units += (n + kStepUnitElems - 1) / kStepUnitElems;
  return span_numels.size() * kSpanMetaBytes + units * kWorkUnitBytes;
}

inline size_t PredictGradNormPlanBytes(const std::vector<NormSize>& tensors) {
  size_t units = 0;
  for (const NormSize& s : tensors) units += NormUnits(s);
  return tensors.size() * (kNormTensorBytes + kNormResultBytes) +
         units * (kNormUnitBytes + kNormPartialBytes) + kNormResultBytes;
}

// GradNormPlan's pinned host memory: the total and each tensor's total.
inline size_t PredictGradNormPinnedBytes(size_t tensors) {
  return (tensors + 1) * kNormResultBytes;
}

}  // namespace tandem::gpu
