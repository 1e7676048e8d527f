#include "engine/state_arrays.h"

#include <cstring>

namespace tandem {

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
  void* to[kStateArrayCount];
  int i = 0;
  ForEachStateArray(dst, [&](StateArray, auto* p) { to[i++] = p; });
  i = 0;
  ForEachStateArray(src, [&](StateArray a, const auto* p) {
    void* d = to[i++];
    if (p != nullptr && d != nullptr)
      std::memcpy(d, p, ArrayEntries(a, src.n) * sizeof(*p));
  });
}

}  // namespace tandem
