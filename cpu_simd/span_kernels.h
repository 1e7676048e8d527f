// Internal: the per-ISA span kernels behind host_kernels.h.
//
// Each is defined in its own translation unit compiled with that ISA's flags
// (kernel_sse.cc, kernel_avx2.cc, kernel_avx512.cc; kernel_neon.cc, kernel_sve.cc), and
// only the current architecture's are built: x86-64 builds have the Sse/Avx ones,
// aarch64 builds the Neon/Sve ones. Contract of every SpanKernel: the
// span is already validated (ValidateStepSpan) and the calling thread already runs with
// round-to-nearest and no FTZ/DAZ (an FpModeGuard is held); it throws nothing.
// Its tuning comes in as a SpanTuning, resolved from the caller's HostKernelOptions once
// (ResolveHostKernel), so the kernels read no global state.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu_simd/host_kernels.h"
#include "engine/step_scalars.h"
#include "engine/step_span.h"

namespace tandem::cpu {

// HostKernelOptions as the span loop reads them (Resolve, host_kernel_options.h).
struct SpanTuning {
  int prefetch_groups;  // 0, 8, 16, 32 or 64
  bool nt_param;
  PairedGroups paired;
  bool vbmi_decode;  // the CPU has VBMI and the options ask for it
};

using SpanKernel = void (*)(const StepScalars& s, const StepSpan& span, const SpanTuning& t);

void StepSpanSse(const StepScalars& s, const StepSpan& span, const SpanTuning& t);
void StepSpanAvx2(const StepScalars& s, const StepSpan& span, const SpanTuning& t);
void StepSpanAvx512(const StepScalars& s, const StepSpan& span, const SpanTuning& t);
// The AVX-512 kernels with the VBMI momentum decode (kernel_avx512vbmi.cc): the CPU must
// have AVX512-VBMI, and the span a q8 momentum (s.has_momentum != 0); other spans are left
// untouched. StepSpanAvx512 sends such spans here when t.vbmi_decode is set.
void StepSpanAvx512Vbmi(const StepScalars& s, const StepSpan& span, const SpanTuning& t);
void StepSpanNeon(const StepScalars& s, const StepSpan& span, const SpanTuning& t);
// Note [SVE vector lengths] (kernel_sve.cc): the SVE kernels of each vector length
// (bits), and StepSpanSve, which runs the one of the calling thread's vector length (the
// NEON kernels at any other); the CPU must have SVE.
inline constexpr unsigned kSveVectorBits[] = {128, 256, 512};
void StepSpanSve128(const StepScalars& s, const StepSpan& span, const SpanTuning& t);
void StepSpanSve256(const StepScalars& s, const StepSpan& span, const SpanTuning& t);
void StepSpanSve512(const StepScalars& s, const StepSpan& span, const SpanTuning& t);
void StepSpanSve(const StepScalars& s, const StepSpan& span, const SpanTuning& t);
// The calling thread's SVE vector length in bits, by cntb (CPU with SVE only).
unsigned SveVectorBitsNow();

// Test hooks (tests/cpu_simd/codec_test.cc), one set per ISA, each holding an
// FpModeGuard. CodeValues: mom[c + 128] = momentum code value of int8 code c (c = -127..127;
// entry 0 unused), var[c] = variance code value of code c, as the kernel computes them.
// CompanderMismatches: over every float a with bit pattern in [lo_bits, hi_bits), how many
// times the kernel's RoundHalfEven((254 a) / (1 + a)) differs from the plain division.
void CodeValuesSse(float* mom, float* var);
void CodeValuesAvx2(float* mom, float* var);
void CodeValuesAvx512(float* mom, float* var);
uint64_t CompanderMismatchesSse(uint32_t lo_bits, uint32_t hi_bits);
uint64_t CompanderMismatchesAvx2(uint32_t lo_bits, uint32_t hi_bits);
uint64_t CompanderMismatchesAvx512(uint32_t lo_bits, uint32_t hi_bits);
// CompanderCodes: the q8 codes of every a[i] (n a multiple of 16) at 1/scale = 1 by the
// kernels' group encode: m_pos / m_neg the momentum codes of a[i] / -a[i], v the variance
// code of a[i] (q8_codec.h: EncodeMomentum, EncodeSqrtVariance).
void CompanderCodesSse(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v);
void CompanderCodesAvx2(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v);
void CompanderCodesAvx512(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v);
void CompanderCodesNeon(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v);
void CompanderCodesSve(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v);
void CompanderCodesSve128(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v);
void CompanderCodesSve256(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v);
void CompanderCodesSve512(const float* a, size_t n, int8_t* m_pos, int8_t* m_neg, uint8_t* v);
void CodeValuesNeon(float* mom, float* var);
uint64_t CompanderMismatchesNeon(uint32_t lo_bits, uint32_t hi_bits);
// The Sve hooks run the hooks of the calling thread's vector length, as StepSpanSve does.
void CodeValuesSve(float* mom, float* var);
void CodeValuesSve128(float* mom, float* var);
void CodeValuesSve256(float* mom, float* var);
void CodeValuesSve512(float* mom, float* var);
uint64_t CompanderMismatchesSve(uint32_t lo_bits, uint32_t hi_bits);
uint64_t CompanderMismatchesSve128(uint32_t lo_bits, uint32_t hi_bits);
uint64_t CompanderMismatchesSve256(uint32_t lo_bits, uint32_t hi_bits);
uint64_t CompanderMismatchesSve512(uint32_t lo_bits, uint32_t hi_bits);
// GroupScaleAvx512: the AVX-512 group-scale path (Note [Scales in vector registers] in
// ops_avx512.h) for a group whose largest magnitude is amax (>= 0, not NaN): the stored
// bf16 scale bits and 1/scale as the codes use it.
void GroupScaleAvx512(float amax, uint16_t* scale_bits, float* inv);
// GroupCodeValuesAvx512Vbmi (CPU with AVX512-VBMI only): mom[c + 128] = the momentum code
// value of int8 code c for every c in [-128, 127], by the VBMI group decode, through both
// its two-group and its one-group form.
void GroupCodeValuesAvx512Vbmi(float* mom);
// GroupIoMismatchesAvx512Vbmi (CPU with AVX512-VBMI only; n a multiple of 32): over n
// lanes, how many times the VBMI group loads of a bf16 gradient (bf16) and a bf16 + ecc8
// master (bf16, ecc), and the master encode and store of values w, differ from the
// per-register AVX-512 forms (Note [VBMI group I/O], ops_avx512vbmi.h).
uint64_t GroupIoMismatchesAvx512Vbmi(const uint16_t* bf16, const int8_t* ecc, const float* w,
                                     size_t n);

// The kernel and tuning that `options` choose (resolved as Resolve documents, and
// throwing as it does), and the options so resolved.
struct HostKernel {
  SpanKernel run;
  SpanTuning tuning;
  HostKernelOptions options;  // Resolve(options)
};
HostKernel ResolveHostKernel(const HostKernelOptions& options);

// Scalar fp16 conversions of whole arrays with the reference's exact semantics
// (num::F16ToF32 / num::F32ToF16), compiled without ISA flags; used by ISAs without F16C.
void F16ToF32Array(const uint16_t* in, int n, float* out);
void F32ToF16Array(const float* in, int n, uint16_t* out);

}  // namespace tandem::cpu
