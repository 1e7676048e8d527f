// Maps a validated span to its kernel instantiation: the algorithm and the state formats
// are template arguments (36 instantiations per ISA); the gradient and parameter dtypes
// are loop-invariant runtime switches inside the group code, except on ISAs with static
// I/O instantiations for the common dtypes (Note [Static dtypes] in step_kernel.h; 4 more
// per format combination). Included by kernel_<isa>.cc right after step_kernel.h,
// inside no namespace.
#pragma once

#include "cpu_simd/step_kernel.h"
#include "cpu_simd/tuning.h"

namespace tandem::cpu::TANDEM_ISA_NS {

// Note [Static dtypes]: picks the instantiation with the gradient dtype and the parameter
// write-back as template arguments where one exists, else the runtime one.
template <class Ops, Algo A, MasterFormat MF, Moment MOM, Moment VAR>
void RunSpanIo(const StepScalars& s, const StepSpan& sp, int pf, bool nt) {
  if constexpr (HasStaticIo<Ops>()) {
    const bool alias = MF != MasterFormat::kF32 && sp.param != nullptr &&
                       sp.param == sp.master.bf16 && sp.param_dtype == DType::kBF16;
    const bool no_write = sp.param == nullptr || alias;
    const bool bf16_param = sp.param != nullptr && !alias && sp.param_dtype == DType::kBF16;
    if (sp.grad_dtype == DType::kBF16) {
      if (no_write) return RunSpan<Ops, A, MF, MOM, VAR, GradIo::kBF16, ParamIo::kNone>(s, sp, pf, nt);
      if (bf16_param) return RunSpan<Ops, A, MF, MOM, VAR, GradIo::kBF16, ParamIo::kBF16>(s, sp, pf, nt);
    } else if (sp.grad_dtype == DType::kF32) {
      if (no_write) return RunSpan<Ops, A, MF, MOM, VAR, GradIo::kF32, ParamIo::kNone>(s, sp, pf, nt);
      if (bf16_param) return RunSpan<Ops, A, MF, MOM, VAR, GradIo::kF32, ParamIo::kBF16>(s, sp, pf, nt);
    }
  }
  RunSpan<Ops, A, MF, MOM, VAR>(s, sp, pf, nt);
}

template <class Ops, Algo A, MasterFormat MF, Moment MOM>
void DispatchVariance(const StepScalars& s, const StepSpan& sp, int pf, bool nt) {
  if constexpr (A != Algo::kAdam) {
    RunSpanIo<Ops, A, MF, MOM, Moment::kNone>(s, sp, pf, nt);
  } else if (sp.formats.variance == MomentFormat::kQ8) {
    RunSpanIo<Ops, A, MF, MOM, Moment::kQ8>(s, sp, pf, nt);
  } else {
    RunSpanIo<Ops, A, MF, MOM, Moment::kF32>(s, sp, pf, nt);
  }
}

// Ops that decode the momentum per group (Note [VBMI momentum decode]) change nothing
// for spans without a q8 momentum, so their kernels are instantiated, and called
// (StepSpanAvx512), only for spans with one.
template <class Ops, Algo A, MasterFormat MF>
void DispatchMomentum(const StepScalars& s, const StepSpan& sp, int pf, bool nt) {
  constexpr bool kQ8Only = kGroupMomentumDecode<Ops>;
  if (s.has_momentum == 0) {
    if constexpr (A == Algo::kSgd && !kQ8Only) DispatchVariance<Ops, A, MF, Moment::kNone>(s, sp, pf, nt);
  } else if (sp.formats.momentum == MomentFormat::kQ8) {
    DispatchVariance<Ops, A, MF, Moment::kQ8>(s, sp, pf, nt);
  } else if constexpr (!kQ8Only) {
    DispatchVariance<Ops, A, MF, Moment::kF32>(s, sp, pf, nt);
  }
}

template <class Ops, Algo A>
void DispatchMaster(const StepScalars& s, const StepSpan& sp, int pf, bool nt) {
  switch (sp.formats.master) {
    case MasterFormat::kF32:
      DispatchMomentum<Ops, A, MasterFormat::kF32>(s, sp, pf, nt);
      break;
    case MasterFormat::kBF16:
      DispatchMomentum<Ops, A, MasterFormat::kBF16>(s, sp, pf, nt);
      break;
    case MasterFormat::kBF16Ecc8:
      DispatchMomentum<Ops, A, MasterFormat::kBF16Ecc8>(s, sp, pf, nt);
      break;
    case MasterFormat::kBF16Ecc16:
      DispatchMomentum<Ops, A, MasterFormat::kBF16Ecc16>(s, sp, pf, nt);
      break;
  }
}

template <class Ops>
void StepSpanWith(const StepScalars& s, const StepSpan& sp) {
  if (sp.n == 0) return;
  const int pf = PrefetchGroups();
  const bool nt = NtParamStores();
  switch (s.algo) {
    case Algorithm::kAdamW:
    case Algorithm::kAdam:
      DispatchMaster<Ops, Algo::kAdam>(s, sp, pf, nt);
      break;
    case Algorithm::kLion:
      DispatchMaster<Ops, Algo::kLion>(s, sp, pf, nt);
      break;
    case Algorithm::kSGD:
      DispatchMaster<Ops, Algo::kSgd>(s, sp, pf, nt);
      break;
  }
}

// Test hooks (span_kernels.h); the caller holds an FpModeGuard.
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
    const F a = xsimd::bitwise_cast<F>(bits);
    const I fast = Ops::RoundedCompander(a);
    const I exact = Ops::RoundToInt((F(254.0f) * a) / (F(1.0f) + a));
    const auto differ = (fast != exact) & (bits < I(static_cast<int32_t>(hi_bits)));
    bad_lanes = bad_lanes + xsimd::select(differ, I(1), I(0));
  }
  bad_lanes.store_aligned(lane);
  uint64_t bad = 0;
  for (int i = 0; i < W; ++i) bad += static_cast<uint64_t>(lane[i]);
  return bad;
}

}  // namespace tandem::cpu::TANDEM_ISA_NS
