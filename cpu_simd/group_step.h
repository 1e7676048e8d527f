// One quantization group of the host step: decode the state, update, encode, store, in
// numbered stages, each naming the reference function it mirrors. Relies on group_io.h
// for memory, codecs.h and encode.h for the formats, update.h for the update rules; the
// span loop (step_kernel.h) calls StepGroup, and pairing.h steps two groups with the same
// stages.
//
// Note [Group is the unit]: the unit of work is one quantization group of kQuantGroup =
// 32 elements, kQuantGroup / kWidth registers (2 zmm, 4 ymm, 8 xmm). For each register of
// the group: load and widen the gradient, decode master, m and v, apply the update, encode
// the master and write the parameter; the q8 moments are kept in registers until the group
// max is known, then encoded.
//
// Note [Same ops, same order] (bit identity): every fp32 operation of the kernel is the
// same correctly rounded operation, on the same operands, in the same order as
// engine/update_math.h, engine/q8_codec.h and engine/master_codec.h; no FMA (the files are
// built with -ffp-contract=off); division and square root are the IEEE vdivps / vsqrtps;
// round-half-even to int is cvtps2dq under the round-to-nearest MXCSR that the entry
// point's FpModeGuard sets; bf16 rounding and the ecc corrections are the integer formulas
// of fp_bits.h / master_codec.h lane by lane.
#pragma once

#include "cpu_simd/codecs.h"
#include "cpu_simd/encode.h"
#include "cpu_simd/group_io.h"
#include "cpu_simd/kernel_args.h"
#include "cpu_simd/update.h"

