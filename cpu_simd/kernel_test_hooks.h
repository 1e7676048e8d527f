// The test hooks of span_kernels.h, written once against an ISA's Ops: the code values,
// the compander and the VBMI group decode as the kernels compute them, for
// tests/cpu_simd/codec_test.cc. Included by kernel_<isa>.cc (kernel_args.h says how);
// the caller holds an FpModeGuard.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu_simd/codecs.h"
#include "cpu_simd/kernel_args.h"

namespace tandem::cpu::TANDEM_ISA_NS {

// mom[c + 128] for every int8 code c (-128 included) by the group decode of Ops.
template <class Ops>
void GroupCodeValuesWith(float* mom) {
  alignas(64) uint8_t codes[64];
  alignas(64) typename Ops::F out[4];
  for (int half = 0; half < 4; ++half) {
    for (int i = 0; i < 64; ++i) codes[i] = static_cast<uint8_t>(64 * half + i - 128);
    if (half % 2 == 0) {
      Ops::MomentumCodeValues64(codes, out);
    } else {  // the one-group decode, on both halves
      Ops::MomentumCodeValues32(codes, out);
      Ops::MomentumCodeValues32(codes + 32, out + 2);
    }
    for (int j = 0; j < 4; ++j) out[j].store_unaligned(mom + 64 * half + 16 * j);
  }
}

template <class Ops>
void CodeValuesWith(float* mom, float* var) {
  constexpr int W = Ops::kWidth;
  alignas(64) int32_t codes[W];
  alignas(64) float out[W];
  for (int c0 = -128; c0 < 128; c0 += W) {
    for (int i = 0; i < W; ++i) codes[i] = c0 + i == -128 ? 0 : c0 + i;
    Ops::MomentumCodeValue(Ops::I::load_aligned(codes)).store_aligned(out);
    for (int i = 0; i < W; ++i) mom[c0 + i + 128] = out[i];
  }
  for (int c0 = 0; c0 < 256; c0 += W) {
    for (int i = 0; i < W; ++i) codes[i] = c0 + i;
    Ops::VarianceCodeValue(Ops::I::load_aligned(codes)).store_aligned(out);
    for (int i = 0; i < W; ++i) var[c0 + i] = out[i];
  }
}

// The q8 codes of every a[i] at 1/scale = 1 by the code paths of the kernels' group encode
// (EncodeGroupMoments): the momentum code of a[i] and of -a[i], the variance code of a[i].
// n a multiple of Ops::kWidth.
template <class Ops>
void CompanderCodesWith(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v) {
  using F = typename Ops::F;
  using I = typename Ops::I;
  constexpr int W = Ops::kWidth;
  const F one(1.0f);
  for (size_t i = 0; i < n; i += W) {
    const F x = F::load_unaligned(a + i);
    I mp, mn, vc;
    if constexpr (requires { Ops::kVectorScales; }) {
      mp = Ops::MomentumCode(x, one);
      mn = Ops::MomentumCode(-x, one);
      vc = Ops::VarianceCode(x, one);
    } else {
      mp = EncodeMomentum<Ops>(x, one);
      mn = EncodeMomentum<Ops>(-x, one);
      vc = EncodeSqrtVariance<Ops>(x, one);
    }
    Ops::StoreLow8(m_pos + i, mp);
    Ops::StoreLow8(m_neg + i, mn);
    Ops::StoreLow8(v + i, vc);
  }
}

template <class Ops>
uint64_t CompanderMismatchesWith(uint32_t lo_bits, uint32_t hi_bits) {
  using F = typename Ops::F;
  using I = typename Ops::I;
  constexpr int W = Ops::kWidth;
  alignas(64) int32_t lane[W];
  for (int i = 0; i < W; ++i) lane[i] = i;
  const I step = I::load_aligned(lane);
  I bad_lanes(0);
  for (uint64_t b = lo_bits; b < hi_bits; b += W) {
    const I bits = I(static_cast<int32_t>(b)) + step;
    const F a = BitCast<F>(bits);
    const I fast = Ops::RoundedCompander(a);
    const I exact = Ops::RoundToInt(Div<Ops>(F(254.0f) * a, F(1.0f) + a));
    const auto differ = (fast != exact) & (bits < I(static_cast<int32_t>(hi_bits)));
    bad_lanes = bad_lanes + xsimd::select(differ, I(1), I(0));
  }
  bad_lanes.store_aligned(lane);
  uint64_t bad = 0;
  for (int i = 0; i < W; ++i) bad += static_cast<uint64_t>(lane[i]);
  return bad;
}

}  // namespace tandem::cpu::TANDEM_ISA_NS
