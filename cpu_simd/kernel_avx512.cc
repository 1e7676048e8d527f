// The host step kernel instantiated for avx512 (this file alone is compiled with its flags).
#define TANDEM_ISA_NS avx512
#include "cpu_simd/ops_avx512.h"
#include "cpu_simd/kernel_dispatch.h"
#include "cpu_simd/span_kernels.h"

namespace tandem::cpu {

void StepSpanAvx512(const StepScalars& s, const StepSpan& span) {
  avx512::StepSpanWith<avx512::Ops>(s, span);
}

}  // namespace tandem::cpu
