#include "engine/state_arrays.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tandem {
namespace {

// memcpy with non-temporal 16-byte stores between an aligned head and tail.
void StreamingCopy(void* dst, const void* src, size_t bytes) {
#if defined(__SSE2__)
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  std::memcpy(d, s, bytes);
#else
  std::memcpy(dst, src, bytes);
#endif
}

// copy(d, s, bytes) for every state array set in both `dst` and `src`.
template <typename Copy>
void CopyEachArray(const StepSpan& dst, const StepSpan& src, Copy&& copy) {
  void* to[kStateArrayCount];
  int i = 0;
  ForEachStateArray(dst, [&](StateArray, auto* p) { to[i++] = p; });
  i = 0;
  ForEachStateArray(src, [&](StateArray a, const auto* p) {
    void* d = to[i++];
    if (p != nullptr && d != nullptr) copy(d, p, ArrayEntries(a, src.n) * sizeof(*p));
  });
}

}  // namespace

uint64_t ArrayEntries(StateArray a, Algorithm algo, const HyperParams& h, const StateFormats& f,
                      uint64_t n) {
  const bool bf = f.master != MasterFormat::kF32;
  const bool m = HasMomentum(algo, h), v = HasVariance(algo);
  const bool m_q8 = f.momentum == MomentFormat::kQ8, v_q8 = f.variance == MomentFormat::kQ8;
  bool kept = false;
  switch (a) {
    case StateArray::kMasterF32:
      kept = !bf;
      break;
    case StateArray::kMasterBf16:
      kept = bf;
      break;
    case StateArray::kEcc8:
      kept = f.master == MasterFormat::kBF16Ecc8;
      break;
    case StateArray::kEcc16:
      kept = f.master == MasterFormat::kBF16Ecc16;
      break;
    case StateArray::kMF32:
      kept = m && !m_q8;
      break;
    case StateArray::kMCodes:
    case StateArray::kMScales:
      kept = m && m_q8;
      break;
    case StateArray::kVF32:
      kept = v && !v_q8;
      break;
    case StateArray::kVCodes:
    case StateArray::kVScales:
      kept = v && v_q8;
      break;
  }
  return kept ? ArrayEntries(a, n) : 0;
}

StepSpan SubSpan(const StepSpan& s, uint64_t off, uint64_t count) {
  StepSpan r = s;
  r.n = count;
  ForEachStateArray(r, [off](StateArray a, auto*& p) {
    if (p != nullptr) p += ArrayIndex(a, off);
  });
  if (s.grad != nullptr)
    r.grad = static_cast<const uint8_t*>(s.grad) + off * DTypeSize(s.grad_dtype);
  if (s.param != nullptr) r.param = static_cast<uint8_t*>(s.param) + off * DTypeSize(s.param_dtype);
  return r;
}

void CopyStateArrays(const StepSpan& dst, const StepSpan& src) {
  CopyEachArray(dst, src, [](void* d, const void* s, size_t bytes) { std::memcpy(d, s, bytes); });
}

void CopyStateArraysStreaming(const StepSpan& dst, const StepSpan& src) {
  CopyEachArray(dst, src, StreamingCopy);
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace tandem
