// StepSpanHost: validate, set the FP mode, run the active ISA's kernel.
#include "cpu_simd/host_kernels.h"
#include "cpu_simd/span_kernels.h"
#include "engine/fp_mode.h"

namespace tandem::cpu {

void StepSpanHost(const StepScalars& s, const StepSpan& span) {
  ValidateStepSpan(s, span, "host step");
  const SpanKernel kernel = ActiveKernel();
  FpModeGuard fp_mode;
  kernel(s, span);
}

}  // namespace tandem::cpu
