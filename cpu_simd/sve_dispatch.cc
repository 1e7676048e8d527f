// StepSpanSve and the SVE test hooks: the vector length of the calling thread, read with
// one instruction (cntb), picks the kernel built for it (Note [SVE vector lengths],
// kernel_sve.cc). Compiled with +sve but no fixed vector length, so it runs at any VL; it
// is called only on CPUs with SVE (IsaSupported(Isa::kSve)).
#include <arm_sve.h>

#include "cpu_simd/span_kernels.h"

namespace tandem::cpu {

unsigned SveVectorBitsNow() { return static_cast<unsigned>(svcntb()) * 8u; }

void StepSpanSve(const StepScalars& s, const StepSpan& span, const SpanTuning& t) {
  switch (svcntb()) {
    case 16:
      return StepSpanSve128(s, span, t);
    case 32:
      return StepSpanSve256(s, span, t);
    case 64:
      return StepSpanSve512(s, span, t);
    default:
      return StepSpanNeon(s, span, t);  // the same bits (Note [SVE vector lengths])
  }
}

void CodeValuesSve(float* mom, float* var) {
  switch (svcntb()) {
    case 16:
      return CodeValuesSve128(mom, var);
    case 32:
      return CodeValuesSve256(mom, var);
    case 64:
      return CodeValuesSve512(mom, var);
    default:
      return CodeValuesNeon(mom, var);
  }
}

void CompanderCodesSve(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v) {
  switch (svcntb()) {
    case 16:
      return CompanderCodesSve128(a, n, m_pos, m_neg, v);
    case 32:
      return CompanderCodesSve256(a, n, m_pos, m_neg, v);
    case 64:
      return CompanderCodesSve512(a, n, m_pos, m_neg, v);
    default:
      return CompanderCodesNeon(a, n, m_pos, m_neg, v);
  }
}

uint64_t CompanderMismatchesSve(uint32_t lo_bits, uint32_t hi_bits) {
  switch (svcntb()) {
    case 16:
      return CompanderMismatchesSve128(lo_bits, hi_bits);
    case 32:
      return CompanderMismatchesSve256(lo_bits, hi_bits);
    case 64:
      return CompanderMismatchesSve512(lo_bits, hi_bits);
    default:
      return CompanderMismatchesNeon(lo_bits, hi_bits);
  }
}

}  // namespace tandem::cpu
