// The AArch64 Advanced SIMD (NEON) loader/storer layer under the generic kernel
// (kernel_args.h lists its layers); 4 lanes, like SSE. Every aarch64 CPU has it, with the
// fp16 conversions. Include only from kernel_neon.cc.
//
// Note [Arm conversions]: what differs from x86 and how the bits stay the same.
// * Round to int: fcvtns rounds half to even whatever FPCR's rounding mode; NaN gives 0
//   where cvtps2dq gives INT_MIN, and both give a code of 0 after the 8-bit truncation
//   (and after the clamps of codecs.h: the reference's RoundHalfEven also maps NaN to 0).
//   Out-of-range inputs saturate, as in the reference; the kernels never produce them
//   outside NaN (a <= 1 + 2^-23, Note [Scales in vector registers] in ops_avx512.h).
// * Max: fmax returns NaN when either input is NaN, maxps its second operand; MaxInto is
//   therefore a compare and a select, which is the reference's loop exactly.
// * fp16: fcvtl/fcvtn are exact / round to nearest even under the FpModeGuard's FPCR (no
//   FZ, FZ16, AHP or DN); Inf/NaN lanes are rebuilt as num::F16ToF32 does (the hardware
//   would quiet a signalling NaN), and a NaN stores as 0x7E00 as num::F32ToF16 does.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>
#include <xsimd/xsimd.hpp>

#include "cpu_simd/kernel_args.h"

namespace tandem::cpu::TANDEM_ISA_NS {

// Code values and compander: DivisionCodecs (kernel_args.h), through Div below.
struct Ops : DivisionCodecs<Ops> {
  using Arch = xsimd::neon64;
  using F = xsimd::batch<float, Arch>;
  using I = xsimd::batch<int32_t, Arch>;
  using FMask = xsimd::batch_bool<float, Arch>;
  using IMask = xsimd::batch_bool<int32_t, Arch>;
  static constexpr int kWidth = 4;
  static constexpr bool kHasF16c = true;

  __attribute__((always_inline)) static uint32_t Load32(const void* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  __attribute__((always_inline)) static I LoadU16(const void* p) {
    return I(vreinterpretq_s32_u32(vmovl_u16(vld1_u16(static_cast<const uint16_t*>(p)))));
  }
  __attribute__((always_inline)) static I LoadI16(const void* p) {
    return I(vmovl_s16(vld1_s16(static_cast<const int16_t*>(p))));
  }
  __attribute__((always_inline)) static I LoadI8(const void* p) {
    const int8x8_t b = vreinterpret_s8_u32(vdup_n_u32(Load32(p)));
    return I(vmovl_s16(vget_low_s16(vmovl_s8(b))));
  }
  __attribute__((always_inline)) static I LoadU8(const void* p) {
    const uint8x8_t b = vreinterpret_u8_u32(vdup_n_u32(Load32(p)));
    return I(vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(b)))));
  }
  // Store the low 16 / 8 bits of every lane (truncation, like a C cast).
  __attribute__((always_inline)) static void StoreLow16(void* p, I x) {
    vst1_u16(static_cast<uint16_t*>(p), vmovn_u32(vreinterpretq_u32_s32(x)));
  }
  __attribute__((always_inline)) static void StoreLow8(void* p, I x) {
    const uint16x4_t h = vmovn_u32(vreinterpretq_u32_s32(x));
    const uint8x8_t b = vmovn_u16(vcombine_u16(h, h));
    const uint32_t v = vget_lane_u32(vreinterpret_u32_u8(b), 0);
    std::memcpy(p, &v, 4);
  }
  // The streaming variants are ordinary stores (Note [Non-temporal parameter stores]).
  __attribute__((always_inline)) static void StreamLow16(void* p, I x) { StoreLow16(p, x); }
  __attribute__((always_inline)) static void StreamF32(float* p, F x) { x.store_unaligned(p); }
  // fcvtns: round half to even (Note [Arm conversions]).
  __attribute__((always_inline)) static I RoundToInt(F x) { return I(vcvtnq_s32_f32(x)); }
  __attribute__((always_inline)) static IMask ToIntMask(FMask m) {
    return xsimd::batch_bool_cast<int32_t>(m);
  }

  // acc = a > acc ? a : acc (q8_codec.cc's loop): a NaN lane of `a` never wins.
  __attribute__((always_inline)) static F MaxInto(F acc, F a) {
    return xsimd::select(a > acc, a, acc);
  }
  // Max over lanes (lanes are non-NaN, so the order of the reduction does not matter).
  __attribute__((always_inline)) static float HMax(F x) { return vmaxvq_f32(x); }

  // Note [IEEE division and square root] (kernel_args.h): fdiv and fsqrt, not xsimd's
  // estimates.
  __attribute__((always_inline)) static F Div(F a, F b) { return F(vdivq_f32(a, b)); }
  __attribute__((always_inline)) static F Sqrt(F x) { return F(vsqrtq_f32(x)); }

  __attribute__((always_inline)) static F LoadF16(const uint16_t* p) {
    const uint16x4_t h = vld1_u16(p);
    const F hw(vcvt_f32_f16(vreinterpret_f16_u16(h)));
    const I hi(vreinterpretq_s32_u32(vmovl_u16(h)));
    const I special = ((hi & I(0x8000)) << 16) | I(0x7F800000) | ((hi & I(0x3FF)) << 13);
    const IMask is_special = (hi & I(0x7C00)) == I(0x7C00);
    return BitCast<F>(xsimd::select(is_special, special, BitCast<I>(hw)));
  }
  __attribute__((always_inline)) static void StoreF16(uint16_t* p, F x) {
    const I h(vreinterpretq_s32_u32(vmovl_u16(vreinterpret_u16_f16(vcvt_f16_f32(x)))));
    const IMask nan = (BitCast<I>(x) & I(0x7FFFFFFF)) > I(0x7F800000);
    StoreLow16(p, xsimd::select(nan, I(0x7E00), h));
  }
};

}  // namespace tandem::cpu::TANDEM_ISA_NS
