// The exact, partition-independent sum of squared gradients of the pre-pass.
//
// Note [Exact sum of squares]: the gradient norm decides clipping, so sharded training
// needs every world size to reach the same bits. A double sum depends on the order of
// its additions, and a sharded step adds per rank, then across ranks. So the pre-pass
// sums each *piece* of a gradient in double, in a fixed order that depends only on the
// piece, and accumulates the piece sums exactly in a 512-bit fixed-point integer, where
// addition is associative: any split into shards, threads or blocks gives the same
// integer, which is rounded to double once (ExactToDouble).
//
// Pieces: each tensor is cut into runs of `unit` elements (TensorSpec::norm_unit: its rows
// by default, single elements for a 1-D tensor that a shard may split anywhere), and each
// run into pieces of at most kNormPiece elements from its start. A shard boundary falls on
// a run boundary, so every piece lies on one rank, whole.
//
// Piece sum (host and GPU alike, PieceSumOrder): 32 lanes, lane j adding x*x of elements
// j, j+32, ... in order (x converted to double exactly, x*x exact in double), then lane
// i += lane i+s for s = 16, 8, 4, 2, 1; the result is lane 0.
//
// Fixed point: value = sum_k digit[k] * 2^(32k - 192), k = 0..15. A piece sum below 2^-192
// contributes its part above 2^-192 (truncated: the same truncation wherever it runs);
// the largest possible total (2^64 squares of float32's largest value, < 2^320) fits.
// While accumulating, each 64-bit limb holds one 32-bit digit plus pending carries; a
// limb takes at most 2^31 additions before Normalize.
#pragma once

#include <cstdint>

#include "engine/hd.h"

namespace tandem::exact {

inline constexpr int kDigits = 16;
inline constexpr int kLsbExponent = -192;  // weight of the lowest bit: 2^-192
inline constexpr uint64_t kNormPiece = 8192;
inline constexpr uint32_t kLanes = 32;

struct Acc {
  uint64_t limb[kDigits];
};

TANDEM_HD void Clear(Acc& a) {
  for (int k = 0; k < kDigits; ++k) a.limb[k] = 0;
}

// Adds x (finite, >= 0; a piece sum) to `a`. Subnormal doubles are below 2^-192: dropped.
// Unrolled over the limbs with selects, so a GPU thread keeps `a` in registers.
TANDEM_HD void Add(Acc& a, double x) {
  if (!(x > 0)) return;
#if defined(__CUDA_ARCH__)
  const uint64_t bits = static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t bits;
  static_assert(sizeof(bits) == sizeof(x));
  __builtin_memcpy(&bits, &x, sizeof(bits));
#endif
  const int biased = static_cast<int>((bits >> 52) & 0x7FF);
  if (biased == 0 || biased == 0x7FF) return;  // subnormal (negligible) or not finite
  uint64_t mant = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  int shift = biased - 1075 - kLsbExponent;  // bit position of mant's lowest bit
  if (shift < 0) {
    if (shift <= -53) return;
    mant >>= -shift;
    shift = 0;
  }
  const int k = shift >> 5, s = shift & 31;
  const uint64_t lo = (mant & 0xFFFFFFFFu) << s;  // < 2^63
  const uint64_t hi = (mant >> 32) << s;          // < 2^52
  const uint64_t d0 = lo & 0xFFFFFFFFu;
  const uint64_t d1 = (lo >> 32) + (hi & 0xFFFFFFFFu);
  const uint64_t d2 = hi >> 32;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int j = 0; j < kDigits; ++j)
    a.limb[j] += (j == k ? d0 : 0) + (j == k + 1 ? d1 : 0) + (j == k + 2 ? d2 : 0);
}

// a += b, limb by limb (both carry-save).
TANDEM_HD void Merge(Acc& a, const Acc& b) {
  for (int k = 0; k < kDigits; ++k) a.limb[k] += b.limb[k];
}

// Propagates the carries: every limb below 2^32 after. Returns false on overflow (a total
// >= 2^320, impossible for finite float32 gradients of fewer than 2^64 elements).
TANDEM_HD bool Normalize(Acc& a) {
  uint64_t carry = 0;
  for (int k = 0; k < kDigits; ++k) {
    const uint64_t v = a.limb[k] + carry;  // v < 2^64: limb < 2^63, carry < 2^32
    a.limb[k] = v & 0xFFFFFFFFu;
    carry = v >> 32;
  }
  return carry == 0;
}

// The normalized value, rounded to the nearest double (ties to even).
double ToDouble(const Acc& a);

}  // namespace tandem::exact
