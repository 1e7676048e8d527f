// Scalar fp16 array conversions for ISAs without F16C (see span_kernels.h). Kept in a
// generic translation unit so the inline reference functions are never compiled with
// ISA flags (one definition of each inline function, safe on every CPU).
#include "cpu_simd/span_kernels.h"
#include "engine/fp_bits.h"

namespace tandem::cpu {

void F16ToF32Array(const uint16_t* in, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = num::F16ToF32(in[i]);
}

void F32ToF16Array(const float* in, int n, uint16_t* out) {
  for (int i = 0; i < n; ++i) out[i] = num::F32ToF16(in[i]);
}

}  // namespace tandem::cpu
