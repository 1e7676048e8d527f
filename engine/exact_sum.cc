#include "engine/exact_sum.h"

#include <cmath>

namespace tandem::exact {

double ToDouble(const Acc& a) {
  int top = kDigits - 1;
  while (top >= 0 && a.limb[top] == 0) --top;
  if (top < 0) return 0.0;
  auto digit = [&](int k) -> uint64_t { return k >= 0 ? a.limb[k] : 0; };
  // The top 96 bits: hi (64, its highest bit set after the shift) and a 32-bit tail;
  // sticky: any bit below them.
  const uint64_t hi = (digit(top) << 32) | digit(top - 1);
  const uint64_t tail = digit(top - 2);
  bool sticky = false;
  for (int k = top - 3; k >= 0; --k) sticky |= a.limb[k] != 0;
  const int lz = __builtin_clzll(hi);  // < 32: the top digit is not 0
  const uint64_t n = lz == 0 ? hi : (hi << lz) | (tail >> (32 - lz));
  sticky |= (tail << (32 + lz)) != 0;  // the tail bits not in n (lz < 32: shift < 64)
  // n holds the 64 leading bits of the value: n * 2^(32 * (top - 1) - lz) in units of
  // 2^kLsbExponent. Round to 53 bits, ties to even.
  uint64_t m = n >> 11;
  const uint64_t rest = n & 0x7FF;
  if (rest > 0x400 || (rest == 0x400 && (sticky || (m & 1) != 0))) ++m;  // m <= 2^53
  return std::ldexp(static_cast<double>(m), 32 * (top - 1) - lz + 11 + kLsbExponent);
}

}  // namespace tandem::exact
