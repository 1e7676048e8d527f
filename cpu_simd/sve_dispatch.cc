// StepSpanSve and the SVE test hooks: the vector length of the calling thread, read with
// one instruction (cntb), picks the kernel built for it (Note [SVE vector lengths],
// kernel_sve.cc). Compiled with +sve but no fixed vector length, so it runs at any VL; it
// is called only on CPUs with SVE (IsaSupported(Isa::kSve)).
#include <arm_sve.h>

#include "cpu_simd/span_kernels.h"

namespace tandem::cpu {
namespace {

// The build of the calling thread's vector length among those of kSveVectorBits, or the
// NEON one at any other length (the same bits).
template <class Fn>
Fn ForThisVectorLength(Fn sve128, Fn sve256, Fn sve512, Fn neon) {
  switch (svcntb()) {
    case 16:
      return sve128;
    case 32:
      return sve256;
    case 64:
      return sve512;
    default:
      return neon;
  }
}

}  // namespace

unsigned SveVectorBitsNow() { return static_cast<unsigned>(svcntb()) * 8u; }

void StepSpanSve(const StepScalars& s, const StepSpan& span, const SpanTuning& t) {
  ForThisVectorLength(&StepSpanSve128, &StepSpanSve256, &StepSpanSve512, &StepSpanNeon)(s, span, t);
}

void CodeValuesSve(float* mom, float* var) {
  ForThisVectorLength(&CodeValuesSve128, &CodeValuesSve256, &CodeValuesSve512, &CodeValuesNeon)(
      mom, var);
}

void CompanderCodesSve(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v) {
  ForThisVectorLength(&CompanderCodesSve128, &CompanderCodesSve256, &CompanderCodesSve512,
                      &CompanderCodesNeon)(a, n, m_pos, m_neg, v);
}

uint64_t CompanderMismatchesSve(uint32_t lo_bits, uint32_t hi_bits) {
  return ForThisVectorLength(&CompanderMismatchesSve128, &CompanderMismatchesSve256,
                             &CompanderMismatchesSve512,
                             &CompanderMismatchesNeon)(lo_bits, hi_bits);
}

}  // namespace tandem::cpu
