// The host step kernel instantiated for avx512 (this file alone is compiled with its flags).
#define TANDEM_ISA_NS avx512
#include "cpu_simd/kernel_dispatch.h"
#include "cpu_simd/ops_avx512.h"
#include "cpu_simd/span_kernels.h"
#include "engine/fp_mode.h"

namespace tandem::cpu {

void StepSpanAvx512(const StepScalars& s, const StepSpan& span) {
  avx512::StepSpanWith<avx512::Ops>(s, span);
}

void CodeValuesAvx512(float* mom, float* var) {
  FpModeGuard fp_mode;
  avx512::CodeValuesWith<avx512::Ops>(mom, var);
}

uint64_t CompanderMismatchesAvx512(uint32_t lo_bits, uint32_t hi_bits) {
  FpModeGuard fp_mode;
  return avx512::CompanderMismatchesWith<avx512::Ops>(lo_bits, hi_bits);
}

}  // namespace tandem::cpu
