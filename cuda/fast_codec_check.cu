// Exhaustive device checks of fast_codec.cuh's hardware-dependent shortcuts; see
// fast_codec_check.h. Each thread takes 8 consecutive inputs (a tile, as the kernels do).
#include "cuda/fast_codec_check.h"

#include <cuda_runtime.h>

#include "cuda/cuda_check.h"
#include "cuda/fast_codec.cuh"
#include "engine/fp_bits.h"
#include "engine/master_codec.h"
#include "engine/update_math.h"

namespace tandem::gpu::detail {
namespace {

struct Counters {
  unsigned long long ecc8_bad;
  unsigned int ecc8_first;
  unsigned long long dec_bad;
  unsigned int dec_first;
  unsigned long long sqrt_bad;
  unsigned int sqrt_first;
  unsigned long long mom_bad;
  unsigned int mom_first;
  unsigned long long mom_fallbacks;
};

__device__ void Report(unsigned long long* count, unsigned int* first, uint32_t input) {
  if (atomicAdd(count, 1ull) == 0ull) *first = input;
}

// This thread's tile of the 2^32 fp32 bit patterns: x[i] = bits 8 * t + i, t the global
// thread index; false for the threads past the 2^29 tiles.
__device__ bool InputTile(uint64_t& t, float (&x)[8]) {
  t = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (t >= (uint64_t{1} << 29)) return false;
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = num::FloatOf(static_cast<uint32_t>(8 * t + i));
  return true;
}

// Inputs [8 * t, 8 * t + 8) of all 2^32 fp32 bit patterns.
__global__ void CheckEcc8Encode(Counters* c) {
  uint64_t t;
  float x[8];
  if (!InputTile(t, x)) return;
  uint32_t b[4], e[2];
  bool ok = true;
  EncodeEcc8Tile(x, b, e, ok);
  bool any_nan = false;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    uint16_t wb;
    int8_t we;
    num::EncodeEcc8(x[i], &wb, &we);
    const bool nan = (num::BitsOf(x[i]) & 0x7FFFFFFFu) > 0x7F800000u;
    any_nan |= nan;
    const uint16_t gb = static_cast<uint16_t>(i % 2 == 0 ? b[i / 2] & 0xFFFFu : b[i / 2] >> 16);
    const uint8_t ge = static_cast<uint8_t>(e[i / 4] >> (8 * (i % 4)));
    if (!nan && (gb != wb || ge != static_cast<uint8_t>(we)))
      Report(&c->ecc8_bad, &c->ecc8_first, num::BitsOf(x[i]));
  }
  if (ok == any_nan) Report(&c->ecc8_bad, &c->ecc8_first, static_cast<uint32_t>(8 * t));
}

template <int k>
__device__ void CheckOneDecode(uint32_t pair, uint32_t ecc_word, Counters* c) {
  const uint16_t b = static_cast<uint16_t>(k % 2 == 0 ? pair & 0xFFFFu : pair >> 16);
  const int8_t e = static_cast<int8_t>(ecc_word >> (8 * (k % 4)));
  const float want = num::DecodeEcc8(b, e);
  const float got = DecodeEcc8Packed<k>(pair, ecc_word);
  if (num::BitsOf(want) != num::BitsOf(got))
    Report(&c->dec_bad, &c->dec_first, (uint32_t{b} << 8) | static_cast<uint8_t>(e));
}

// Thread t: bf16 value t >> 8 (in both halves of the pair), ecc byte t & 0xFF at every
// position of the word.
__global__ void CheckEcc8Decode(Counters* c) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= (1u << 24)) return;
  const uint32_t b = t >> 8, e = t & 0xFFu;
  const uint32_t pair = b | (b << 16);
  const uint32_t word = e * 0x01010101u;
  CheckOneDecode<0>(pair, word, c);
  CheckOneDecode<1>(pair, word, c);
  CheckOneDecode<2>(pair, word, c);
  CheckOneDecode<3>(pair, word, c);
}

