#include "engine/initial_state.h"

#include <algorithm>
#include <cstring>

#include "engine/dtype_io.h"
#include "engine/fp_bits.h"
#include "engine/master_codec.h"
#include "engine/q8_codec.h"

namespace tandem {
namespace {

// Writes the initial state of n elements whose parameters `load(i)` returns into the
// arrays of `d` (pointers at the block's first element; null: not kept or aliased).
template <typename Load>
void EncodeBlock(Load load, size_t n, const StepSpan& d) {
  const MasterSpan& m = d.master;
  switch (d.formats.master) {
    case MasterFormat::kF32:
      if (m.f32 != nullptr)
        for (size_t i = 0; i < n; ++i) m.f32[i] = load(i);
      break;
    case MasterFormat::kBF16:
      if (m.bf16 != nullptr)
        for (size_t i = 0; i < n; ++i) m.bf16[i] = num::F32ToBf16(load(i));
      break;
    case MasterFormat::kBF16Ecc8:
      if (m.bf16 != nullptr) {
        for (size_t i = 0; i < n; ++i) num::EncodeEcc8(load(i), &m.bf16[i], &m.ecc8[i]);
      } else {
        uint16_t hi;  // the parameter itself: only the correction is written
        for (size_t i = 0; i < n; ++i) num::EncodeEcc8(load(i), &hi, &m.ecc8[i]);
      }
      break;
    case MasterFormat::kBF16Ecc16:
      if (m.bf16 != nullptr) {
        for (size_t i = 0; i < n; ++i) num::EncodeEcc16(load(i), &m.bf16[i], &m.ecc16[i]);
      } else {
        uint16_t hi;
        for (size_t i = 0; i < n; ++i) num::EncodeEcc16(load(i), &hi, &m.ecc16[i]);
      }
      break;
  }
  const uint16_t zero_scale = num::GroupScaleBits(0.0f);
  for (const MomentSpan* ms : {&d.m, &d.v}) {
    if (ms->f32 != nullptr) std::memset(ms->f32, 0, n * sizeof(float));  // 0.0f: all zero bits
    if (ms->codes != nullptr) std::memset(ms->codes, 0, n);
    if (ms->scales != nullptr) std::fill_n(ms->scales, GroupCount(n), zero_scale);
  }
}

}  // namespace

void EncodeInitialState(const void* src, DType dtype, const StepSpan& d) {
  const size_t n = d.n;
  switch (dtype) {
    case DType::kF32: {
      const float* p = static_cast<const float*>(src);
      EncodeBlock([p](size_t i) { return p[i]; }, n, d);
      return;
    }
    case DType::kBF16: {
      const uint16_t* p = static_cast<const uint16_t*>(src);
      EncodeBlock([p](size_t i) { return num::Bf16ToF32(p[i]); }, n, d);
      return;
    }
    default:
      EncodeBlock([src, dtype](size_t i) { return num::LoadAsF32(src, dtype, i); }, n, d);
      return;
  }
}

}  // namespace tandem
