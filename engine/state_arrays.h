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
#include "tandem/types.h"

namespace tandem {

enum class StateArray : uint8_t {
  kMasterF32, kMasterBf16, kEcc8, kEcc16, kMF32, kMCodes, kMScales, kVF32, kVCodes, kVScales
};
inline constexpr int kStateArrayCount = 10;

// The table of state arrays, the one source of what each array is called, what one entry
// holds and which checkpoint section carries it (checkpoint/sections.cc static_asserts
// its SectionKind against section_id; section ids are written to disk and never
// renumbered).
struct StateArrayInfo {
  StateArray array;
  const char* name;     // "master_f32", ...: snapshots, checkpoints, the binding's dicts
  const char* dtype;    // what an entry holds: "f32", "bf16" (bit patterns), "i8", "u8", "i16"
  uint8_t entry_bytes;  // bytes per entry
  uint32_t section_id;  // the checkpoint's SectionKind of this array
  bool master;          // one of the master's arrays (fp32, or the bf16 part and its ecc)
  bool per_group;       // one entry per quantization group (else per element)
};
inline constexpr StateArrayInfo kStateArrays[kStateArrayCount] = {
    {StateArray::kMasterF32, "master_f32", "f32", 4, 1, true, false},
    {StateArray::kMasterBf16, "master_bf16", "bf16", 2, 2, true, false},
    {StateArray::kEcc8, "ecc8", "i8", 1, 3, true, false},
    {StateArray::kEcc16, "ecc16", "i16", 2, 4, true, false},
    {StateArray::kMF32, "m_f32", "f32", 4, 5, false, false},
    {StateArray::kMCodes, "m_codes", "i8", 1, 6, false, false},
    {StateArray::kMScales, "m_scales", "bf16", 2, 7, false, true},
    {StateArray::kVF32, "v_f32", "f32", 4, 8, false, false},
    {StateArray::kVCodes, "v_codes", "u8", 1, 9, false, false},
    {StateArray::kVScales, "v_scales", "bf16", 2, 10, false, true},
};
constexpr const StateArrayInfo& Info(StateArray a) { return kStateArrays[static_cast<int>(a)]; }
constexpr bool TableInOrder() {
  for (int i = 0; i < kStateArrayCount; ++i)
    if (static_cast<int>(kStateArrays[i].array) != i) return false;
  return true;
}
static_assert(TableInOrder(), "kStateArrays lists the arrays in StateArray order");

// One of the master's arrays (fp32, or the bf16 part and its correction).
constexpr bool IsMasterArray(StateArray a) { return Info(a).master; }

// One scale per quantization group (else one entry per element).
constexpr bool PerGroup(StateArray a) { return Info(a).per_group; }

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

// Entries array `a` has for `n` elements of a tensor in formats `f` under `algo` and its
// group's `h` (0 where the formats or the algorithm keep no such array).
uint64_t ArrayEntries(StateArray a, Algorithm algo, const HyperParams& h, const StateFormats& f,
                      uint64_t n);

// Sizes every array of a TensorSnapshot or TensorState (ForEachStateVector) for `n`
// elements in formats `f` (entries value-initialised; the initial state is
// EncodeInitialState's, engine/initial_state.h).
template <typename Arrays>
void SizeStateVectors(Arrays& t, Algorithm algo, const HyperParams& h, const StateFormats& f,
                      uint64_t n) {
  ForEachStateVector(t,
                     [&](StateArray a, auto& v) { v.assign(ArrayEntries(a, algo, h, f, n), {}); });
}

// Elements [off, off + count) of `s`: every state array pointer, the gradient and the
// parameter that are set advance to element `off`. `off` must be a multiple of
// kQuantGroup (a group never splits); the caller keeps inside the span.
StepSpan SubSpan(const StepSpan& s, uint64_t off, uint64_t count);

// Copies every state array of `src` into the same array of `dst` (same n and formats).
void CopyStateArrays(const StepSpan& dst, const StepSpan& src);

// CopyStateArrays with non-temporal stores where the machine has them (x86-64): `dst`'s
// cache lines are written without being read first nor kept in the cache, for a copy
// that is not read again soon (a speculation's backup). The stores are fenced before it
// returns.
void CopyStateArraysStreaming(const StepSpan& dst, const StepSpan& src);

}  // namespace tandem
