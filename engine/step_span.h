// StepSpan: non-owning views of one contiguous run of elements of one tensor and of its
// optimizer state, the unit every kernel (reference, SIMD, CUDA) steps.
//
// Contract: element 0 of the span is the first element of a quantization group of its
// tensor (offset % kQuantGroup == 0), so group g of the span uses scales[g]. The last
// group may be partial only if the span ends where the tensor ends. Pointers that a
// format or algorithm does not use must be null; the others must be non-null when n > 0.
// Spans of distinct calls must not overlap, except that `param` may alias `master.bf16`
// when param_dtype is bf16 (the model's bf16 weight then *is* the master's bf16 part).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/step_scalars.h"
#include "tandem/types.h"

namespace tandem {

struct MasterSpan {
  float* f32 = nullptr;       // MasterFormat::kF32
  uint16_t* bf16 = nullptr;   // kBF16, kBF16Ecc8, kBF16Ecc16: bf16 bit patterns
  int8_t* ecc8 = nullptr;     // kBF16Ecc8
  int16_t* ecc16 = nullptr;   // kBF16Ecc16
};

struct MomentSpan {
  float* f32 = nullptr;        // MomentFormat::kF32
  uint8_t* codes = nullptr;    // kQ8: n codes (int8 for momentum, uint8 for variance)
  uint16_t* scales = nullptr;  // kQ8: ceil(n / kQuantGroup) bf16 scales
};

struct StepSpan {
  size_t n = 0;
  StateFormats formats;
  const void* grad = nullptr;  // n elements of grad_dtype
  DType grad_dtype = DType::kF32;
  void* param = nullptr;       // optional: n elements of param_dtype written after the update
  DType param_dtype = DType::kF32;
  MasterSpan master;
  MomentSpan m;  // used when the algorithm keeps a first moment
  MomentSpan v;  // used by Adam and AdamW
};

// Number of quantization groups covering n elements.
constexpr size_t GroupCount(size_t n) { return (n + kQuantGroup - 1) / kQuantGroup; }

// Throws Error(kInvalidArgument) naming the first problem: unknown enum values, a format
// combination the algorithm cannot use, a required pointer that is null, an unused one
// that is set. `what` names the span in the message (e.g. "tensor 'wq.3' chunk 2").
void ValidateStepSpan(const StepScalars& s, const StepSpan& span, const char* what);

}  // namespace tandem
