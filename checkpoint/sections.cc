#include "checkpoint/sections.h"

#include <vector>

namespace tandem::ckpt {
namespace {

template <typename V>
ArrayView View(const V& v) {
  return {v.data(), v.size() * sizeof(typename V::value_type)};
}

template <typename V>
void* Resize(V* v, size_t bytes) {
  v->resize(bytes / sizeof(typename V::value_type));
  return v->data();
}

// Calls f(array) for the array of `kind`; returns f's result.
template <typename T, typename F>
auto WithArray(T& t, SectionKind kind, F&& f) {
  switch (kind) {
    case SectionKind::kMasterF32: return f(t.master_f32);
    case SectionKind::kMasterBf16: return f(t.master_bf16);
    case SectionKind::kEcc8: return f(t.ecc8);
    case SectionKind::kEcc16: return f(t.ecc16);
    case SectionKind::kMF32: return f(t.m_f32);
    case SectionKind::kMCodes: return f(t.m_codes);
    case SectionKind::kMScales: return f(t.m_scales);
    case SectionKind::kVF32: return f(t.v_f32);
    case SectionKind::kVCodes: return f(t.v_codes);
    case SectionKind::kVScales: return f(t.v_scales);
    case SectionKind::kManifest: break;
  }
  return f(t.master_f32);  // not reached for data kinds; callers pass data kinds only
}

}  // namespace

const char* KindName(SectionKind kind) noexcept {
  switch (kind) {
    case SectionKind::kManifest: return "manifest";
    case SectionKind::kMasterF32: return "master_f32";
    case SectionKind::kMasterBf16: return "master_bf16";
    case SectionKind::kEcc8: return "ecc8";
    case SectionKind::kEcc16: return "ecc16";
    case SectionKind::kMF32: return "m_f32";
    case SectionKind::kMCodes: return "m_codes";
    case SectionKind::kMScales: return "m_scales";
    case SectionKind::kVF32: return "v_f32";
    case SectionKind::kVCodes: return "v_codes";
    case SectionKind::kVScales: return "v_scales";
  }
  return "unknown";
}

std::optional<SectionKind> KindFromId(uint32_t id) noexcept {
  if (id < kFirstDataKind || id > kLastDataKind) return std::nullopt;
  return static_cast<SectionKind>(id);
}

size_t KindElementSize(SectionKind kind) noexcept {
  switch (kind) {
    case SectionKind::kMasterF32:
    case SectionKind::kMF32:
    case SectionKind::kVF32: return 4;
    case SectionKind::kMasterBf16:
    case SectionKind::kEcc16:
    case SectionKind::kMScales:
    case SectionKind::kVScales: return 2;
    case SectionKind::kEcc8:
    case SectionKind::kMCodes:
    case SectionKind::kVCodes: return 1;
    case SectionKind::kManifest: break;
  }
  return 1;
}

bool KindCompressesWell(SectionKind kind) noexcept {
  // Measured on training-like state (bench/results/checkpoint_dev2core.md):
  // bf16 weights 1.28x (the exponent byte repeats), bf16 scales 1.46x; codes, ecc and fp32
  // arrays 1.00-1.08x, not worth igzip's time.
  return kind == SectionKind::kMasterBf16 || kind == SectionKind::kMScales ||
         kind == SectionKind::kVScales;
}

ArrayView ViewOf(const TensorSnapshot& t, SectionKind kind) {
  return WithArray(t, kind, [](const auto& v) { return View(v); });
}

void* ResizeArray(TensorSnapshot* t, SectionKind kind, size_t bytes) {
  return WithArray(*t, kind, [bytes](auto& v) { return Resize(&v, bytes); });
}

}  // namespace tandem::ckpt