// Inputs [8 * t, 8 * t + 8) of all 2^32 fp32 bit patterns, one flag each.
__global__ void CheckSqrt(Counters* c) {
  const uint64_t t = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (t >= (uint64_t{1} << 29)) return;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t bits = static_cast<uint32_t>(8 * t + i);
    const float x = num::FloatOf(bits);
    bool ok = true;
    const float got = SqrtInRange(x, ok);
    const bool in_range = bits >= 0x0D000000u && bits <= 0x7F7FFFFFu;
    if (ok != in_range || (ok && num::BitsOf(got) != num::BitsOf(num::Sqrt(x))))
      Report(&c->sqrt_bad, &c->sqrt_first, bits);
  }
}

// Inputs [8 * t, 8 * t + 8) of all 2^32 fp32 bit patterns as m, inv_scale 1, inside the
// tile's domain: a = |m| * inv <= 1 + 2^-20 for finite state (the scale is at least the
// group maximum), so finite |m| <= 1.0078125 (the bound the tile's argument needs) and
// every non-finite m (which must be flagged). The
// tile's flag is per tile, so each element runs alone (the other 7 slots +0) to learn
// whether it is one the tile would leave to the fallback. The fallback is checked on
// every input.
__global__ void CheckMomentum(Counters* c) {
  uint64_t t;
  float m[8];
  if (!InputTile(t, m)) return;
  unsigned long long fallbacks = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float one[8] = {};
    one[i] = m[i];
    uint32_t cw[2];
    bool ok = true;
    EncodeMomentumTile(one, 1.0f, cw, ok);
    const uint8_t want = static_cast<uint8_t>(num::EncodeMomentum(m[i], 1.0f));
    const uint8_t got = static_cast<uint8_t>(cw[i / 4] >> (8 * (i % 4)));
    const bool finite_big = fabsf(m[i]) > 1.0078125f && fabsf(m[i]) < INFINITY;
    if ((!finite_big && ok && got != want) || EncodeMomentumFast(m[i], 1.0f) != want)
      Report(&c->mom_bad, &c->mom_first, num::BitsOf(m[i]));
    fallbacks += ok || finite_big ? 0 : 1;
  }
  if (fallbacks != 0) atomicAdd(&c->mom_fallbacks, fallbacks);
}

}  // namespace

FastCodecCheck RunFastCodecCheck() {
  Counters* d = nullptr;
  CheckCuda(cudaMalloc(&d, sizeof(Counters)), "RunFastCodecCheck: cudaMalloc");
  Counters h{};
  try {
    CheckCuda(cudaMemset(d, 0, sizeof(Counters)), "RunFastCodecCheck: cudaMemset");
    CheckEcc8Encode<<<(1u << 29) / 256, 256>>>(d);
    CheckCuda(cudaGetLastError(), "RunFastCodecCheck: CheckEcc8Encode launch");
    CheckEcc8Decode<<<(1u << 24) / 256, 256>>>(d);
    CheckCuda(cudaGetLastError(), "RunFastCodecCheck: CheckEcc8Decode launch");
    CheckSqrt<<<(1u << 29) / 256, 256>>>(d);
    CheckCuda(cudaGetLastError(), "RunFastCodecCheck: CheckSqrt launch");
    CheckMomentum<<<(1u << 29) / 256, 256>>>(d);
    CheckCuda(cudaGetLastError(), "RunFastCodecCheck: CheckMomentum launch");
    CheckCuda(cudaMemcpy(&h, d, sizeof(Counters), cudaMemcpyDeviceToHost),
              "RunFastCodecCheck: cudaMemcpy");
  } catch (...) {
    cudaFree(d);
    throw;
  }
  CheckCuda(cudaFree(d), "RunFastCodecCheck: cudaFree");
  FastCodecCheck r;
  r.ecc8_mismatches = h.ecc8_bad;
  r.ecc8_first_bad = h.ecc8_first;
  r.ecc8_decode_mismatches = h.dec_bad;
  r.ecc8_decode_first_bad = h.dec_first;
  r.sqrt_mismatches = h.sqrt_bad;
  r.sqrt_first_bad = h.sqrt_first;
  r.momentum_mismatches = h.mom_bad;
  r.momentum_first_bad = h.mom_first;
  r.momentum_fallbacks = h.mom_fallbacks;
  return r;
}

}  // namespace tandem::gpu::detail
