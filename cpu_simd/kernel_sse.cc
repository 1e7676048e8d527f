// The host step kernel instantiated for sse (this file alone is compiled with its flags).
#define TANDEM_ISA_NS sse
#include "cpu_simd/ops_sse.h"
#include "cpu_simd/kernel_dispatch.h"
#include "cpu_simd/span_kernels.h"

namespace tandem::cpu {

void StepSpanSse(const StepScalars& s, const StepSpan& span) {
  sse::StepSpanWith<sse::Ops>(s, span);
}

}  // namespace tandem::cpu
