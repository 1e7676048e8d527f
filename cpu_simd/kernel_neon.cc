// The host step kernel instantiated for AArch64 NEON (this file alone is compiled with its
// flags: none beyond the aarch64 baseline).
#define TANDEM_ISA_NS neon
#include "cpu_simd/kernel_dispatch.h"
#include "cpu_simd/kernel_test_hooks.h"
#include "cpu_simd/ops_neon.h"
#include "cpu_simd/span_kernels.h"
#include "engine/fp_mode.h"

namespace tandem::cpu {

void StepSpanNeon(const StepScalars& s, const StepSpan& span, const SpanTuning& t) {
  neon::StepSpanWith<neon::Ops>(s, span, t);
}

void CodeValuesNeon(float* mom, float* var) {
  FpModeGuard fp_mode;
  neon::CodeValuesWith<neon::Ops>(mom, var);
}

void CompanderCodesNeon(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v) {
  FpModeGuard fp_mode;
  neon::CompanderCodesWith<neon::Ops>(a, n, m_pos, m_neg, v);
}

uint64_t CompanderMismatchesNeon(uint32_t lo_bits, uint32_t hi_bits) {
  FpModeGuard fp_mode;
  return neon::CompanderMismatchesWith<neon::Ops>(lo_bits, hi_bits);
}

}  // namespace tandem::cpu
