// The host step kernel, written once against xsimd::batch<float, Arch> and the small
// per-ISA loader/storer layer `Ops` (ops_avx512.h, ops_avx2.h, ops_sse.h).
//
// Included by exactly one translation unit per ISA (kernel_<isa>.cc), after its Ops
// header and with TANDEM_ISA_NS defined, so that every function here is a distinct
// symbol compiled with that ISA's flags (no inline function is shared between ISA files).
//
// Structure (Note [Group is the unit]): the unit of work is one quantization group of
// kQuantGroup = 32 elements, kQuantGroup / kWidth registers (2 zmm, 4 ymm, 8 xmm). For
// each register of the group: load and widen the gradient, decode master, m and v, apply
// the update, encode the master and write the parameter; the q8 moments are kept in
// registers until the group max is known, then encoded. A span's partial last group is
// copied into zero-padded group buffers, stepped by the same code and copied back (the
// padding is zero state with a zero gradient: it never changes the group max).
//
// Bit identity (Note [Same ops, same order]): every fp32 operation below is the same
// correctly rounded operation, on the same operands, in the same order as
// engine/update_math.h, engine/q8_codec.h and engine/master_codec.h; no FMA (the files
// are built with -ffp-contract=off); division and square root are the IEEE vdivps /
// vsqrtps; round-half-even to int is cvtps2dq under the round-to-nearest MXCSR that the
// entry point's FpModeGuard sets; bf16 rounding and the ecc corrections are the integer
// formulas of fp_bits.h / master_codec.h lane by lane.
#pragma once

#ifndef TANDEM_ISA_NS
#error "define TANDEM_ISA_NS before including cpu_simd/step_kernel.h"
#endif

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <immintrin.h>

#include <xsimd/xsimd.hpp>

#include "cpu_simd/tuning.h"
#include "engine/step_scalars.h"
#include "engine/step_span.h"
#include "tandem/types.h"

// Everything in the group code is forced inline: GCC otherwise outlines the per-register
// helpers and passes batches through the stack (measured: 3-8x slower).
#define TANDEM_SIMD_INLINE inline __attribute__((always_inline))

namespace tandem::cpu::TANDEM_ISA_NS {

static_assert(kQuantGroup == 32, "Note [Group size]: the group routine assumes 32");

enum class Algo { kAdam, kLion, kSgd };

enum class Moment { kNone, kF32, kQ8 };

// Note [Static dtypes]: the gradient dtype and what the parameter write-back does are
// runtime switches in the generic instantiation (kRuntime). ISAs whose Ops set
// kStaticIo also get instantiations where they are template arguments for the common
// cases (bf16 or f32 gradient; no separate parameter write, i.e. no parameter or the
// parameter aliasing the master's bf16; or a separate bf16 parameter), so that the hot
// loop has no dtype branches and unrolls over the group. Same code, same bits: only the
// switch moves to the span's entry (kernel_dispatch.h: RunSpanIo).
enum class GradIo { kRuntime, kBF16, kF32 };
enum class ParamIo { kRuntime, kNone, kBF16 };

template <class Ops>
constexpr bool HasStaticIo() {
  if constexpr (requires { Ops::kStaticIo; })
    return Ops::kStaticIo;
  else
    return false;
}

// Raw pointers of one group (or of the padded tail buffers), advanced group by group.
struct Ptrs {
  const unsigned char* grad;
  unsigned char* param;
  float* w_f32;
  uint16_t* w_bf16;
  int8_t* ecc8;
  int16_t* ecc16;
  float* m_f32;
  uint8_t* m_codes;
  uint16_t* m_scale;
  float* v_f32;
  uint8_t* v_codes;
  uint16_t* v_scale;
};

// Per-span constants: the step scalars broadcast once, dtypes and flags.
template <class Ops>
struct Ctx {
  using F = typename Ops::F;
  F grad_mul, beta1, beta2, omb1, omb2, eps, wd, step_size, inv_sqrt_bc2, decay, lr, neg_lr,
      momentum, omd;
  bool decoupled, apply_l2, first_step, nesterov;
  typename F::batch_bool_type l2_mask, first_mask, nesterov_mask;  // Note [Branch-free SGD]
  DType grad_dtype, param_dtype;
  bool has_param;
  size_t grad_size, param_size;
  int prefetch_groups;
  bool param_is_master;  // param aliases master.bf16 (bf16 parameter)
  bool nt_param;         // non-temporal parameter stores (Note [Non-temporal parameter stores])

