// TensorState: the optimizer state of one tensor in ordinary host memory, in the formats
// chosen, with helpers to initialise it from fp32 weights, to read it back and to cut
// group-aligned StepSpans out of it. Used by the host-only path, tests, tools and the demo.
// Not thread-safe for concurrent mutation; distinct spans may be stepped concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/step_span.h"
#include "tandem/types.h"

namespace tandem {

class TensorState {
 public:
  // State for n elements; master encoded from `init` (n floats), moments zero.
  TensorState(Algorithm algo, const HyperParams& hyper, const StateFormats& formats,
              const float* init, size_t n);

  size_t size() const { return n_; }
  const StateFormats& formats() const { return formats_; }

  // The span of elements [offset, offset + count): offset must be a multiple of
  // kQuantGroup and the range inside the tensor (Error(kInvalidArgument) otherwise).
  // grad/param point at element `offset` of the caller's buffers.
  StepSpan Span(size_t offset, size_t count, const void* grad, DType grad_dtype,
                void* param = nullptr, DType param_dtype = DType::kF32);

  // The decoded fp32 master weight / moments of element i (moments decode q8 codes).
  float Master(size_t i) const;
  float Momentum(size_t i) const;
  float Variance(size_t i) const;  // v, not sqrt(v)

  // Raw arrays (empty where unused), e.g. for byte-for-byte comparisons.
  std::vector<float> master_f32;
  std::vector<uint16_t> master_bf16;
  std::vector<int8_t> ecc8;
  std::vector<int16_t> ecc16;
  std::vector<float> m_f32, v_f32;
  std::vector<uint8_t> m_codes, v_codes;
  std::vector<uint16_t> m_scales, v_scales;

 private:
  size_t n_;
  StateFormats formats_;
  bool has_m_, has_v_;
};

}  // namespace tandem
