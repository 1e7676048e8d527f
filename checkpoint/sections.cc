#include "checkpoint/sections.h"

#include <vector>

#include "engine/state_arrays.h"

namespace tandem::ckpt {

// The data kinds are engine's state arrays, one to one: section id = the table's
// section_id (engine/state_arrays.h), in the table's order. Values on disk never change.
constexpr bool Tied(SectionKind kind, StateArray a) {
  return static_cast<uint32_t>(kind) == Info(a).section_id;
}
static_assert(Tied(SectionKind::kMasterF32, StateArray::kMasterF32) &&
                  Tied(SectionKind::kMasterBf16, StateArray::kMasterBf16) &&
                  Tied(SectionKind::kEcc8, StateArray::kEcc8) &&
                  Tied(SectionKind::kEcc16, StateArray::kEcc16) &&
                  Tied(SectionKind::kMF32, StateArray::kMF32) &&
                  Tied(SectionKind::kMCodes, StateArray::kMCodes) &&
                  Tied(SectionKind::kMScales, StateArray::kMScales) &&
                  Tied(SectionKind::kVF32, StateArray::kVF32) &&
                  Tied(SectionKind::kVCodes, StateArray::kVCodes) &&
                  Tied(SectionKind::kVScales, StateArray::kVScales),
              "checkpoint/format.h SectionKind and engine's state-array table disagree");
static_assert(kFirstDataKind == Info(StateArray::kMasterF32).section_id &&
                  kLastDataKind == kFirstDataKind + kStateArrayCount - 1,
              "the data kinds are the state arrays' section ids, consecutive");

namespace {

// The state array of a data kind (a data kind: KindFromId's range).
StateArray ArrayOf(SectionKind kind) {
  return static_cast<StateArray>(static_cast<uint32_t>(kind) - kFirstDataKind);
}

template <typename V>
ArrayView View(const V& v) {
  return {v.data(), v.size() * sizeof(typename V::value_type)};
}

template <typename V>
void* Resize(V* v, size_t bytes) {
  v->resize(bytes / sizeof(typename V::value_type));
  return v->data();
}

// Calls f(array) for the array of data kind `kind`; returns f's result.
template <typename R, typename T, typename F>
R WithArray(T& t, SectionKind kind, F&& f) {
  R out{};
  const StateArray want = ArrayOf(kind);
  ForEachStateVector(t, [&](StateArray a, auto& v) {
    if (a == want) out = f(v);
  });
  return out;
}

}  // namespace

const char* KindName(SectionKind kind) noexcept {
  if (kind == SectionKind::kManifest) return "manifest";
  if (!KindFromId(static_cast<uint32_t>(kind))) return "unknown";
  return Info(ArrayOf(kind)).name;
}

std::optional<SectionKind> KindFromId(uint32_t id) noexcept {
  if (id < kFirstDataKind || id > kLastDataKind) return std::nullopt;
  return static_cast<SectionKind>(id);
}

size_t KindElementSize(SectionKind kind) noexcept {
  if (!KindFromId(static_cast<uint32_t>(kind))) return 1;
  return Info(ArrayOf(kind)).entry_bytes;
}

bool KindCompressesWell(SectionKind kind) noexcept {
  // Measured on training-like state (bench/results/checkpoint_dev2core.md):
  // bf16 weights 1.28x (the exponent byte repeats), bf16 scales 1.46x; codes, ecc and fp32
  // arrays 1.00-1.08x, not worth igzip's time.
  return kind == SectionKind::kMasterBf16 || kind == SectionKind::kMScales ||
         kind == SectionKind::kVScales;
}

ArrayView ViewOf(const TensorSnapshot& t, SectionKind kind) {
  return WithArray<ArrayView>(t, kind, [](const auto& v) { return View(v); });
}

void* ResizeArray(TensorSnapshot* t, SectionKind kind, size_t bytes) {
  return WithArray<void*>(*t, kind, [bytes](auto& v) { return Resize(&v, bytes); });
}

}  // namespace tandem::ckpt
