// The host step kernel instantiated for avx2 (this file alone is compiled with its flags).
#define TANDEM_ISA_NS avx2
#include "cpu_simd/kernel_dispatch.h"
#include "cpu_simd/kernel_test_hooks.h"
#include "cpu_simd/ops_avx2.h"
#include "cpu_simd/span_kernels.h"
#include "engine/fp_mode.h"

namespace tandem::cpu {

void StepSpanAvx2(const StepScalars& s, const StepSpan& span, const SpanTuning& t) {
  avx2::StepSpanWith<avx2::Ops>(s, span, t);
}

void CodeValuesAvx2(float* mom, float* var) {
  FpModeGuard fp_mode;
  avx2::CodeValuesWith<avx2::Ops>(mom, var);
}

void CompanderCodesAvx2(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v) {
  FpModeGuard fp_mode;
  avx2::CompanderCodesWith<avx2::Ops>(a, n, m_pos, m_neg, v);
}

uint64_t CompanderMismatchesAvx2(uint32_t lo_bits, uint32_t hi_bits) {
  FpModeGuard fp_mode;
  return avx2::CompanderMismatchesWith<avx2::Ops>(lo_bits, hi_bits);
}

}  // namespace tandem::cpu
