// The host step kernel instantiated for avx2 (this file alone is compiled with its flags).
#define TANDEM_ISA_NS avx2
#include "cpu_simd/ops_avx2.h"
#include "cpu_simd/kernel_dispatch.h"
#include "cpu_simd/span_kernels.h"

namespace tandem::cpu {

void StepSpanAvx2(const StepScalars& s, const StepSpan& span) {
  avx2::StepSpanWith<avx2::Ops>(s, span);
}

}  // namespace tandem::cpu
