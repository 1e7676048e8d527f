// Two adjacent groups per iteration of the span loop, with one shared tail (Note [Two
// groups per iteration] below). Relies on group_step.h for the registers' stages (StepRegPair),
// group_io.h for the group loads and code stores, and the ISA's Ops for the paired tails
// (GroupScalesPair, GroupScales4); whether a span pairs is a HostKernelOptions setting
// (PairsGroups).
#pragma once

#include "cpu_simd/codecs.h"
#include "cpu_simd/group_io.h"
#include "cpu_simd/group_step.h"
#include "cpu_simd/kernel_args.h"
#include "cpu_simd/span_kernels.h"

namespace tandem::cpu::TANDEM_ISA_NS {

// Note [Two groups per iteration]: on ISAs whose Ops have the paired group tails
// (GroupScalesPair, GroupScales4), the span loop steps two adjacent groups at a time:
// their registers one after the other, then one tail for both. The tail is a serial
// chain (lane maxima -> shuffle tree -> bf16 ceiling -> 1/scale -> compander); two
// independent chains in one iteration share the shuffle tree and the reciprocal (one
// vdivps xmm for up to four scales) and overlap each other. Each group still gets its
// own max, scale, 1/scale and codes, computed by the same operations as in StepGroup:
// the same bits.
template <class Ops, Moment MOM, Moment VAR>
constexpr bool kPairedTails = requires {
  Ops::kPairedTails;
}
&&(MOM == Moment::kQ8 || VAR == Moment::kQ8);

template <class Ops, Algo A, MasterFormat MF, Moment MOM, Moment VAR, GradIo GI, ParamIo PI>
TANDEM_SIMD_INLINE void StepTwoGroups(const Ctx<Ops>& c, const Ptrs& p) {
  using F = typename Ops::F;
  using I = typename Ops::I;
  constexpr int W = Ops::kWidth;
  constexpr int kRegs = kQuantGroup / W;  // per group
  F m_keep[2 * kRegs], u_keep[2 * kRegs];
  F m_scale[2] = {F(0.0f), F(0.0f)}, v_scale[2] = {F(0.0f), F(0.0f)};
  RegIo<Ops> io[2 * kRegs];
  GroupDecode<Ops, MOM, 2 * kRegs>(p, io);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    if constexpr (MOM == Moment::kQ8) m_scale[h] = F(Bf16Value(p.m_scale[h]));
    if constexpr (VAR == Moment::kQ8) v_scale[h] = F(Bf16Value(p.v_scale[h]));
  }
  static_assert(kRegs % 2 == 0, "registers are stepped in pairs");
#pragma GCC unroll 8
  for (int j = 0; j < 2 * kRegs; j += 2)
    StepRegPair<Ops, A, MF, MOM, VAR, GI, PI>(c, p, j, m_scale[j / kRegs], v_scale[j / kRegs], io,
                                              m_keep, u_keep);
  // The group maxima (see EncodeGroupMoments, encode.h: |m| by clearing the sign bit; NaN
  // never wins).
  F acc_m[2] = {F(0.0f), F(0.0f)}, acc_v[2] = {F(0.0f), F(0.0f)};
#pragma GCC unroll 8
  for (int j = 0; j < 2 * kRegs; ++j) {
    if constexpr (MOM == Moment::kQ8)
      acc_m[j / kRegs] = Ops::MaxInto(acc_m[j / kRegs], xsimd::abs(m_keep[j]));
    if constexpr (VAR == Moment::kQ8) acc_v[j / kRegs] = Ops::MaxInto(acc_v[j / kRegs], u_keep[j]);
  }
  F inv_m[2], inv_v[2];
  if constexpr (MOM == Moment::kQ8 && VAR == Moment::kQ8)
    Ops::GroupScales4(acc_m, acc_v, p.m_scale, p.v_scale, inv_m, inv_v);
  else if constexpr (MOM == Moment::kQ8)
    Ops::GroupScalesPair(acc_m, p.m_scale, inv_m);
  else
    Ops::GroupScalesPair(acc_v, p.v_scale, inv_v);
  I m_codes[2 * kRegs], v_codes[2 * kRegs];
#pragma GCC unroll 8
  for (int j = 0; j < 2 * kRegs; ++j) {
    if constexpr (MOM == Moment::kQ8) m_codes[j] = Ops::MomentumCode(m_keep[j], inv_m[j / kRegs]);
    if constexpr (VAR == Moment::kQ8) v_codes[j] = Ops::VarianceCode(u_keep[j], inv_v[j / kRegs]);
  }
  if constexpr (MOM == Moment::kQ8) StoreCodes<Ops, 2 * kRegs>(p.m_codes, m_codes);
  if constexpr (VAR == Moment::kQ8) StoreCodes<Ops, 2 * kRegs>(p.v_codes, v_codes);
}

// Whether the span loop of a kernel with these moments pairs groups under tuning t
// (HostKernelOptions::paired_groups).
template <class Ops, Moment MOM, Moment VAR>
TANDEM_SIMD_INLINE bool PairsGroups(const SpanTuning& t) {
  if constexpr (!kPairedTails<Ops, MOM, VAR>) return false;
  return t.paired == PairedGroups::kAllQ8 ||
         (t.paired == PairedGroups::kWithoutQ8Var && VAR != Moment::kQ8);
}

}  // namespace tandem::cpu::TANDEM_ISA_NS
