// Exhaustive device checks of the hardware-dependent exact shortcuts in fast_codec.cuh
// (Note [Batched fallbacks]) against the engine's scalar definitions. For tests only.
#pragma once

#include <cstdint>

namespace tandem::gpu::detail {

// Mismatch counts of one run over every input of each shortcut, and the first input
// that mismatched (its bit pattern) where a count is non-zero.
struct FastCodecCheck {
  // EncodeEcc8Tile (cvt.rn.bf16x2 + integer rounding) against num::EncodeEcc8, and
  // PackBf16x2 against num::F32ToBf16: every fp32 bit pattern (NaN included: the tile
  // must report it through `ok`, and a non-NaN must never be reported).
  uint64_t ecc8_mismatches = 0;
  uint32_t ecc8_first_bad = 0;
  // DecodeEcc8Packed against num::DecodeEcc8: every (bf16, ecc8) pair, each position.
  uint64_t ecc8_decode_mismatches = 0;
  uint32_t ecc8_decode_first_bad = 0;
  // SqrtInRange against __fsqrt_rn (num::Sqrt): every fp32 bit pattern; in range the
  // bits must agree, out of range `ok` must be false.
  uint64_t sqrt_mismatches = 0;
  uint32_t sqrt_first_bad = 0;
  // EncodeMomentumTile (and its per-element fallback EncodeMomentumFast) against
  // num::EncodeMomentum with inv_scale 1: every fp32 bit pattern as m (any a = |m| * inv
  // is some fp32 value, so this covers every scale). Where the tile reports ok on its
  // domain (finite |m| <= 1.0078125, since the kernels' a <= 1 + 2^-20; and non-finite m) its
  // code must agree; everywhere the fallback's must. momentum_fallbacks counts the
  // domain's elements the tile leaves to the fallback (the 2^24 non-finite patterns and
  // the finite ones within 2^-14 of a half-integer code).
  uint64_t momentum_mismatches = 0;
  uint32_t momentum_first_bad = 0;
  uint64_t momentum_fallbacks = 0;
};

// Runs the checks on the current device (a few hundred ms on an H200). Throws
// Error(kCuda) when a CUDA call fails.
FastCodecCheck RunFastCodecCheck();

}  // namespace tandem::gpu::detail
