// StepSpanHost: validate, resolve the options, set the FP mode, run the chosen kernel.
#include "cpu_simd/host_kernels.h"
#include "cpu_simd/span_kernels.h"
#include "engine/fp_mode.h"

namespace tandem::cpu {

void StepSpanHost(const StepScalars& s, const StepSpan& span, const HostKernelOptions& options) {
  ValidateStepSpan(s, span, "host step");
  const HostKernel kernel = ResolveHostKernel(options);
  FpModeGuard fp_mode;
  kernel.run(s, span, kernel.tuning);
}

}  // namespace tandem::cpu
