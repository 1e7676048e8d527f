// The state arrays, one table: every place that walks the arrays of a StepSpan, a
// TensorSnapshot or a TensorState (sub-spans, copies, snapshots, layouts) goes through
// the visitors below, so a new array is added here once.
//
// Note [State arrays]: ten arrays, in this order: the master (fp32, or the bf16 part and
// an 8- or 16-bit correction), the first moment (fp32, or q8 codes and per-group scales)
// and the second moment (the same). Per-element arrays have one entry per element;
// scales one per quantization group of kQuantGroup elements (docs/numerics.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/step_span.h"

namespace tandem {

enum class StateArray : uint8_t {
  kMasterF32, kMasterBf16, kEcc8, kEcc16, kMF32, kMCodes, kMScales, kVF32, kVCodes, kVScales
};
inline constexpr int kStateArrayCount = 10;

// One of the master's arrays (fp32, or the bf16 part and its correction).
constexpr bool IsMasterArray(StateArray a) {
  return a == StateArray::kMasterF32 || a == StateArray::kMasterBf16 ||
         a == StateArray::kEcc8 || a == StateArray::kEcc16;
}

// One scale per quantization group (else one entry per element).
constexpr bool PerGroup(StateArray a) {
  return a == StateArray::kMScales || a == StateArray::kVScales;
}

// Entries of array `a` for `n` elements, and the index of element `off`'s entry (`off`
// a multiple of kQuantGroup for the per-group arrays).
constexpr uint64_t ArrayEntries(StateArray a, uint64_t n) {
  return PerGroup(a) ? GroupCount(n) : n;
}
constexpr uint64_t ArrayIndex(StateArray a, uint64_t off) {
  return PerGroup(a) ? off / kQuantGroup : off;
}

// Calls fn(StateArray, pointer&) for every state array pointer of `s` (StepSpan or
// const StepSpan), in Note [State arrays] order.
template <typename Span, typename Fn>
void ForEachStateArray(Span& s, Fn&& fn) {
  fn(StateArray::kMasterF32, s.master.f32);
  fn(StateArray::kMasterBf16, s.master.bf16);
  fn(StateArray::kEcc8, s.master.ecc8);
  fn(StateArray::kEcc16, s.master.ecc16);
  fn(StateArray::kMF32, s.m.f32);
  fn(StateArray::kMCodes, s.m.codes);
  fn(StateArray::kMScales, s.m.scales);
  fn(StateArray::kVF32, s.v.f32);
  fn(StateArray::kVCodes, s.v.codes);
  fn(StateArray::kVScales, s.v.scales);
}

// Calls fn(StateArray, vector&) for every array of a TensorSnapshot or a TensorState
// (both name their vectors alike), in the same order.
template <typename Arrays, typename Fn>
void ForEachStateVector(Arrays& t, Fn&& fn) {
  fn(StateArray::kMasterF32, t.master_f32);
  fn(StateArray::kMasterBf16, t.master_bf16);
  fn(StateArray::kEcc8, t.ecc8);
  fn(StateArray::kEcc16, t.ecc16);
  fn(StateArray::kMF32, t.m_f32);
  fn(StateArray::kMCodes, t.m_codes);
  fn(StateArray::kMScales, t.m_scales);
  fn(StateArray::kVF32, t.v_f32);
  fn(StateArray::kVCodes, t.v_codes);
  fn(StateArray::kVScales, t.v_scales);
}

// Elements [off, off + count) of `s`: every state array pointer, the gradient and the
// parameter that are set advance to element `off`. `off` must be a multiple of
// kQuantGroup (a group never splits); the caller keeps inside the span.
StepSpan SubSpan(const StepSpan& s, uint64_t off, uint64_t count);

// Copies every state array of `src` into the same array of `dst` (same n and formats).
void CopyStateArrays(const StepSpan& dst, const StepSpan& src);

}  // namespace tandem
