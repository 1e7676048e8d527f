// The SVE loader/storer layer under the generic kernel (kernel_args.h lists its layers),
// for one vector length fixed at compile time: __ARM_FEATURE_SVE_BITS, from
// -msve-vector-bits (xsimd's SVE batches have a size known to the compiler; Note [SVE
// vector lengths] in kernel_sve.cc). 4, 8 or 16 lanes at 128, 256 or 512 bits. Include
// only from kernel_sve.cc.
//
// SVE's extending loads and truncating stores move the narrow formats in one
// instruction each (ld1sb/ld1ub/ld1sh/ld1uh, st1b/st1h). The conversions follow
// Note [Arm conversions] (ops_neon.h): frintn then fcvtzs is round half to even whatever
// FPCR's rounding mode, NaN gives 0; fcvt to and from fp16 works on the low half of each
// 32-bit lane.
#pragma once

#include <arm_sve.h>

#include <cstdint>
#include <xsimd/xsimd.hpp>

#include "cpu_simd/kernel_args.h"

#if !defined(__ARM_FEATURE_SVE_BITS) || __ARM_FEATURE_SVE_BITS == 0
#error "ops_sve.h needs -msve-vector-bits=N (cpu_simd/CMakeLists.txt)"
#endif

namespace tandem::cpu::TANDEM_ISA_NS {

// Code values and compander: DivisionCodecs (kernel_args.h; xsimd's SVE division is fdiv).
struct Ops : DivisionCodecs<Ops> {
  using Arch = xsimd::sve;
  using F = xsimd::batch<float, Arch>;
  using I = xsimd::batch<int32_t, Arch>;
  using FMask = xsimd::batch_bool<float, Arch>;
  using IMask = xsimd::batch_bool<int32_t, Arch>;
  static constexpr int kWidth = __ARM_FEATURE_SVE_BITS / 32;
  static constexpr bool kHasF16c = true;
  static_assert(kWidth == 4 || kWidth == 8 || kWidth == 16,
                "Note [Group is the unit]: 32 must be a multiple of the lane count");

  __attribute__((always_inline)) static svbool_t All() { return svptrue_b32(); }

  __attribute__((always_inline)) static I LoadU16(const void* p) {
    return I(svreinterpret_s32_u32(svld1uh_u32(All(), static_cast<const uint16_t*>(p))));
  }
  __attribute__((always_inline)) static I LoadI16(const void* p) {
    return I(svld1sh_s32(All(), static_cast<const int16_t*>(p)));
  }
  __attribute__((always_inline)) static I LoadI8(const void* p) {
    return I(svld1sb_s32(All(), static_cast<const int8_t*>(p)));
  }
  __attribute__((always_inline)) static I LoadU8(const void* p) {
    return I(svreinterpret_s32_u32(svld1ub_u32(All(), static_cast<const uint8_t*>(p))));
  }
  // Store the low 16 / 8 bits of every lane (truncation, like a C cast).
  __attribute__((always_inline)) static void StoreLow16(void* p, I x) {
    svst1h_s32(All(), static_cast<int16_t*>(p), x);
  }
  __attribute__((always_inline)) static void StoreLow8(void* p, I x) {
    svst1b_s32(All(), static_cast<int8_t*>(p), x);
  }
  // The streaming variants are ordinary stores (Note [Non-temporal parameter stores]).
  __attribute__((always_inline)) static void StreamLow16(void* p, I x) { StoreLow16(p, x); }
  __attribute__((always_inline)) static void StreamF32(float* p, F x) { x.store_unaligned(p); }
  // frintn, then an exact conversion (Note [Arm conversions]).
  __attribute__((always_inline)) static I RoundToInt(F x) {
    return I(svcvt_s32_f32_x(All(), svrintn_f32_x(All(), x)));
  }
  __attribute__((always_inline)) static IMask ToIntMask(FMask m) {
    return xsimd::batch_bool_cast<int32_t>(m);
  }

  // acc = a > acc ? a : acc (q8_codec.cc's loop): a NaN lane of `a` never wins.
  __attribute__((always_inline)) static F MaxInto(F acc, F a) {
    return xsimd::select(a > acc, a, acc);
  }
  // Max over lanes (lanes are non-NaN, so the order of the reduction does not matter).
  __attribute__((always_inline)) static float HMax(F x) { return svmaxv_f32(All(), x); }

  __attribute__((always_inline)) static F LoadF16(const uint16_t* p) {
    const svuint32_t h = svld1uh_u32(All(), p);
    const F hw(svcvt_f32_f16_x(All(), svreinterpret_f16_u32(h)));
    const I hi(svreinterpret_s32_u32(h));
    const I special = ((hi & I(0x8000)) << 16) | I(0x7F800000) | ((hi & I(0x3FF)) << 13);
    const IMask is_special = (hi & I(0x7C00)) == I(0x7C00);
    return BitCast<F>(xsimd::select(is_special, special, BitCast<I>(hw)));
  }
  __attribute__((always_inline)) static void StoreF16(uint16_t* p, F x) {
    const I h(svreinterpret_s32_u32(
        svand_n_u32_x(All(), svreinterpret_u32_f16(svcvt_f16_f32_x(All(), x)), 0xFFFFu)));
    const IMask nan = (BitCast<I>(x) & I(0x7FFFFFFF)) > I(0x7F800000);
    StoreLow16(p, xsimd::select(nan, I(0x7E00), h));
  }
};

}  // namespace tandem::cpu::TANDEM_ISA_NS
