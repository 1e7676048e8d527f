#include "engine/tensor_state.h"

#include <string>
#include <type_traits>

#include "engine/fp_bits.h"
#include "engine/initial_state.h"
#include "engine/master_codec.h"
#include "engine/q8_codec.h"
#include "engine/state_arrays.h"
#include "tandem/error.h"

namespace tandem {

TensorState::TensorState(Algorithm algo, const HyperParams& hyper, const StateFormats& f,
                         const float* init, size_t n)
    : n_(n), formats_(f), has_m_(HasMomentum(algo, hyper)), has_v_(HasVariance(algo)) {
  if (n > 0 && init == nullptr)
    throw Error(ErrorKind::kInvalidArgument, "TensorState: init is null for " +
                                                 std::to_string(n) + " elements");
  // Sized for the formats, then filled by the one encoder (Note [Initial state]).
  SizeStateVectors(*this, algo, hyper, f, n);
  if (n > 0) EncodeInitialState(init, DType::kF32, Span(0, n, nullptr, DType::kF32));
}

StepSpan TensorState::Span(size_t offset, size_t count, const void* grad, DType grad_dtype,
                           void* param, DType param_dtype) {
  if (offset % kQuantGroup != 0 || offset > n_ || count > n_ - offset)
    throw Error(ErrorKind::kInvalidArgument,
                "TensorState::Span: range [" + std::to_string(offset) + ", " +
                    std::to_string(offset + count) + ") of a " + std::to_string(n_) +
                    "-element tensor must start on a group boundary and lie inside it");
  StepSpan s;
  s.n = count;
  s.formats = formats_;
  s.grad = grad;
  s.grad_dtype = grad_dtype;
  s.param = param;
  s.param_dtype = param_dtype;
  void* at[kStateArrayCount];
  ForEachStateVector(*this, [&](StateArray a, auto& vec) {
    at[static_cast<int>(a)] = vec.empty() ? nullptr : vec.data() + ArrayIndex(a, offset);
  });
  ForEachStateArray(s, [&](StateArray a, auto*& p) {
    p = static_cast<std::remove_reference_t<decltype(p)>>(at[static_cast<int>(a)]);
  });
  return s;
}

float TensorState::Master(size_t i) const {
  return num::DecodeMaster(formats_.master, master_f32.data(), master_bf16.data(), ecc8.data(),
                           ecc16.data(), i);
}

float TensorState::Momentum(size_t i) const {
  if (!has_m_) return 0.0f;
  if (formats_.momentum == MomentFormat::kF32) return m_f32[i];
  return num::DecodeMomentum(static_cast<int8_t>(m_codes[i]),
                             num::Bf16ToF32(m_scales[i / kQuantGroup]));
}

float TensorState::Variance(size_t i) const {
  if (!has_v_) return 0.0f;
  if (formats_.variance == MomentFormat::kF32) return v_f32[i];
  const float u = num::DecodeSqrtVariance(v_codes[i], num::Bf16ToF32(v_scales[i / kQuantGroup]));
  return u * u;
}

}  // namespace tandem
