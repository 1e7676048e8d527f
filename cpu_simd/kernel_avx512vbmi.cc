// The host step kernels for AVX-512 CPUs that also have AVX512-VBMI, for spans with a q8
// momentum (Note [VBMI momentum decode], ops_avx512vbmi.h); this file alone is compiled
// with -mavx512vbmi, and StepSpanAvx512 calls it only where the CPU has VBMI.
#define TANDEM_ISA_NS avx512vbmi
#include "cpu_simd/kernel_dispatch.h"
#include "cpu_simd/kernel_test_hooks.h"
#include "cpu_simd/ops_avx512vbmi.h"
#include "cpu_simd/span_kernels.h"
#include "engine/fp_mode.h"

#include <cstddef>

namespace tandem::cpu {

void StepSpanAvx512Vbmi(const StepScalars& s, const StepSpan& span, const SpanTuning& t) {
  avx512vbmi::StepSpanWith<avx512vbmi::OpsVbmi>(s, span, t);
}

void GroupCodeValuesAvx512Vbmi(float* mom) {
  FpModeGuard fp_mode;
  avx512vbmi::GroupCodeValuesWith<avx512vbmi::OpsVbmi>(mom);
}

namespace {

using avx512vbmi::OpsVbmi;
using F = OpsVbmi::F;
using I = OpsVbmi::I;

// Lanes where two registers' bits differ.
int Differ(F a, F b) {
  return __builtin_popcount(
      _mm512_cmpneq_epi32_mask(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

// Note [VBMI group I/O] against the per-register forms of ops_avx512.h for 32 lanes.
uint64_t GroupIoMismatches32(const uint16_t* bf16, const int8_t* ecc, const float* w) {
  uint64_t bad = 0;
  F got[2];
  OpsVbmi::LoadBf16x2(bf16, got);
  for (int j = 0; j < 2; ++j)
    bad += Differ(got[j],
                  F(_mm512_castsi512_ps(_mm512_slli_epi32(OpsVbmi::LoadU16(bf16 + 16 * j), 16))));
  OpsVbmi::LoadBf16Ecc8x2(bf16, ecc, got);
  for (int j = 0; j < 2; ++j) {
    const __m512i want = _mm512_add_epi32(_mm512_slli_epi32(OpsVbmi::LoadU16(bf16 + 16 * j), 16),
                                          _mm512_slli_epi32(OpsVbmi::LoadI8(ecc + 16 * j), 8));
    bad += Differ(got[j], F(_mm512_castsi512_ps(want)));
  }
  alignas(64) uint16_t b_want[32], b_got[32];
  alignas(64) int8_t e_want[32], e_got[32];
  OpsVbmi::Ecc8Bits enc[2];
  for (int j = 0; j < 2; ++j) {
    const F x = F::load_unaligned(w + 16 * j);
    OpsVbmi::EncodeBf16Ecc8(x, b_want + 16 * j, e_want + 16 * j);
    enc[j] = OpsVbmi::EncodeBf16Ecc8Bits(x);
  }
  OpsVbmi::StoreBf16Ecc8x2(b_got, e_got, enc[0].hi, enc[1].hi, enc[0].t, enc[1].t);
  for (int i = 0; i < 32; ++i) bad += (b_got[i] != b_want[i]) + (e_got[i] != e_want[i]);
  return bad;
}

}  // namespace

uint64_t GroupIoMismatchesAvx512Vbmi(const uint16_t* bf16, const int8_t* ecc, const float* w,
                                     size_t n) {
  FpModeGuard fp_mode;
  uint64_t bad = 0;
  for (size_t i = 0; i + 32 <= n; i += 32) bad += GroupIoMismatches32(bf16 + i, ecc + i, w + i);
  return bad;
}

}  // namespace tandem::cpu
