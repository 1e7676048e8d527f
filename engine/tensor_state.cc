#include "engine/tensor_state.h"

#include <string>
#include <type_traits>

#include "engine/fp_bits.h"
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
  const size_t groups = GroupCount(n);
  switch (f.master) {
    case MasterFormat::kF32: master_f32.assign(init, init + n); break;
    case MasterFormat::kBF16:
      master_bf16.resize(n);
      for (size_t i = 0; i < n; ++i) master_bf16[i] = num::F32ToBf16(init[i]);
      break;
    case MasterFormat::kBF16Ecc8:
      master_bf16.resize(n);
      ecc8.resize(n);
      for (size_t i = 0; i < n; ++i) num::EncodeEcc8(init[i], &master_bf16[i], &ecc8[i]);
      break;
    case MasterFormat::kBF16Ecc16:
      master_bf16.resize(n);
      ecc16.resize(n);
      for (size_t i = 0; i < n; ++i) num::EncodeEcc16(init[i], &master_bf16[i], &ecc16[i]);
      break;
  }
  const uint16_t zero_scale = num::GroupScaleBits(0.0f);
  if (has_m_) {
    if (f.momentum == MomentFormat::kF32) {
      m_f32.assign(n, 0.0f);
    } else {
      m_codes.assign(n, 0);
      m_scales.assign(groups, zero_scale);
    }
  }
  if (has_v_) {
    if (f.variance == MomentFormat::kF32) {
      v_f32.assign(n, 0.0f);
    } else {
      v_codes.assign(n, 0);
      v_scales.assign(groups, zero_scale);
    }
  }
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
