// The encode stage: a register's new master into its format (reference_step.cc:
// EncodeMaster), and a complete group's q8 moments into their scale and codes
// (q8_codec.cc: EncodeMomentumGroup, EncodeSqrtVarianceGroup). Relies on codecs.h for the
// lane conversions, group_io.h for the stores, and the ISA's Ops for their own exact
// formulations (Note [Ecc8 encode], Note [Scales in vector registers]).
#pragma once

#include <cstdint>

#include "cpu_simd/codecs.h"
#include "cpu_simd/group_io.h"
#include "cpu_simd/kernel_args.h"

namespace tandem::cpu::TANDEM_ISA_NS {

// Stores w in the master format at element offset o and returns what the parameter
// write-back needs (MasterBits; fields set as it documents for WriteParam<Ops, MF, PI>).
template <class Ops, MasterFormat MF, ParamIo PI>
TANDEM_SIMD_INLINE MasterBits<Ops> EncodeMaster(const Ptrs& p, int o, typename Ops::F w) {
  using I = typename Ops::I;
  MasterBits<Ops> e;
  if constexpr (MF == MasterFormat::kF32) {
    w.store_unaligned(p.w_f32 + o);
    e.decoded = w;
  } else if constexpr (MF == MasterFormat::kBF16Ecc8 &&
                       requires { Ops::EncodeBf16Ecc8(w, p.w_bf16, p.ecc8); }) {
    // The ISA's own formulation of the same integer formulas (Note [Ecc8 encode] in
    // its Ops header); q is the unsaturated quotient in [-128, 128].
    const auto enc = Ops::EncodeBf16Ecc8(w, p.w_bf16 + o, p.ecc8 + o);
    e.hi = enc.hi;
    if constexpr (PI == ParamIo::kRuntime)
      e.decoded =
          FromBits<Ops>((e.hi << 16) + (xsimd::min(xsimd::max(enc.q, I(-128)), I(127)) << 8));
  } else {
    e.hi = F32ToBf16<Ops>(w);
    Ops::StoreLow16(p.w_bf16 + o, e.hi);
    const I base = e.hi << 16;
    if constexpr (MF == MasterFormat::kBF16) {
      e.decoded = FromBits<Ops>(base);
    } else {
      const I d = EccDelta<Ops>(w, base);
      if constexpr (MF == MasterFormat::kBF16Ecc16) {
        const I ecc = Ecc16Of<Ops>(d);
        Ops::StoreLow16(p.ecc16 + o, ecc);
        e.decoded = FromBits<Ops>(base + ecc);
      } else {
        const I q = Ecc8Of<Ops>(d);
        Ops::StoreLow8(p.ecc8 + o, q);
        e.decoded = FromBits<Ops>(base + (q << 8));
      }
    }
  }
  return e;
}

// The q8 moments of one complete group of kRegs registers: m_keep the new momentum,
// u_keep the new sqrt(variance) (as UpdateReg leaves them); writes each q8 moment's scale
// and codes.
template <class Ops, Moment MOM, Moment VAR, int kRegs>
TANDEM_SIMD_INLINE void EncodeGroupMoments(const Ptrs& p, const typename Ops::F* m_keep,
                                           const typename Ops::F* u_keep) {
  using F = typename Ops::F;
  using I = typename Ops::I;
  constexpr int W = Ops::kWidth;
  if constexpr (requires { Ops::kVectorScales; }) {
    // Note [Scales in vector registers] (Ops header): the group maxima, bf16 ceilings and
    // 1/scale stay in vector registers; 1/scale is still one IEEE division.
    // |m| by clearing the sign bit: it differs from m < 0 ? -m : m only for -0 and NaN,
    // whose codes are the same either way (0; NaN never raises the max, see MaxInto).
    F inv_m(0.0f), inv_v(0.0f), acc_m(0.0f), acc_v(0.0f);
    if constexpr (MOM == Moment::kQ8)
      for (int j = 0; j < kRegs; ++j) acc_m = Ops::MaxInto(acc_m, xsimd::abs(m_keep[j]));
    if constexpr (VAR == Moment::kQ8)
      for (int j = 0; j < kRegs; ++j) acc_v = Ops::MaxInto(acc_v, u_keep[j]);
    if constexpr (MOM == Moment::kQ8 && VAR == Moment::kQ8)
      Ops::GroupScales2(acc_m, acc_v, p.m_scale, p.v_scale, inv_m, inv_v);
    else if constexpr (MOM == Moment::kQ8)
      inv_m = Ops::GroupScale1(acc_m, p.m_scale);
    else if constexpr (VAR == Moment::kQ8)
      inv_v = Ops::GroupScale1(acc_v, p.v_scale);
    I codes[kRegs];
    if constexpr (MOM == Moment::kQ8) {
      for (int j = 0; j < kRegs; ++j) codes[j] = Ops::MomentumCode(m_keep[j], inv_m);
      StoreCodes<Ops, kRegs>(p.m_codes, codes);
    }
    if constexpr (VAR == Moment::kQ8) {
      for (int j = 0; j < kRegs; ++j) codes[j] = Ops::VarianceCode(u_keep[j], inv_v);
      StoreCodes<Ops, kRegs>(p.v_codes, codes);
    }
    return;
  }
  if constexpr (MOM == Moment::kQ8) {
    F acc(0.0f);
    // |m| by clearing the sign bit: it differs from m < 0 ? -m : m only for -0 and NaN,
    // whose codes are the same either way (0; NaN never raises the max, see MaxInto).
    for (int j = 0; j < kRegs; ++j) acc = Ops::MaxInto(acc, xsimd::abs(m_keep[j]));
    const uint16_t sb = GroupScaleBits(Ops::HMax(acc));
    const F inv(1.0f / Bf16Value(sb));
    for (int j = 0; j < kRegs; ++j)
      Ops::StoreLow8(p.m_codes + j * W, EncodeMomentum<Ops>(m_keep[j], inv));
    *p.m_scale = sb;
  }
  if constexpr (VAR == Moment::kQ8) {
    F acc(0.0f);
    for (int j = 0; j < kRegs; ++j) acc = Ops::MaxInto(acc, u_keep[j]);
    const uint16_t sb = GroupScaleBits(Ops::HMax(acc));
    const F inv(1.0f / Bf16Value(sb));
    for (int j = 0; j < kRegs; ++j)
      Ops::StoreLow8(p.v_codes + j * W, EncodeSqrtVariance<Ops>(u_keep[j], inv));
    *p.v_scale = sb;
  }
}

}  // namespace tandem::cpu::TANDEM_ISA_NS
