// The host step kernels for AVX-512 CPUs that also have AVX512-VBMI, for spans with a q8
// momentum (Note [VBMI momentum decode], ops_avx512vbmi.h); this file alone is compiled
// with -mavx512vbmi, and StepSpanAvx512 calls it only where the CPU has VBMI.
#define TANDEM_ISA_NS avx512vbmi
#include "cpu_simd/kernel_dispatch.h"
#include "cpu_simd/ops_avx512vbmi.h"
#include "cpu_simd/span_kernels.h"
#include "engine/fp_mode.h"

namespace tandem::cpu {

void StepSpanAvx512Vbmi(const StepScalars& s, const StepSpan& span) {
  avx512vbmi::StepSpanWith<avx512vbmi::OpsVbmi>(s, span);
}

void GroupCodeValuesAvx512Vbmi(float* mom) {
  FpModeGuard fp_mode;
  avx512vbmi::GroupCodeValuesWith<avx512vbmi::OpsVbmi>(mom);
}

}  // namespace tandem::cpu
