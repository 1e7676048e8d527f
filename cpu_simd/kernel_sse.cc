// The host step kernel instantiated for sse (this file alone is compiled with its flags).
#define TANDEM_ISA_NS sse
#include "cpu_simd/kernel_dispatch.h"
#include "cpu_simd/kernel_test_hooks.h"
#include "cpu_simd/ops_sse.h"
#include "cpu_simd/span_kernels.h"
#include "engine/fp_mode.h"

namespace tandem::cpu {

void StepSpanSse(const StepScalars& s, const StepSpan& span, const SpanTuning& t) {
  sse::StepSpanWith<sse::Ops>(s, span, t);
}

void CodeValuesSse(float* mom, float* var) {
  FpModeGuard fp_mode;
  sse::CodeValuesWith<sse::Ops>(mom, var);
}

void CompanderCodesSse(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v) {
  FpModeGuard fp_mode;
  sse::CompanderCodesWith<sse::Ops>(a, n, m_pos, m_neg, v);
}

uint64_t CompanderMismatchesSse(uint32_t lo_bits, uint32_t hi_bits) {
  FpModeGuard fp_mode;
  return sse::CompanderMismatchesWith<sse::Ops>(lo_bits, hi_bits);
}

}  // namespace tandem::cpu
