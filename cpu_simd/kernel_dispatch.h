// Maps a validated span to its kernel instantiation: the algorithm and the state formats
// are template arguments (36 instantiations per ISA); the gradient and parameter dtypes
// are loop-invariant runtime switches inside the group code. Included by kernel_<isa>.cc
// right after step_kernel.h, inside no namespace.
#pragma once

#include "cpu_simd/step_kernel.h"
#include "cpu_simd/tuning.h"

namespace tandem::cpu::TANDEM_ISA_NS {

template <class Ops, Algo A, MasterFormat MF, Moment MOM>
void DispatchVariance(const StepScalars& s, const StepSpan& sp, int pf, bool nt) {
  if constexpr (A != Algo::kAdam) {
    RunSpan<Ops, A, MF, MOM, Moment::kNone>(s, sp, pf, nt);
  } else if (sp.formats.variance == MomentFormat::kQ8) {
    RunSpan<Ops, A, MF, MOM, Moment::kQ8>(s, sp, pf, nt);
  } else {
    RunSpan<Ops, A, MF, MOM, Moment::kF32>(s, sp, pf, nt);
  }
}

template <class Ops, Algo A, MasterFormat MF>
void DispatchMomentum(const StepScalars& s, const StepSpan& sp, int pf, bool nt) {
  if (s.has_momentum == 0) {
    if constexpr (A == Algo::kSgd) DispatchVariance<Ops, A, MF, Moment::kNone>(s, sp, pf, nt);
  } else if (sp.formats.momentum == MomentFormat::kQ8) {
    DispatchVariance<Ops, A, MF, Moment::kQ8>(s, sp, pf, nt);
  } else {
    DispatchVariance<Ops, A, MF, Moment::kF32>(s, sp, pf, nt);
  }
}

template <class Ops, Algo A>
void DispatchMaster(const StepScalars& s, const StepSpan& sp, int pf, bool nt) {
  switch (sp.formats.master) {
    case MasterFormat::kF32: DispatchMomentum<Ops, A, MasterFormat::kF32>(s, sp, pf, nt); break;
    case MasterFormat::kBF16: DispatchMomentum<Ops, A, MasterFormat::kBF16>(s, sp, pf, nt); break;
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
    case Algorithm::kAdam: DispatchMaster<Ops, Algo::kAdam>(s, sp, pf, nt); break;
    case Algorithm::kLion: DispatchMaster<Ops, Algo::kLion>(s, sp, pf, nt); break;
    case Algorithm::kSGD: DispatchMaster<Ops, Algo::kSgd>(s, sp, pf, nt); break;
  }
}

}  // namespace tandem::cpu::TANDEM_ISA_NS
