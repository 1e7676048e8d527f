// The host step kernel instantiated for SVE at one vector length. cpu_simd/CMakeLists.txt
// compiles this file once per length N in kSveVectorBits (span_kernels.h), each time with
// only -march=armv8.2-a+sve -msve-vector-bits=N; the functions it defines carry N in
// their names (StepSpanSve128, ...), and StepSpanSve (sve_dispatch.cc) calls the one of
// the vector length the calling thread runs with.
//
// Note [SVE vector lengths]: SVE code may be written for any vector length (VL), read at
// run time; xsimd's SVE batches are not: their size is a compile-time constant, fixed by
// -msve-vector-bits, and code built for one VL computes garbage at another. The kernel
// template also needs its lane count at compile time (a quantization group is 32 / W
// registers, the group max a fixed butterfly). So there is one build per VL that a group
// of 32 floats can hold a whole number of: 128 bits (Grace's Neoverse V2, Graviton4),
// 256 (Neoverse V1, Graviton3) and 512 (A64FX); a CPU with another VL (none is sold)
// runs the NEON kernels, which give the same bits. docs/host_kernels.md, "Arm".
#if __ARM_FEATURE_SVE_BITS == 128
#define TANDEM_ISA_NS sve128
#elif __ARM_FEATURE_SVE_BITS == 256
#define TANDEM_ISA_NS sve256
#elif __ARM_FEATURE_SVE_BITS == 512
#define TANDEM_ISA_NS sve512
#else
#error "kernel_sve.cc: build with -msve-vector-bits=128, 256 or 512"
#endif
#include "cpu_simd/kernel_dispatch.h"
#include "cpu_simd/kernel_test_hooks.h"
#include "cpu_simd/ops_sve.h"
#include "cpu_simd/span_kernels.h"
#include "engine/fp_mode.h"

#define TANDEM_SVE_CAT2(a, b) a##b
#define TANDEM_SVE_CAT(a, b) TANDEM_SVE_CAT2(a, b)
#define TANDEM_SVE_FN(name) TANDEM_SVE_CAT(name, __ARM_FEATURE_SVE_BITS)

namespace tandem::cpu {

void TANDEM_SVE_FN(StepSpanSve)(const StepScalars& s, const StepSpan& span, const SpanTuning& t) {
  TANDEM_ISA_NS::StepSpanWith<TANDEM_ISA_NS::Ops>(s, span, t);
}

void TANDEM_SVE_FN(CodeValuesSve)(float* mom, float* var) {
  FpModeGuard fp_mode;
  TANDEM_ISA_NS::CodeValuesWith<TANDEM_ISA_NS::Ops>(mom, var);
}

void TANDEM_SVE_FN(CompanderCodesSve)(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg,
                                      uint8_t* v) {
  FpModeGuard fp_mode;
  TANDEM_ISA_NS::CompanderCodesWith<TANDEM_ISA_NS::Ops>(a, n, m_pos, m_neg, v);
}

uint64_t TANDEM_SVE_FN(CompanderMismatchesSve)(uint32_t lo_bits, uint32_t hi_bits) {
  FpModeGuard fp_mode;
  return TANDEM_ISA_NS::CompanderMismatchesWith<TANDEM_ISA_NS::Ops>(lo_bits, hi_bits);
}

}  // namespace tandem::cpu
