// Moving one register of a group, or the registers of a whole group, between memory and
// the kernel: the gradient and master loads with their dtypes, the group loads and stores
// of the ISAs that have them (Note [VBMI group I/O]), the q8 code stores, the parameter
// write-back with its dtypes and streaming stores, and the walk of the pointers from group
// to group. Conversions only as the formats define them (codecs.h); no arithmetic of the
// update. Relies on kernel_args.h, codecs.h and the ISA's Ops (the loads and stores).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_simd/codecs.h"
#include "cpu_simd/kernel_args.h"

namespace tandem::cpu::TANDEM_ISA_NS {

// ---- loads of one register ----

// The gradient as fp32 (dtype_io.h: LoadAsF32).
template <class Ops, GradIo GI>
TANDEM_SIMD_INLINE typename Ops::F LoadGrad(const Ctx<Ops>& c, const unsigned char* g, int o) {
  using F = typename Ops::F;
  if constexpr (GI == GradIo::kBF16)
    return FromBits<Ops>(Ops::LoadU16(reinterpret_cast<const uint16_t*>(g) + o) << 16);
  if constexpr (GI == GradIo::kF32) return F::load_unaligned(reinterpret_cast<const float*>(g) + o);
  switch (c.grad_dtype) {
    case DType::kF32:
      return F::load_unaligned(reinterpret_cast<const float*>(g) + o);
    case DType::kBF16:
      return FromBits<Ops>(Ops::LoadU16(reinterpret_cast<const uint16_t*>(g) + o) << 16);
    case DType::kF16:
      return Ops::LoadF16(reinterpret_cast<const uint16_t*>(g) + o);
  }
  return F(0.0f);
}

// The decoded master (reference_step.cc: DecodeMaster).
template <class Ops, MasterFormat MF>
TANDEM_SIMD_INLINE typename Ops::F LoadMaster(const Ptrs& p, int o) {
  using F = typename Ops::F;
  if constexpr (MF == MasterFormat::kF32) {
    return F::load_unaligned(p.w_f32 + o);
  } else {
    const auto hi = Ops::LoadU16(p.w_bf16 + o) << 16;
    if constexpr (MF == MasterFormat::kBF16) return FromBits<Ops>(hi);
    if constexpr (MF == MasterFormat::kBF16Ecc8)
      return DecodeEcc8<Ops>(hi, Ops::LoadI8(p.ecc8 + o));
    if constexpr (MF == MasterFormat::kBF16Ecc16)
      return DecodeEcc16<Ops>(hi, Ops::LoadI16(p.ecc16 + o));
  }
}

// ---- loads and stores of a whole group ----

// Note [VBMI momentum decode] (ops_avx512vbmi.h): Ops with kGroupMomentumDecode turn the
// momentum codes of a whole group (MomentumCodeValues32) or of two adjacent groups
// (MomentumCodeValues64) into code values before the group's registers are stepped;
// StepReg then takes its register's code values as `m_cv`. Others decode per register.
template <class Ops>
constexpr bool kGroupMomentumDecode = requires {
  Ops::kGroupMomentumDecode;
};

// Note [VBMI group I/O] (ops_avx512vbmi.h): Ops with kGroupIo also load a bf16 gradient
// (LoadBf16x2) for two registers at a time, and a bf16 + ecc8 master (LoadBf16Ecc8x2),
// whose encoded form is then stored two registers at a time (EncodeBf16Ecc8Bits,
// StoreBf16Ecc8x2) when no separate parameter is written. AdamW took the group master
// only once its compander divided (ops_avx512.h): before, its paired loop spilled index
// registers and ran 2% slower with it (docs/host_kernels.md).
template <class Ops, Algo A, GradIo GI>
constexpr bool kGroupGrad = requires {
  Ops::kGroupIo;
}
&&GI == GradIo::kBF16;
template <class Ops, MasterFormat MF, ParamIo PI>
constexpr bool kGroupMaster = requires {
  Ops::kGroupIo;
}
&&MF == MasterFormat::kBF16Ecc8&& PI == ParamIo::kNone;

// What the group code hands to one register (g, w, m_cv: its gradient, master and
// momentum code values where the group loaded them) and takes back from it (hi, t: its
// encoded master, for StoreBf16Ecc8x2, where the group stores it).
template <class Ops>
struct RegIo {
  typename Ops::F g, w, m_cv;
  typename Ops::I hi, t;
};

// The momentum code values of `regs` registers (one or two groups) into io, where the
// group decodes them (kGroupMomentumDecode); every other field of io zero.
template <class Ops, Moment MOM, int regs>
TANDEM_SIMD_INLINE void GroupDecode(const Ptrs& p, RegIo<Ops>* io) {
  using F = typename Ops::F;
  using I = typename Ops::I;
  F v[regs];
  for (int j = 0; j < regs; ++j) io[j] = {F(0.0f), F(0.0f), F(0.0f), I(0), I(0)};
  if constexpr (MOM == Moment::kQ8 && kGroupMomentumDecode<Ops>) {
    if constexpr (regs == 4)
      Ops::MomentumCodeValues64(p.m_codes, v);
    else
      Ops::MomentumCodeValues32(p.m_codes, v);
    for (int j = 0; j < regs; ++j) io[j].m_cv = v[j];
  }
}

// The group loads of registers j and j + 1 into io (kGroupGrad, kGroupMaster).
template <class Ops, Algo A, MasterFormat MF, GradIo GI, ParamIo PI>
TANDEM_SIMD_INLINE void LoadRegPair(const Ptrs& p, int j, RegIo<Ops>* io) {
  using F = typename Ops::F;
  constexpr int W = Ops::kWidth;
  F v[2];
  if constexpr (kGroupGrad<Ops, A, GI>) {
    Ops::LoadBf16x2(reinterpret_cast<const uint16_t*>(p.grad) + j * W, v);
    io[j].g = v[0];
    io[j + 1].g = v[1];
  }
  if constexpr (kGroupMaster<Ops, MF, PI>) {
    Ops::LoadBf16Ecc8x2(p.w_bf16 + j * W, p.ecc8 + j * W, v);
    io[j].w = v[0];
    io[j + 1].w = v[1];
  }
}

// The group store of the encoded master of registers j and j + 1 (kGroupMaster).
template <class Ops, MasterFormat MF, ParamIo PI>
TANDEM_SIMD_INLINE void StoreRegPair(const Ptrs& p, int j, const RegIo<Ops>* io) {
  constexpr int W = Ops::kWidth;
  if constexpr (kGroupMaster<Ops, MF, PI>)
    Ops::StoreBf16Ecc8x2(p.w_bf16 + j * W, p.ecc8 + j * W, io[j].hi, io[j + 1].hi, io[j].t,
                         io[j + 1].t);
}

// The q8 codes of `regs` registers (their low 8 bits, truncated) to p: two registers per
// store where the Ops have StoreLow8x2 (Note [VBMI narrowing stores]), else one by one.
template <class Ops, int regs>
TANDEM_SIMD_INLINE void StoreCodes(uint8_t* p, const typename Ops::I* codes) {
  constexpr int W = Ops::kWidth;
  if constexpr (requires { Ops::StoreLow8x2(p, codes[0], codes[1]); } && regs % 2 == 0) {
    for (int j = 0; j < regs; j += 2) Ops::StoreLow8x2(p + j * W, codes[j], codes[j + 1]);
  } else {
    for (int j = 0; j < regs; ++j) Ops::StoreLow8(p + j * W, codes[j]);
  }
}

// ---- the parameter write-back (reference_step.cc: WriteParam) ----

// What the write-back needs of a register's encoded master (EncodeMaster, encode.h): its
// bf16 in the low half (hi; not set for an f32 master) and the value DecodeMaster returns
// after the store (decoded; set only where a parameter needs it: f32 and f16 parameters,
// and a bf16 one of an f32 master).
template <class Ops>
struct MasterBits {
  typename Ops::I hi;
  typename Ops::F decoded;
};

// Note [Non-temporal parameter stores] (step_kernel.h): c.nt_param picks streaming stores.
template <class Ops, MasterFormat MF, ParamIo PI>
TANDEM_SIMD_INLINE void WriteParam(const Ctx<Ops>& c, const Ptrs& p, int o,
                                   const MasterBits<Ops>& e) {
  using I = typename Ops::I;
  if constexpr (PI == ParamIo::kNone) {
    // No parameter, or the parameter is the master's bf16 (already written).
    return;
  } else if constexpr (PI == ParamIo::kBF16) {
    // A separate bf16 parameter: the master's bf16 (or, for an f32 master, its rounding).
    I b;
    if constexpr (MF == MasterFormat::kF32)
      b = F32ToBf16<Ops>(e.decoded);
    else
      b = e.hi;
    if (c.nt_param)
      Ops::StreamLow16(reinterpret_cast<uint16_t*>(p.param) + o, b);
    else
      Ops::StoreLow16(reinterpret_cast<uint16_t*>(p.param) + o, b);
    return;
  }
  if (!c.has_param) return;
  switch (c.param_dtype) {
    case DType::kF32:
      if (c.nt_param)
        Ops::StreamF32(reinterpret_cast<float*>(p.param) + o, e.decoded);
      else
        e.decoded.store_unaligned(reinterpret_cast<float*>(p.param) + o);
      break;
    case DType::kBF16:
      if constexpr (MF == MasterFormat::kF32) {
        if (c.nt_param)
          Ops::StreamLow16(reinterpret_cast<uint16_t*>(p.param) + o, F32ToBf16<Ops>(e.decoded));
        else
          Ops::StoreLow16(reinterpret_cast<uint16_t*>(p.param) + o, F32ToBf16<Ops>(e.decoded));
      } else if (c.param_is_master) {
        // The parameter is the master's bf16 (StepSpan allows this alias): already written.
      } else if (c.nt_param) {
        Ops::StreamLow16(reinterpret_cast<uint16_t*>(p.param) + o, e.hi);
      } else {
        Ops::StoreLow16(reinterpret_cast<uint16_t*>(p.param) + o, e.hi);  // the master's bf16
      }
      break;
    case DType::kF16:
      Ops::StoreF16(reinterpret_cast<uint16_t*>(p.param) + o, e.decoded);
      break;
  }
}

// ---- from group to group ----

// Moves p to the next group (gs, ps: the gradient and parameter element sizes where the
// instantiation does not fix them).
template <MasterFormat MF, Moment MOM, Moment VAR, GradIo GI, ParamIo PI>
TANDEM_SIMD_INLINE void Advance(Ptrs& p, size_t gs, size_t ps) {
  constexpr size_t n = kQuantGroup;
  if constexpr (GI == GradIo::kBF16) gs = 2;
  if constexpr (GI == GradIo::kF32) gs = 4;
  p.grad += n * gs;
  if constexpr (PI == ParamIo::kBF16)
    p.param += n * 2;
  else if (p.param)  // kNone: an aliased parameter still moves with the span (tail copy)
    p.param += n * ps;
  if constexpr (MF == MasterFormat::kF32) p.w_f32 += n;
  if constexpr (MF != MasterFormat::kF32) p.w_bf16 += n;
  if constexpr (MF == MasterFormat::kBF16Ecc8) p.ecc8 += n;
  if constexpr (MF == MasterFormat::kBF16Ecc16) p.ecc16 += n;
  if constexpr (MOM == Moment::kF32) p.m_f32 += n;
  if constexpr (MOM == Moment::kQ8) {
    p.m_codes += n;
    p.m_scale += 1;
  }
  if constexpr (VAR == Moment::kF32) p.v_f32 += n;
  if constexpr (VAR == Moment::kQ8) {
    p.v_codes += n;
    p.v_scale += 1;
  }
}

// Copies `bytes` from src to dst if src is set (the span loop's tail buffers).
TANDEM_SIMD_INLINE void CopyIf(void* dst, const void* src, size_t bytes) {
  if (src != nullptr && bytes > 0) std::memcpy(dst, src, bytes);
}

}  // namespace tandem::cpu::TANDEM_ISA_NS
