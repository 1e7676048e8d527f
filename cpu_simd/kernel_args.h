// What every layer of the host step kernel shares: the template switches of an
// instantiation (algorithm, moment formats, static gradient and parameter dtypes), the raw
// pointers of one group (Ptrs) and the per-span constants (Ctx). No arithmetic of the
// step. The layers, bottom up: kernel_args.h, codecs.h (lane conversions), group_io.h
// (moving a register between memory and the kernel), update.h, encode.h, group_step.h
// (one group), pairing.h (two groups), prefetch.h, step_kernel.h (the span loop).
//
// Every kernel header is included by exactly one translation unit per ISA
// (kernel_<isa>.cc), after its Ops header and with TANDEM_ISA_NS defined, so that every
// function is a distinct symbol compiled with that ISA's flags (no inline function is
// shared between ISA files).
#pragma once

#ifndef TANDEM_ISA_NS
#error "define TANDEM_ISA_NS before including cpu_simd/kernel_args.h"
#endif

#include <cstddef>
#include <cstdint>

#include <xsimd/xsimd.hpp>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/step_scalars.h"
#include "engine/step_span.h"
#include "tandem/types.h"

// Everything in the group code is forced inline: GCC otherwise outlines the per-register
// helpers and passes batches through the stack (measured: 3-8x slower).
#define TANDEM_SIMD_INLINE inline __attribute__((always_inline))

namespace tandem::cpu::TANDEM_ISA_NS {

// The same bits reinterpreted as batch type To (an xsimd::batch of the same lane count).
// xsimd's bitwise_cast names the target batch up to 8.x (Debian 12's, the x86 builds) and
// its element type from 9.0 on (third_party/xsimd, the aarch64 builds).
template <class To, class T, class A>
TANDEM_SIMD_INLINE To BitCast(const xsimd::batch<T, A>& x) {
#if XSIMD_VERSION_MAJOR >= 9
  return xsimd::bitwise_cast<typename To::value_type>(x);
#else
  return xsimd::bitwise_cast<To>(x);
#endif
}

// Note [IEEE division and square root]: the kernels divide and take square roots only
// through Div and Sqrt, the correctly rounded operations. They are xsimd's operator/ and
// sqrt, except where the Ops define their own: xsimd (8.1 and 13.2 alike) computes float
// division and square root on NEON from reciprocal estimates and Newton steps, which
// differ from IEEE in the last bits, so ops_neon.h calls fdiv and fsqrt itself.
template <class Ops>
TANDEM_SIMD_INLINE typename Ops::F Div(typename Ops::F a, typename Ops::F b) {
  if constexpr (requires { Ops::Div(a, b); })
    return Ops::Div(a, b);
  else
    return a / b;
}
template <class Ops>
TANDEM_SIMD_INLINE typename Ops::F Sqrt(typename Ops::F x) {
  if constexpr (requires { Ops::Sqrt(x); })
    return Ops::Sqrt(x);
  else
    return xsimd::sqrt(x);
}

// The q8 code values and the momentum compander by IEEE division, the reference's own
// formulas (q8_codec.h: MomentumCodeValue, VarianceCodeValue, EncodeMomentum's quotient),
// for Ops without a faster exact form: an Ops struct derives from DivisionCodecs<Ops>.
template <class Ops>
struct DivisionCodecs {
  template <class I>
  TANDEM_SIMD_INLINE static auto MomentumCodeValue(I q) {
    const I aq = xsimd::select(q < I(0), -q, q);
    return Div<Ops>(xsimd::batch_cast<float>(q), xsimd::batch_cast<float>(I(254) - aq));
  }
  template <class I>
  TANDEM_SIMD_INLINE static auto VarianceCodeValue(I q) {
    return Div<Ops>(xsimd::batch_cast<float>(q), typename Ops::F(255.0f));
  }
  // RoundHalfEven((254 a) / (1 + a)).
  template <class F>
  TANDEM_SIMD_INLINE static auto RoundedCompander(F a) {
    return Ops::RoundToInt(Div<Ops>(F(254.0f) * a, F(1.0f) + a));
  }
};

// Orders the span's streaming stores (Ops::StreamF32, Ops::StreamLow16) before the caller
// publishes the result: an sfence on x86-64. The aarch64 Ops stream with ordinary stores,
// which the caller's join orders (Note [Non-temporal parameter stores], step_kernel.h).
TANDEM_SIMD_INLINE void StreamFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

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

}  // namespace tandem::cpu::TANDEM_ISA_NS
