// The host step kernel instantiated for avx512 (this file alone is compiled with its flags).
#define TANDEM_ISA_NS avx512
#include "cpu_simd/kernel_dispatch.h"
#include "cpu_simd/kernel_test_hooks.h"
#include "cpu_simd/ops_avx512.h"
#include "cpu_simd/span_kernels.h"
#include "engine/fp_mode.h"

#include <cstring>

namespace tandem::cpu {

void StepSpanAvx512(const StepScalars& s, const StepSpan& span, const SpanTuning& t) {
  // Note [VBMI momentum decode]: spans with a q8 momentum take the VBMI kernels where the
  // CPU has VBMI and the options ask for them (t.vbmi_decode); the same bits either way.
  if (s.has_momentum != 0 && span.formats.momentum == MomentFormat::kQ8 && t.vbmi_decode)
    return StepSpanAvx512Vbmi(s, span, t);
  avx512::StepSpanWith<avx512::Ops>(s, span, t);
}

void CodeValuesAvx512(float* mom, float* var) {
  FpModeGuard fp_mode;
  avx512::CodeValuesWith<avx512::Ops>(mom, var);
}

void CompanderCodesAvx512(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v) {
  FpModeGuard fp_mode;
  avx512::CompanderCodesWith<avx512::Ops>(a, n, m_pos, m_neg, v);
}

uint64_t CompanderMismatchesAvx512(uint32_t lo_bits, uint32_t hi_bits) {
  FpModeGuard fp_mode;
  return avx512::CompanderMismatchesWith<avx512::Ops>(lo_bits, hi_bits);
}

void GroupScaleAvx512(float amax, uint16_t* scale_bits, float* inv) {
  FpModeGuard fp_mode;
  // Lane 5 holds amax, the others zero: the butterfly must find it wherever it is.
  alignas(64) float lanes[16] = {};
  lanes[5] = amax;
  const avx512::Ops::F acc = avx512::Ops::F::load_aligned(lanes);
  alignas(64) float out[4][16];
  avx512::Ops::GroupScale1(acc, scale_bits).store_aligned(out[0]);
  *inv = out[0][0];
  // The two-moment path must agree with the one-moment path for either moment.
  uint16_t m_bits = 0, v_bits = 0;
  avx512::Ops::F inv_m, inv_v;
  avx512::Ops::GroupScales2(acc, avx512::Ops::F(0.0f), &m_bits, &v_bits, inv_m, inv_v);
  uint16_t m2 = 0, v2 = 0;
  avx512::Ops::F inv_m2, inv_v2;
  avx512::Ops::GroupScales2(avx512::Ops::F(0.0f), acc, &m2, &v2, inv_m2, inv_v2);
  inv_m.store_aligned(out[1]);
  inv_v2.store_aligned(out[2]);
  bool same = m_bits == *scale_bits && v2 == *scale_bits;
  for (int i = 0; i < 16; ++i)
    same = same && std::memcmp(&out[0][i], inv, 4) == 0 && std::memcmp(&out[1][i], inv, 4) == 0 &&
           std::memcmp(&out[2][i], inv, 4) == 0;
  if (!same) *scale_bits = 0;  // no group scale is 0 (bf16ceil(max(amax, FLT_MIN)) > 0)
}

}  // namespace tandem::cpu