  Ctx(const StepScalars& s, const StepSpan& sp, int prefetch, bool nt)
      : grad_mul(s.grad_mul),
        beta1(s.beta1),
        beta2(s.beta2),
        omb1(s.one_minus_beta1),
        omb2(s.one_minus_beta2),
        eps(s.eps),
        wd(s.weight_decay),
        step_size(s.step_size),
        inv_sqrt_bc2(s.inv_sqrt_bc2),
        decay(s.decay),
        lr(s.lr),
        neg_lr(-s.lr),
        momentum(s.momentum),
        omd(s.one_minus_dampening),
        decoupled(s.algo == Algorithm::kAdamW),
        apply_l2(s.apply_l2 != 0),
        first_step(s.first_step != 0),
        nesterov(s.nesterov != 0),
        l2_mask(apply_l2),
        first_mask(first_step),
        nesterov_mask(nesterov),
        grad_dtype(sp.grad_dtype),
        param_dtype(sp.param_dtype),
        has_param(sp.param != nullptr),
        grad_size(DTypeSizeOf(sp.grad_dtype)),
        param_size(DTypeSizeOf(sp.param_dtype)),
        prefetch_groups(prefetch),
        param_is_master(sp.param != nullptr && sp.param == sp.master.bf16),
        nt_param(nt && sp.param != nullptr && sp.param != sp.master.bf16 &&
                 sp.param_dtype != DType::kF16 && reinterpret_cast<uintptr_t>(sp.param) % 64 == 0) {
  }

