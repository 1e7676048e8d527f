// The scalar reference step (docs/numerics.md). Deliberately plain: one group at a time,
// decode -> update each element -> encode. Speed is the other kernels' business.
#include "engine/reference_step.h"

#include <algorithm>

#include "engine/dtype_io.h"
#include "engine/fp_bits.h"
#include "engine/fp_mode.h"
#include "engine/master_codec.h"
#include "engine/q8_codec.h"
#include "engine/update_math.h"

namespace tandem {
namespace {

using num::Bf16ToF32;

float DecodeMaster(const StepSpan& sp, size_t i) {
  const MasterSpan& m = sp.master;
  return num::DecodeMaster(sp.formats.master, m.f32, m.bf16, m.ecc8, m.ecc16, i);
}

// Stores w into the master format; returns the decoded value (what a later load sees).
void EncodeMaster(const StepSpan& sp, size_t i, float w) {
  switch (sp.formats.master) {
    case MasterFormat::kF32: sp.master.f32[i] = w; break;
    case MasterFormat::kBF16: sp.master.bf16[i] = num::F32ToBf16(w); break;
    case MasterFormat::kBF16Ecc8: num::EncodeEcc8(w, &sp.master.bf16[i], &sp.master.ecc8[i]); break;
    case MasterFormat::kBF16Ecc16:
      num::EncodeEcc16(w, &sp.master.bf16[i], &sp.master.ecc16[i]);
      break;
  }
}

// The parameter the model sees: the master's own bf16 for bf16-based masters and bf16
// parameters, otherwise the decoded master converted with round-to-nearest-even.
void WriteParam(const StepSpan& sp, size_t i) {
  if (sp.param == nullptr) return;
  if (sp.param_dtype == DType::kBF16 && sp.formats.master != MasterFormat::kF32) {
    static_cast<uint16_t*>(sp.param)[i] = sp.master.bf16[i];
    return;
  }
  num::StoreFromF32(sp.param, sp.param_dtype, i, DecodeMaster(sp, i));
}

}  // namespace

void ReferenceStep(const StepScalars& s, const StepSpan& sp) {
  ValidateStepSpan(s, sp, "reference step");
  FpModeGuard fp_mode;
  const bool adam = s.algo == Algorithm::kAdamW || s.algo == Algorithm::kAdam;
  const bool has_m = s.has_momentum != 0;
  const bool m_q8 = sp.formats.momentum == MomentFormat::kQ8;
  const bool v_q8 = sp.formats.variance == MomentFormat::kQ8;

  float w[kQuantGroup], m[kQuantGroup], v[kQuantGroup], u[kQuantGroup];
  for (size_t g0 = 0, gi = 0; g0 < sp.n; g0 += kQuantGroup, ++gi) {
    const int len = static_cast<int>(std::min<size_t>(kQuantGroup, sp.n - g0));
    // Decode this group's state.
    for (int i = 0; i < len; ++i) w[i] = DecodeMaster(sp, g0 + i);
    if (has_m) {
      if (m_q8)
        num::DecodeMomentumGroup(reinterpret_cast<const int8_t*>(sp.m.codes + g0),
                                 sp.m.scales[gi], len, m);
      else
        std::copy_n(sp.m.f32 + g0, len, m);
    }
    if (adam) {
      if (v_q8) {
        num::DecodeSqrtVarianceGroup(sp.v.codes + g0, sp.v.scales[gi], len, u);
        for (int i = 0; i < len; ++i) v[i] = u[i] * u[i];
      } else {
        std::copy_n(sp.v.f32 + g0, len, v);
      }
    }
    // Update each element.
    for (int i = 0; i < len; ++i) {
      const float g = num::LoadAsF32(sp.grad, sp.grad_dtype, g0 + i);
      switch (s.algo) {
        case Algorithm::kAdamW:
        case Algorithm::kAdam: num::AdamElement(s, g, w[i], m[i], v[i], &u[i]); break;
        case Algorithm::kLion: num::LionElement(s, g, w[i], m[i]); break;
        case Algorithm::kSGD: num::SgdElement(s, g, w[i], m[i]); break;
      }
    }
    // Encode the new state and write the parameter.
    for (int i = 0; i < len; ++i) EncodeMaster(sp, g0 + i, w[i]);
    if (has_m) {
      if (m_q8)
        num::EncodeMomentumGroup(m, len, reinterpret_cast<int8_t*>(sp.m.codes + g0),
                                 &sp.m.scales[gi]);
      else
        std::copy_n(m, len, sp.m.f32 + g0);
    }
    if (adam) {
      if (v_q8)
        num::EncodeSqrtVarianceGroup(u, len, sp.v.codes + g0, &sp.v.scales[gi]);
      else
        std::copy_n(v, len, sp.v.f32 + g0);
    }
    for (int i = 0; i < len; ++i) WriteParam(sp, g0 + i);
  }
}

}  // namespace tandem
