// Maps a validated span to its kernel instantiation: the algorithm and the state formats
// are template arguments (36 instantiations per ISA); the gradient and parameter dtypes
// are loop-invariant runtime switches inside the group code, except on ISAs with static
// I/O instantiations for the common dtypes (Note [Static dtypes] in kernel_args.h; 4 more
// per format combination). Included by kernel_<isa>.cc (kernel_args.h says how).
#pragma once

#include "cpu_simd/span_kernels.h"
#include "cpu_simd/step_kernel.h"

namespace tandem::cpu::TANDEM_ISA_NS {

// Note [Static dtypes]: picks the instantiation with the gradient dtype and the parameter
// write-back as template arguments where one exists, else the runtime one.
template <class Ops, Algo A, MasterFormat MF, Moment MOM, Moment VAR>
void RunSpanIo(const StepScalars& s, const StepSpan& sp, const SpanTuning& t) {
  if constexpr (HasStaticIo<Ops>()) {
    const bool alias = MF != MasterFormat::kF32 && sp.param != nullptr &&
                       sp.param == sp.master.bf16 && sp.param_dtype == DType::kBF16;
    const bool no_write = sp.param == nullptr || alias;
    const bool bf16_param = sp.param != nullptr && !alias && sp.param_dtype == DType::kBF16;
    if (sp.grad_dtype == DType::kBF16) {
      if (no_write) return RunSpan<Ops, A, MF, MOM, VAR, GradIo::kBF16, ParamIo::kNone>(s, sp, t);
      if (bf16_param) return RunSpan<Ops, A, MF, MOM, VAR, GradIo::kBF16, ParamIo::kBF16>(s, sp, t);
    } else if (sp.grad_dtype == DType::kF32) {
      if (no_write) return RunSpan<Ops, A, MF, MOM, VAR, GradIo::kF32, ParamIo::kNone>(s, sp, t);
      if (bf16_param) return RunSpan<Ops, A, MF, MOM, VAR, GradIo::kF32, ParamIo::kBF16>(s, sp, t);
    }
  }
  RunSpan<Ops, A, MF, MOM, VAR>(s, sp, t);
}

template <class Ops, Algo A, MasterFormat MF, Moment MOM>
void DispatchVariance(const StepScalars& s, const StepSpan& sp, const SpanTuning& t) {
  if constexpr (A != Algo::kAdam) {
    RunSpanIo<Ops, A, MF, MOM, Moment::kNone>(s, sp, t);
  } else if (sp.formats.variance == MomentFormat::kQ8) {
    RunSpanIo<Ops, A, MF, MOM, Moment::kQ8>(s, sp, t);
  } else {
    RunSpanIo<Ops, A, MF, MOM, Moment::kF32>(s, sp, t);
  }
}

// Ops that decode the momentum per group (Note [VBMI momentum decode]) change nothing
// for spans without a q8 momentum, so their kernels are instantiated, and called
// (StepSpanAvx512), only for spans with one.
template <class Ops, Algo A, MasterFormat MF>
void DispatchMomentum(const StepScalars& s, const StepSpan& sp, const SpanTuning& t) {
  constexpr bool kQ8Only = kGroupMomentumDecode<Ops>;
  if (s.has_momentum == 0) {
    if constexpr (A == Algo::kSgd && !kQ8Only)
      DispatchVariance<Ops, A, MF, Moment::kNone>(s, sp, t);
  } else if (sp.formats.momentum == MomentFormat::kQ8) {
    DispatchVariance<Ops, A, MF, Moment::kQ8>(s, sp, t);
  } else if constexpr (!kQ8Only) {
    DispatchVariance<Ops, A, MF, Moment::kF32>(s, sp, t);
  }
}

template <class Ops, Algo A>
void DispatchMaster(const StepScalars& s, const StepSpan& sp, const SpanTuning& t) {
  switch (sp.formats.master) {
    case MasterFormat::kF32:
      DispatchMomentum<Ops, A, MasterFormat::kF32>(s, sp, t);
      break;
    case MasterFormat::kBF16:
      DispatchMomentum<Ops, A, MasterFormat::kBF16>(s, sp, t);
      break;
    case MasterFormat::kBF16Ecc8:
      DispatchMomentum<Ops, A, MasterFormat::kBF16Ecc8>(s, sp, t);
      break;
    case MasterFormat::kBF16Ecc16:
      DispatchMomentum<Ops, A, MasterFormat::kBF16Ecc16>(s, sp, t);
      break;
  }
}

template <class Ops>
void StepSpanWith(const StepScalars& s, const StepSpan& sp, const SpanTuning& t) {
  if (sp.n == 0) return;
  switch (s.algo) {
    case Algorithm::kAdamW:
    case Algorithm::kAdam:
      DispatchMaster<Ops, Algo::kAdam>(s, sp, t);
      break;
    case Algorithm::kLion:
      DispatchMaster<Ops, Algo::kLion>(s, sp, t);
      break;
    case Algorithm::kSGD:
      DispatchMaster<Ops, Algo::kSgd>(s, sp, t);
      break;
  }
}

}  // namespace tandem::cpu::TANDEM_ISA_NS