namespace tandem::cpu::TANDEM_ISA_NS {

// One register of a group at element offset o: load, decode, update, encode the master
// and write the parameter; the q8 moments' new values (m, and u = sqrt(v)) go to m_keep /
// u_keep, for the group tail to encode. m_scale / v_scale: the group's old scales; io: see
// RegIo.
template <class Ops, Algo A, MasterFormat MF, Moment MOM, Moment VAR, GradIo GI, ParamIo PI>
TANDEM_SIMD_INLINE void StepReg(const Ctx<Ops>& c, const Ptrs& p, int o, typename Ops::F m_scale,
                                typename Ops::F v_scale, RegIo<Ops>& io, typename Ops::F& m_keep,
                                typename Ops::F& u_keep) {
  using F = typename Ops::F;
  (void)m_keep;
  (void)u_keep;
  // 1. The gradient as fp32 (dtype_io.h: LoadAsF32), or the group's load of it.
  F g, w;
  if constexpr (kGroupGrad<Ops, A, GI>)
    g = io.g;
  else
    g = LoadGrad<Ops, GI>(c, p.grad, o);
  // 2. The master (reference_step.cc: DecodeMaster), or the group's load of it.
  if constexpr (kGroupMaster<Ops, MF, PI>)
    w = io.w;
  else
    w = LoadMaster<Ops, MF>(p, o);
  // 3. The moments (q8_codec.h: DecodeMomentum, DecodeSqrtVariance).
  F m(0.0f), v(0.0f), u(0.0f);
  if constexpr (MOM == Moment::kF32) m = F::load_unaligned(p.m_f32 + o);
  if constexpr (MOM == Moment::kQ8) {
    if constexpr (kGroupMomentumDecode<Ops>)
      m = io.m_cv * m_scale;
    else
      m = Ops::MomentumCodeValue(Ops::LoadI8(p.m_codes + o)) * m_scale;
  }
  if constexpr (VAR == Moment::kF32) v = F::load_unaligned(p.v_f32 + o);
  if constexpr (VAR == Moment::kQ8) {
    const F uu = Ops::VarianceCodeValue(Ops::LoadU8(p.v_codes + o)) * v_scale;
    v = uu * uu;
  }
  // 4. The update (update_math.h: AdamElement, LionElement, SgdElement).
  UpdateReg<Ops, A, MOM>(c, g, w, m, v, u);
  // 5. The master and the parameter (reference_step.cc: EncodeMaster, WriteParam), or the
  // master's bits for the group's store.
  if constexpr (kGroupMaster<Ops, MF, PI>) {
    const auto enc = Ops::EncodeBf16Ecc8Bits(w);
    io.hi = enc.hi;
    io.t = enc.t;
  } else {
    WriteParam<Ops, MF, PI>(c, p, o, EncodeMaster<Ops, MF, PI>(p, o, w));
  }
  // 6. The fp32 moments to memory; the q8 ones kept for the group's encode.
  if constexpr (MOM == Moment::kF32) m.store_unaligned(p.m_f32 + o);
  if constexpr (MOM == Moment::kQ8) m_keep = m;
  if constexpr (VAR == Moment::kF32) v.store_unaligned(p.v_f32 + o);
  if constexpr (VAR == Moment::kQ8) u_keep = u;
}

// Registers j and j + 1 of the group (or pair): the loads that the group does
// (kGroupGrad, kGroupMaster), both StepRegs, the master's stores (kGroupMaster). Two at a
// time keeps the live registers few (AdamW spilled with all four loaded first).
template <class Ops, Algo A, MasterFormat MF, Moment MOM, Moment VAR, GradIo GI, ParamIo PI>
TANDEM_SIMD_INLINE void StepRegPair(const Ctx<Ops>& c, const Ptrs& p, int j,
                                    typename Ops::F m_scale, typename Ops::F v_scale,
                                    RegIo<Ops>* io, typename Ops::F* m_keep,
                                    typename Ops::F* u_keep) {
  constexpr int W = Ops::kWidth;
  LoadRegPair<Ops, A, MF, GI, PI>(p, j, io);
  StepReg<Ops, A, MF, MOM, VAR, GI, PI>(c, p, j * W, m_scale, v_scale, io[j], m_keep[j], u_keep[j]);
  StepReg<Ops, A, MF, MOM, VAR, GI, PI>(c, p, (j + 1) * W, m_scale, v_scale, io[j + 1],
                                        m_keep[j + 1], u_keep[j + 1]);
  StoreRegPair<Ops, MF, PI>(p, j, io);
}

// One complete group at p.
template <class Ops, Algo A, MasterFormat MF, Moment MOM, Moment VAR, GradIo GI, ParamIo PI>
TANDEM_SIMD_INLINE void StepGroup(const Ctx<Ops>& c, const Ptrs& p) {
  using F = typename Ops::F;
  constexpr int W = Ops::kWidth;
  constexpr int kRegs = kQuantGroup / W;
  F m_keep[kRegs], u_keep[kRegs];
  // The group's q8 scales and, where the group decodes them, its momentum code values.
  F m_scale(0.0f), v_scale(0.0f);
  if constexpr (MOM == Moment::kQ8) m_scale = F(Bf16Value(*p.m_scale));
  if constexpr (VAR == Moment::kQ8) v_scale = F(Bf16Value(*p.v_scale));
  RegIo<Ops> io[kRegs];
  GroupDecode<Ops, MOM, kRegs>(p, io);
  // Stages 1-6 for every register.
  if constexpr (kRegs % 2 == 0) {
    for (int j = 0; j < kRegs; j += 2)
      StepRegPair<Ops, A, MF, MOM, VAR, GI, PI>(c, p, j, m_scale, v_scale, io, m_keep, u_keep);
  } else {
    for (int j = 0; j < kRegs; ++j)
      StepReg<Ops, A, MF, MOM, VAR, GI, PI>(c, p, j * W, m_scale, v_scale, io[j], m_keep[j],
                                            u_keep[j]);
  }
  // 7. The q8 moments, now that the group is complete (q8_codec.cc: EncodeMomentumGroup,
  // EncodeSqrtVarianceGroup).
  EncodeGroupMoments<Ops, MOM, VAR, kRegs>(p, m_keep, u_keep);
}

}  // namespace tandem::cpu::TANDEM_ISA_NS
