// Element i of a parameter or gradient buffer of dtype t, read as fp32 (exact) or written
// from fp32 (round to nearest even): the one place the dtype switch lives.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/fp_bits.h"
#include "tandem/types.h"

namespace tandem::num {

TANDEM_HD float LoadAsF32(const void* p, DType t, size_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kBF16: return Bf16ToF32(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16: return F16ToF32(static_cast<const uint16_t*>(p)[i]);
  }
  return 0.0f;
}

TANDEM_HD void StoreFromF32(void* p, DType t, size_t i, float x) {
  switch (t) {
    case DType::kF32: static_cast<float*>(p)[i] = x; break;
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = F32ToBf16(x); break;
    case DType::kF16: static_cast<uint16_t*>(p)[i] = F32ToF16(x); break;
  }
}

}  // namespace tandem::num