  static size_t DTypeSizeOf(DType t) { return t == DType::kF32 ? 4 : 2; }
};

// ---- integer helpers (fp_bits.h / master_codec.h, lane by lane) ----

// num::F32ToBf16: round to nearest even; NaN -> 0x7FC0. Result in [0, 0xFFFF].
template <class Ops>
TANDEM_SIMD_INLINE typename Ops::I F32ToBf16(typename Ops::F x) {
  using I = typename Ops::I;
  const I xi = xsimd::bitwise_cast<I>(x);
  const auto nan = (xi & I(0x7FFFFFFF)) > I(0x7F800000);
  const I r = ((xi + I(0x7FFF) + ((xi >> 16) & I(1))) >> 16) & I(0xFFFF);
  return xsimd::select(nan, I(0x7FC0), r);
}

template <class Ops>
TANDEM_SIMD_INLINE typename Ops::F FromBits(typename Ops::I x) {
  return xsimd::bitwise_cast<typename Ops::F>(x);
}

// Scalar helpers for the per-group scale (q8_codec.h: GroupScaleBits).
TANDEM_SIMD_INLINE uint32_t ScalarBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
TANDEM_SIMD_INLINE float ScalarFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
TANDEM_SIMD_INLINE uint16_t GroupScaleBits(float amax) {
  const uint32_t x = ScalarBits(amax > FLT_MIN ? amax : FLT_MIN);
  return static_cast<uint16_t>((x >> 16) + ((x & 0xFFFFu) != 0u ? 1u : 0u));
}
TANDEM_SIMD_INLINE float Bf16Value(uint16_t b) { return ScalarFloat(uint32_t{b} << 16); }

// ---- loads ----

template <class Ops, GradIo GI>
TANDEM_SIMD_INLINE typename Ops::F LoadGrad(const Ctx<Ops>& c, const unsigned char* g, int o) {
  using F = typename Ops::F;
  if constexpr (GI == GradIo::kBF16)
    return FromBits<Ops>(Ops::LoadU16(reinterpret_cast<const uint16_t*>(g) + o) << 16);
  if constexpr (GI == GradIo::kF32)
    return F::load_unaligned(reinterpret_cast<const float*>(g) + o);
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

template <class Ops, MasterFormat MF>
TANDEM_SIMD_INLINE typename Ops::F LoadMaster(const Ptrs& p, int o) {
  using F = typename Ops::F;
  if constexpr (MF == MasterFormat::kF32) {
    return F::load_unaligned(p.w_f32 + o);
  } else {
    const auto hi = Ops::LoadU16(p.w_bf16 + o) << 16;
    if constexpr (MF == MasterFormat::kBF16) return FromBits<Ops>(hi);
    if constexpr (MF == MasterFormat::kBF16Ecc8)
      return FromBits<Ops>(hi + (Ops::LoadI8(p.ecc8 + o) << 8));
    if constexpr (MF == MasterFormat::kBF16Ecc16)
      return FromBits<Ops>(hi + Ops::LoadI16(p.ecc16 + o));
  }
}

// ---- master encode + parameter write-back (reference_step.cc: EncodeMaster, WriteParam) ----

template <class Ops, MasterFormat MF, ParamIo PI>
TANDEM_SIMD_INLINE void StoreMasterAndParam(const Ctx<Ops>& c, const Ptrs& p, int o,
                                            typename Ops::F w) {
  using F = typename Ops::F;
  using I = typename Ops::I;
  F decoded;  // what DecodeMaster returns after the store (used only for f32/f16 params)
  I hi;
  if constexpr (MF == MasterFormat::kF32) {
    w.store_unaligned(p.w_f32 + o);
    decoded = w;
  } else if constexpr (MF == MasterFormat::kBF16Ecc8 && requires { Ops::EncodeBf16Ecc8(w, p.w_bf16, p.ecc8); }) {
    // The ISA's own formulation of the same integer formulas (Note [Ecc8 encode] in
    // its Ops header); q is the unsaturated quotient in [-128, 128].
    const auto enc = Ops::EncodeBf16Ecc8(w, p.w_bf16 + o, p.ecc8 + o);
    hi = enc.hi;
    if constexpr (PI == ParamIo::kRuntime)
      decoded = FromBits<Ops>((hi << 16) + (xsimd::min(xsimd::max(enc.q, I(-128)), I(127)) << 8));
  } else {
    hi = F32ToBf16<Ops>(w);
    Ops::StoreLow16(p.w_bf16 + o, hi);
    const I base = hi << 16;
    if constexpr (MF == MasterFormat::kBF16) {
      decoded = FromBits<Ops>(base);
    } else {
      // EccDelta: bits(x) - bits(b) << 16, 0 for NaN.
      const I xi = xsimd::bitwise_cast<I>(w);
      const auto nan = (xi & I(0x7FFFFFFF)) > I(0x7F800000);
      const I d = xsimd::select(nan, I(0), xi - base);
      if constexpr (MF == MasterFormat::kBF16Ecc16) {
        const I e = xsimd::select(d > I(32767), I(32767), d);
        Ops::StoreLow16(p.ecc16 + o, e);
        decoded = FromBits<Ops>(base + e);
      } else {
        // RoundHalfEvenDiv256, then saturate to int8. (d + 127 + (floor(d/256) & 1)) >> 8
        // carries into the quotient exactly when the remainder exceeds 128, or equals 128
        // with an odd floor: the same tie rule as F32ToBf16 (no overflow: |d| <= 2^15).
        I q = (d + I(0x7F) + ((d >> 8) & I(1))) >> 8;
        q = xsimd::min(xsimd::max(q, I(-128)), I(127));
        Ops::StoreLow8(p.ecc8 + o, q);
        decoded = FromBits<Ops>(base + (q << 8));
      }
    }
  }
  if constexpr (PI == ParamIo::kNone) {
    // No parameter, or the parameter is the master's bf16 (already written).
    (void)decoded;
    return;
  } else if constexpr (PI == ParamIo::kBF16) {
    // A separate bf16 parameter: the master's bf16 (or, for an f32 master, its rounding).
    I b;
    if constexpr (MF == MasterFormat::kF32)
      b = F32ToBf16<Ops>(decoded);
    else
      b = hi;
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
        Ops::StreamF32(reinterpret_cast<float*>(p.param) + o, decoded);
      else
        decoded.store_unaligned(reinterpret_cast<float*>(p.param) + o);
      break;
    case DType::kBF16:
      if constexpr (MF == MasterFormat::kF32) {
        if (c.nt_param)
          Ops::StreamLow16(reinterpret_cast<uint16_t*>(p.param) + o, F32ToBf16<Ops>(decoded));
        else
          Ops::StoreLow16(reinterpret_cast<uint16_t*>(p.param) + o, F32ToBf16<Ops>(decoded));
      } else if (c.param_is_master) {
        // The parameter is the master's bf16 (StepSpan allows this alias): already written.
      } else if (c.nt_param) {
        Ops::StreamLow16(reinterpret_cast<uint16_t*>(p.param) + o, hi);
      } else {
        Ops::StoreLow16(reinterpret_cast<uint16_t*>(p.param) + o, hi);  // the master's bf16
      }
      break;
    case DType::kF16:
      Ops::StoreF16(reinterpret_cast<uint16_t*>(p.param) + o, decoded);
      break;
  }
}

// ---- one group ----

// Note [VBMI momentum decode] (ops_avx512vbmi.h): Ops with kGroupMomentumDecode turn the
// momentum codes of a whole group (MomentumCodeValues32) or of two adjacent groups
// (MomentumCodeValues64) into code values before the group's registers are stepped;
// StepReg then takes its register's code values as `m_cv`. Others decode per register.
template <class Ops>
constexpr bool kGroupMomentumDecode = requires { Ops::kGroupMomentumDecode; };

// Note [VBMI group I/O] (ops_avx512vbmi.h): Ops with kGroupIo also load a bf16 gradient
// (LoadBf16x2) for two registers at a time, and a bf16 + ecc8 master (LoadBf16Ecc8x2),
// whose encoded form is then stored two registers at a time (EncodeBf16Ecc8Bits,
// StoreBf16Ecc8x2) when no separate parameter is written. AdamW took the group master
// only once its compander divided (ops_avx512.h): before, its paired loop spilled index
// registers and ran 2% slower with it (docs/host_kernels.md).
template <class Ops, Algo A, GradIo GI>
constexpr bool kGroupGrad = requires { Ops::kGroupIo; } && GI == GradIo::kBF16;
template <class Ops, MasterFormat MF, ParamIo PI>
constexpr bool kGroupMaster = requires { Ops::kGroupIo; } && MF == MasterFormat::kBF16Ecc8 &&
                              PI == ParamIo::kNone;

// What the group code hands to one register (g, w, m_cv: its gradient, master and
// momentum code values where the group loaded them) and takes back from it (hi, t: its
// encoded master, for StoreBf16Ecc8x2, where the group stores it).
template <class Ops>
struct RegIo {
  typename Ops::F g, w, m_cv;
  typename Ops::I hi, t;
};

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
  F g, w;
  if constexpr (kGroupGrad<Ops, A, GI>)
    g = io.g;
  else
    g = LoadGrad<Ops, GI>(c, p.grad, o);
  if constexpr (kGroupMaster<Ops, MF, PI>)
    w = io.w;
  else
    w = LoadMaster<Ops, MF>(p, o);
  F m(0.0f), v(0.0f), u(0.0f);
  // Decode the moments (q8_codec.h: DecodeMomentum, DecodeSqrtVariance).
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
  // The update (update_math.h), operation for operation.
  g = g * c.grad_mul;
  if constexpr (A == Algo::kAdam) {
    if (!c.decoupled && c.apply_l2) g = g + c.wd * w;
    m = c.beta1 * m + c.omb1 * g;
    v = c.beta2 * v + c.omb2 * (g * g);
    if (c.decoupled) w = w * c.decay;
    const F root = xsimd::sqrt(v);
    const F denom = root * c.inv_sqrt_bc2 + c.eps;
    w = w - c.step_size * (m / denom);
    u = root;
  } else if constexpr (A == Algo::kLion) {
    w = w * c.decay;
    const F cc = c.beta1 * m + c.omb1 * g;
    F step;
    if constexpr (requires { Ops::LionStep(cc, c.lr); })
      step = Ops::LionStep(cc, c.lr);  // the same select, see the Ops header
    else
      step = xsimd::select(cc > F(0.0f), c.lr, xsimd::select(cc < F(0.0f), c.neg_lr, F(0.0f)));
    w = w - step;
    m = c.beta2 * m + c.omb2 * g;
  } else if constexpr (HasStaticIo<Ops>()) {
    // Note [Branch-free SGD]: the three loop-invariant flags as lane masks, not
    // branches: the same values are selected (select is exact), and the loop stays one
    // basic block, so GCC keeps its constants in registers (with the branches it
    // re-materialised ~12 integer splats per register, mov + vpbroadcastd each).
    g = xsimd::select(c.l2_mask, g + c.wd * w, g);
    if constexpr (MOM != Moment::kNone) {
      m = xsimd::select(c.first_mask, g, c.momentum * m + c.omd * g);
      g = xsimd::select(c.nesterov_mask, g + c.momentum * m, m);
    }
    w = w - c.lr * g;
  } else {
    if (c.apply_l2) g = g + c.wd * w;
    if constexpr (MOM != Moment::kNone) {
      m = c.first_step ? g : c.momentum * m + c.omd * g;
      g = c.nesterov ? g + c.momentum * m : m;
    }
    w = w - c.lr * g;
  }
  if constexpr (kGroupMaster<Ops, MF, PI>) {
    const auto enc = Ops::EncodeBf16Ecc8Bits(w);
    io.hi = enc.hi;
    io.t = enc.t;
  } else {
    StoreMasterAndParam<Ops, MF, PI>(c, p, o, w);
  }
  if constexpr (MOM == Moment::kF32) m.store_unaligned(p.m_f32 + o);
  if constexpr (MOM == Moment::kQ8) m_keep = m;
  if constexpr (VAR == Moment::kF32) v.store_unaligned(p.v_f32 + o);
  if constexpr (VAR == Moment::kQ8) u_keep = u;
}

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

// Registers j and j + 1 of the group (or pair): the loads that the group does
// (kGroupGrad, kGroupMaster), both StepRegs, the master's stores (kGroupMaster). Two at a
// time keeps the live registers few (AdamW spilled with all four loaded first).
template <class Ops, Algo A, MasterFormat MF, Moment MOM, Moment VAR, GradIo GI, ParamIo PI>
TANDEM_SIMD_INLINE void StepRegPair(const Ctx<Ops>& c, const Ptrs& p, int j,
                                    typename Ops::F m_scale, typename Ops::F v_scale,
                                    RegIo<Ops>* io, typename Ops::F* m_keep,
                                    typename Ops::F* u_keep) {
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
  StepReg<Ops, A, MF, MOM, VAR, GI, PI>(c, p, j * W, m_scale, v_scale, io[j], m_keep[j],
                                        u_keep[j]);
  StepReg<Ops, A, MF, MOM, VAR, GI, PI>(c, p, (j + 1) * W, m_scale, v_scale, io[j + 1],
                                        m_keep[j + 1], u_keep[j + 1]);
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

template <class Ops, Algo A, MasterFormat MF, Moment MOM, Moment VAR, GradIo GI, ParamIo PI>
TANDEM_SIMD_INLINE void StepGroup(const Ctx<Ops>& c, const Ptrs& p) {
  using F = typename Ops::F;
  using I = typename Ops::I;
  constexpr int W = Ops::kWidth;
  constexpr int kRegs = kQuantGroup / W;
  F m_keep[kRegs], u_keep[kRegs];
  F m_scale(0.0f), v_scale(0.0f);
  if constexpr (MOM == Moment::kQ8) m_scale = F(Bf16Value(*p.m_scale));
  if constexpr (VAR == Moment::kQ8) v_scale = F(Bf16Value(*p.v_scale));
  RegIo<Ops> io[kRegs];
  GroupDecode<Ops, MOM, kRegs>(p, io);
  if constexpr (kRegs % 2 == 0) {
    for (int j = 0; j < kRegs; j += 2)
      StepRegPair<Ops, A, MF, MOM, VAR, GI, PI>(c, p, j, m_scale, v_scale, io, m_keep, u_keep);
  } else {
    for (int j = 0; j < kRegs; ++j)
      StepReg<Ops, A, MF, MOM, VAR, GI, PI>(c, p, j * W, m_scale, v_scale, io[j], m_keep[j],
                                            u_keep[j]);
  }

  // Encode the q8 moments now that the group is complete (q8_codec.cc).
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
    for (int j = 0; j < kRegs; ++j) {
      const F mj = m_keep[j];
      const auto neg = mj < F(0.0f);
      const F a = xsimd::abs(mj) * inv;
      I q = Ops::RoundedCompander(a);  // RoundHalfEven((254 a) / (1 + a))
      q = xsimd::min(q, I(127));
      q = xsimd::select(Ops::ToIntMask(neg), -q, q);
      Ops::StoreLow8(p.m_codes + j * W, q);
    }
    *p.m_scale = sb;
  }
  if constexpr (VAR == Moment::kQ8) {
    F acc(0.0f);
    for (int j = 0; j < kRegs; ++j) acc = Ops::MaxInto(acc, u_keep[j]);
    const uint16_t sb = GroupScaleBits(Ops::HMax(acc));
    const F inv(1.0f / Bf16Value(sb));
    for (int j = 0; j < kRegs; ++j) {
      const F uj = u_keep[j];
      I q = Ops::RoundToInt((uj * inv) * F(255.0f));
      q = xsimd::min(q, I(255));
      q = xsimd::select((q == I(0)) & Ops::ToIntMask(uj > F(0.0f)), I(1), q);
      Ops::StoreLow8(p.v_codes + j * W, q);
    }
    *p.v_scale = sb;
  }
}

// Note [Two groups per iteration]: on ISAs whose Ops have the paired group tails
// (GroupScalesPair, GroupScales4), the span loop steps two adjacent groups at a time:
// their registers one after the other, then one tail for both. The tail is a serial
// chain (lane maxima -> shuffle tree -> bf16 ceiling -> 1/scale -> compander); two
// independent chains in one iteration share the shuffle tree and the reciprocal (one
// vdivps xmm for up to four scales) and overlap each other. Each group still gets its
// own max, scale, 1/scale and codes, computed by the same operations as in StepGroup:
// the same bits.
template <class Ops, Moment MOM, Moment VAR>
constexpr bool kPairedTails = requires { Ops::kPairedTails; } &&
                              (MOM == Moment::kQ8 || VAR == Moment::kQ8);

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
    StepRegPair<Ops, A, MF, MOM, VAR, GI, PI>(c, p, j, m_scale[j / kRegs], v_scale[j / kRegs],
                                              io, m_keep, u_keep);
  // The group maxima (see StepGroup: |m| by clearing the sign bit; NaN never wins).
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

// ---- the span ----

// Note [Software prefetch]: with PrefetchGroups() > 0 the span loop asks for the lines of
// every array it reads that distance ahead (prefetcht0: into L1 and L2, since every state
// array is read, modified and written back; prefetchnta made the kernels 30-40% slower on
// the H200 host). The distance is a compile-time constant per case of PrefetchFor, so each
// prefetch is one instruction on a pointer the loop already holds. docs/host_kernels.md,
// "Prefetch and non-temporal stores".
TANDEM_SIMD_INLINE void Prefetch(const void* p) { __builtin_prefetch(p, 0, 3); }

// Prefetches the lines of kN elements of an array of kB-byte elements, d elements ahead
// of base (each line once when kN * kB is a multiple of 64).
template <size_t kN, size_t kB>
TANDEM_SIMD_INLINE void PrefetchLines(const void* base, size_t d) {
  const auto* b = static_cast<const unsigned char*>(base) + d * kB;
  if constexpr (kN * kB >= 64) {
    static_assert(kN * kB % 64 == 0);
    for (size_t off = 0; off < kN * kB; off += 64) Prefetch(b + off);
  } else {
    Prefetch(b);
  }
}

// Prefetches the kN elements that start d elements ahead of p, every array the kernel
// reads; one line of each scale array.
template <class Ops, MasterFormat MF, Moment MOM, Moment VAR, GradIo GI, size_t kN>
TANDEM_SIMD_INLINE void PrefetchAhead(const Ctx<Ops>& c, const Ptrs& p, size_t d) {
  if constexpr (GI == GradIo::kF32)
    PrefetchLines<kN, 4>(p.grad, d);
  else if constexpr (GI == GradIo::kBF16)
    PrefetchLines<kN, 2>(p.grad, d);
  else if (c.grad_size == 4)
    PrefetchLines<kN, 4>(p.grad, d);
  else
    PrefetchLines<kN, 2>(p.grad, d);
  if constexpr (MF == MasterFormat::kF32) PrefetchLines<kN, 4>(p.w_f32, d);
  if constexpr (MF != MasterFormat::kF32) PrefetchLines<kN, 2>(p.w_bf16, d);
  if constexpr (MF == MasterFormat::kBF16Ecc8) PrefetchLines<kN, 1>(p.ecc8, d);
  if constexpr (MF == MasterFormat::kBF16Ecc16) PrefetchLines<kN, 2>(p.ecc16, d);
  if constexpr (MOM == Moment::kF32) PrefetchLines<kN, 4>(p.m_f32, d);
  if constexpr (MOM == Moment::kQ8) {
    PrefetchLines<kN, 1>(p.m_codes, d);
    Prefetch(reinterpret_cast<const unsigned char*>(p.m_scale) + d / 16);
  }
  if constexpr (VAR == Moment::kF32) PrefetchLines<kN, 4>(p.v_f32, d);
  if constexpr (VAR == Moment::kQ8) {
    PrefetchLines<kN, 1>(p.v_codes, d);
    Prefetch(reinterpret_cast<const unsigned char*>(p.v_scale) + d / 16);
  }
}

// The kN elements PrefetchGroups() groups ahead (one of the values tuning.h allows).
template <class Ops, MasterFormat MF, Moment MOM, Moment VAR, GradIo GI, size_t kN>
TANDEM_SIMD_INLINE void PrefetchFor(const Ctx<Ops>& c, const Ptrs& p) {
  constexpr size_t G = kQuantGroup;
  switch (c.prefetch_groups) {
    case 8: PrefetchAhead<Ops, MF, MOM, VAR, GI, kN>(c, p, 8 * G); break;
    case 16: PrefetchAhead<Ops, MF, MOM, VAR, GI, kN>(c, p, 16 * G); break;
    case 32: PrefetchAhead<Ops, MF, MOM, VAR, GI, kN>(c, p, 32 * G); break;
    case 64: PrefetchAhead<Ops, MF, MOM, VAR, GI, kN>(c, p, 64 * G); break;
    default: break;
  }
}

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

// Copies `bytes` from src to dst if src is set (tail buffers).
TANDEM_SIMD_INLINE void CopyIf(void* dst, const void* src, size_t bytes) {
  if (src != nullptr && bytes > 0) std::memcpy(dst, src, bytes);
}

// Note [Non-temporal parameter stores]: the parameter copy is a write-only stream; with
// ordinary stores each of its lines is first read (read-for-ownership), 2 extra bytes per
// element for a bf16 parameter. Streaming stores skip that read. They are used only when
// the parameter is 64-byte aligned (then every store is aligned), not aliased with the
// master, and not fp16; an sfence at the end of the span orders them before the caller
// (or the TBB join) publishes the result.
template <class Ops, Algo A, MasterFormat MF, Moment MOM, Moment VAR,
          GradIo GI = GradIo::kRuntime, ParamIo PI = ParamIo::kRuntime>
void RunSpan(const StepScalars& s, const StepSpan& sp, int prefetch_groups, bool nt) {
  const Ctx<Ops> c(s, sp, prefetch_groups, nt);
  Ptrs p{static_cast<const unsigned char*>(sp.grad),
         static_cast<unsigned char*>(sp.param),
         sp.master.f32,
         sp.master.bf16,
         sp.master.ecc8,
         sp.master.ecc16,
         MOM == Moment::kNone ? nullptr : sp.m.f32,
         MOM == Moment::kNone ? nullptr : sp.m.codes,
         MOM == Moment::kNone ? nullptr : sp.m.scales,
         VAR == Moment::kNone ? nullptr : sp.v.f32,
         VAR == Moment::kNone ? nullptr : sp.v.codes,
         VAR == Moment::kNone ? nullptr : sp.v.scales};
  const size_t full = sp.n / kQuantGroup;
  const size_t pf = static_cast<size_t>(c.prefetch_groups);
  size_t gi = 0;
  if constexpr (kPairedTails<Ops, MOM, VAR>) {
    // Note [Two groups per iteration]; the mode is a tuning knob (tuning.h).
    const int mode = PairedGroups();
    const bool paired = mode == 1 || (mode == 2 && VAR != Moment::kQ8);
    for (; paired && gi + 2 <= full; gi += 2) {
      if (pf != 0 && gi + pf + 1 < full) PrefetchFor<Ops, MF, MOM, VAR, GI, 2 * kQuantGroup>(c, p);
      StepTwoGroups<Ops, A, MF, MOM, VAR, GI, PI>(c, p);
      Advance<MF, MOM, VAR, GI, PI>(p, c.grad_size, c.param_size);
      Advance<MF, MOM, VAR, GI, PI>(p, c.grad_size, c.param_size);
    }
  }
  for (; gi < full; ++gi) {
    if (pf != 0 && gi + pf < full) PrefetchFor<Ops, MF, MOM, VAR, GI, kQuantGroup>(c, p);
    StepGroup<Ops, A, MF, MOM, VAR, GI, PI>(c, p);
    Advance<MF, MOM, VAR, GI, PI>(p, c.grad_size, c.param_size);
  }
  if (c.nt_param) _mm_sfence();
  const size_t len = sp.n - full * kQuantGroup;
  if (len == 0) return;

  // The partial last group: zero-padded copies, the same group code, copy back.
  constexpr size_t G = kQuantGroup;
  alignas(64) unsigned char grad[G * 4] = {}, param[G * 4] = {};
  alignas(64) float w_f32[G] = {}, m_f32[G] = {}, v_f32[G] = {};
  alignas(64) uint16_t w_bf16[G] = {};
  alignas(64) int8_t ecc8[G] = {};
  alignas(64) int16_t ecc16[G] = {};
  alignas(64) uint8_t m_codes[G] = {}, v_codes[G] = {};
  uint16_t m_scale = 0, v_scale = 0;
  CopyIf(grad, p.grad, len * c.grad_size);
  CopyIf(w_f32, p.w_f32, len * 4);
  CopyIf(w_bf16, p.w_bf16, len * 2);
  CopyIf(ecc8, p.ecc8, len);
  CopyIf(ecc16, p.ecc16, len * 2);
  CopyIf(m_f32, p.m_f32, len * 4);
  CopyIf(m_codes, p.m_codes, len);
  CopyIf(&m_scale, p.m_scale, 2);
  CopyIf(v_f32, p.v_f32, len * 4);
  CopyIf(v_codes, p.v_codes, len);
  CopyIf(&v_scale, p.v_scale, 2);
  const Ptrs t{grad,
               p.param ? param : nullptr,
               p.w_f32 ? w_f32 : nullptr,
               p.w_bf16 ? w_bf16 : nullptr,
               p.ecc8 ? ecc8 : nullptr,
               p.ecc16 ? ecc16 : nullptr,
               p.m_f32 ? m_f32 : nullptr,
               p.m_codes ? m_codes : nullptr,
               p.m_scale ? &m_scale : nullptr,
               p.v_f32 ? v_f32 : nullptr,
               p.v_codes ? v_codes : nullptr,
               p.v_scale ? &v_scale : nullptr};
  Ctx<Ops> ct = c;
  ct.nt_param = false;  // the tail buffers are on the stack, unaligned for streaming
  StepGroup<Ops, A, MF, MOM, VAR, GradIo::kRuntime, ParamIo::kRuntime>(ct, t);
  CopyIf(p.param, t.param, len * c.param_size);
  CopyIf(p.w_f32, t.w_f32, len * 4);
  CopyIf(p.w_bf16, t.w_bf16, len * 2);
  CopyIf(p.ecc8, t.ecc8, len);
  CopyIf(p.ecc16, t.ecc16, len * 2);
  CopyIf(p.m_f32, t.m_f32, len * 4);
  CopyIf(p.m_codes, t.m_codes, len);
  CopyIf(p.m_scale, t.m_scale, 2);
  CopyIf(p.v_f32, t.v_f32, len * 4);
  CopyIf(p.v_codes, t.v_codes, len);
  CopyIf(p.v_scale, t.v_scale, 2);
}

}  // namespace tandem::cpu::TANDEM_ISA_NS
