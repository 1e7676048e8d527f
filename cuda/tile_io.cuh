// Moving a thread's 8 consecutive elements of one array between global memory and
// registers: the explicit vector loads and stores, the element-wise accesses of partial
// and misaligned tiles, the gradient and parameter dtypes, and the raw words of a fast
// tile (TileRaw, LoadTile). No arithmetic of the step. Relies on step_args.h for the
// span table (SpanMeta, VecBit) and the tile shape, and on engine/fp_bits.h for the
// exact dtype conversions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/step_args.h"
#include "engine/fp_bits.h"

namespace tandem::gpu::detail {

// ---- Vector stores. ----
//
// Note [Explicit vector stores]: a store of a uint4 / float4 / uint2 value should be one
// PTX vector store, but NVVM splits some of them into 4-byte stores with no alignment
// known. Each split store is a separate request whose 32 lanes write a quarter of each
// sector they touch, so the stores cost 4x the LSU requests and L2 partial-sector writes
// (docs/gpu_kernels.md, "Tuning decisions"). These helpers emit the vector store itself.
// The kernel's arrays are device pointers (StepSpan), i.e. global memory, whose generic
// address is the global address (as CUDA's own __stwb assumes). `p` must be aligned to
// the size.
__device__ __forceinline__ void StoreGlobal16(void* p, uint32_t a, uint32_t b, uint32_t c,
                                              uint32_t d) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(a), "r"(b), "r"(c), "r"(d)
               : "memory");
}
__device__ __forceinline__ void StoreGlobal8(void* p, uint32_t a, uint32_t b) {
  asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(a), "r"(b) : "memory");
}
__device__ __forceinline__ void StoreGlobal16(void* p, float a, float b, float c, float d) {
  StoreGlobal16(p, __float_as_uint(a), __float_as_uint(b), __float_as_uint(c), __float_as_uint(d));
}

// ---- Vector loads. ----
//
// Global loads of 16, 8 and 2 bytes; `p` aligned to the size. volatile: they stay in
// program order with the explicit stores (Note [Explicit vector stores]). Plain
// ld.global: the .cg and .cs cache operators measured no faster (docs/gpu_kernels.md).
__device__ __forceinline__ uint4 LoadGlobal16(const void* p) {
  uint4 a;
  asm volatile("ld.global.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(a.x), "=r"(a.y), "=r"(a.z), "=r"(a.w)
               : "l"(p));
  return a;
}
__device__ __forceinline__ uint2 LoadGlobal8(const void* p) {
  uint2 a;
  asm volatile("ld.global.v2.b32 {%0, %1}, [%2];" : "=r"(a.x), "=r"(a.y) : "l"(p));
  return a;
}
__device__ __forceinline__ uint16_t LoadGlobal2(const void* p) {
  uint16_t a;
  asm volatile("ld.global.b16 %0, [%1];" : "=h"(a) : "l"(p));
  return a;
}

// ---- Tile loads and stores: 8 consecutive elements, one vector access when allowed. ----

__device__ __forceinline__ void LoadF32(const float* p, bool vec, int cnt, float (&x)[8]) {
  if (vec) {
    const float4 a = reinterpret_cast<const float4*>(p)[0];
    const float4 b = reinterpret_cast<const float4*>(p)[1];
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
    x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (i < cnt) x[i] = p[i];
}

__device__ __forceinline__ void StoreF32(float* p, bool vec, int cnt, const float (&x)[8]) {
  if (vec) {
    StoreGlobal16(p, x[0], x[1], x[2], x[3]);  // Note [Explicit vector stores]
    StoreGlobal16(p + 4, x[4], x[5], x[6], x[7]);
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (i < cnt) p[i] = x[i];
}

__device__ __forceinline__ void LoadU16(const uint16_t* p, bool vec, int cnt, uint16_t (&x)[8]) {
  if (vec) {
    const uint4 a = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      x[2 * i] = static_cast<uint16_t>(w[i] & 0xFFFFu);
      x[2 * i + 1] = static_cast<uint16_t>(w[i] >> 16);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (i < cnt) x[i] = p[i];
}

__device__ __forceinline__ void StoreU16(uint16_t* p, bool vec, int cnt, const uint16_t (&x)[8]) {
  if (vec) {
    StoreGlobal16(p, uint32_t{x[0]} | (uint32_t{x[1]} << 16),
                  uint32_t{x[2]} | (uint32_t{x[3]} << 16), uint32_t{x[4]} | (uint32_t{x[5]} << 16),
                  uint32_t{x[6]} | (uint32_t{x[7]} << 16));
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (i < cnt) p[i] = x[i];
}

__device__ __forceinline__ void LoadU8(const uint8_t* p, bool vec, int cnt, uint8_t (&x)[8]) {
  if (vec) {
    const uint2 a = *reinterpret_cast<const uint2*>(p);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      x[i] = static_cast<uint8_t>(a.x >> (8 * i));
      x[4 + i] = static_cast<uint8_t>(a.y >> (8 * i));
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (i < cnt) x[i] = p[i];
}

__device__ __forceinline__ void StoreU8(uint8_t* p, bool vec, int cnt, const uint8_t (&x)[8]) {
  if (vec) {
    uint2 a{0u, 0u};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      a.x |= uint32_t{x[i]} << (8 * i);
      a.y |= uint32_t{x[4 + i]} << (8 * i);
    }
    StoreGlobal8(p, a.x, a.y);
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (i < cnt) p[i] = x[i];
}

// Loads 8 elements of a runtime dtype (gradients) as fp32, exactly.
__device__ __forceinline__ void LoadAsF32(const void* base, uint8_t dtype, uint64_t e, bool vec,
                                          int cnt, float (&x)[8]) {
  if (dtype == static_cast<uint8_t>(DType::kF32)) {
    LoadF32(static_cast<const float*>(base) + e, vec, cnt, x);
    return;
  }
  uint16_t h[8] = {};
  LoadU16(static_cast<const uint16_t*>(base) + e, vec, cnt, h);
  const bool bf16 = dtype == static_cast<uint8_t>(DType::kBF16);
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = bf16 ? num::Bf16ToF32(h[i]) : num::F16ToF32(h[i]);
}

// The parameter the model sees (reference_step.cc, WriteParam): the master's own bf16 for
// a bf16 parameter of a bf16-based master, else the decoded master rounded. `w` holds the
// decoded stored master (for f32 masters, the master itself), `wb` the stored bf16.
template <MasterFormat kMaster>
__device__ __forceinline__ void StoreParam(const SpanMeta& sp, uint64_t e, bool p_vec, int cnt,
                                           const float (&w)[8], const uint16_t (&wb)[8]) {
  if (sp.param_dtype == static_cast<uint8_t>(DType::kF32)) {
    StoreF32(static_cast<float*>(sp.param) + e, p_vec, cnt, w);
  } else {
    uint16_t h[8];
    const bool bf16 = sp.param_dtype == static_cast<uint8_t>(DType::kBF16);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if (kMaster != MasterFormat::kF32 && bf16)
        h[i] = wb[i];
      else
        h[i] = bf16 ? num::F32ToBf16(w[i]) : num::F32ToF16(w[i]);
    }
    StoreU16(static_cast<uint16_t*>(sp.param) + e, p_vec, cnt, h);
  }
}

// ---- The raw words of a fast tile (Note [Fast tiles] in tiles.cuh). ----
//
// Note [One round trip per tile]: a fast tile issues every load it needs (gradient,
// master, correction, both moments' codes and scales) before it decodes anything, so the
// DRAM latency of a tile is paid once. Written in decode order, with momentum a runtime
// flag, ptxas kept the first moment's loads behind the branch on that flag and after the
// second moment's decode: two serial round trips per tile. Adam and Lion always keep a
// momentum buffer (StepPlan::Launch rejects scalars that say otherwise), so for them the
// flag is a compile-time constant (HasMomentum, tiles.cuh); SGD loads its buffer under
// the flag, still up front. The loads are explicit global loads (LoadGlobal16 and kin).

// Byte i of the result is c[i].
__device__ __forceinline__ uint2 PackBytes(const uint8_t (&c)[8]) {
  uint2 a{0u, 0u};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    a.x |= uint32_t{c[i]} << (8 * i);
    a.y |= uint32_t{c[4 + i]} << (8 * i);
  }
  return a;
}

// One thread's 8 consecutive elements of one array as raw words in memory order: 8
// words for 4-byte elements, 4 for 2-byte, 2 for 1-byte. The array's base must allow
// the vector access (VecBit), so every piece is aligned.
template <int kElemBytes>
struct Raw8 {
  static_assert(kElemBytes == 1 || kElemBytes == 2 || kElemBytes == 4, "1, 2 or 4 bytes");
  uint32_t w[2 * kElemBytes];
};
template <int kElemBytes>
__device__ __forceinline__ Raw8<kElemBytes> LoadRaw8(const void* base, uint64_t e) {
  const unsigned char* p = static_cast<const unsigned char*>(base) + e * kElemBytes;
  Raw8<kElemBytes> r;
  if constexpr (kElemBytes == 1) {
    const uint2 a = LoadGlobal8(p);
    r.w[0] = a.x, r.w[1] = a.y;
  } else {
#pragma unroll
    for (int q = 0; q < kElemBytes / 2; ++q) {
      const uint4 a = LoadGlobal16(p + 16 * q);
      r.w[4 * q] = a.x, r.w[4 * q + 1] = a.y, r.w[4 * q + 2] = a.z, r.w[4 * q + 3] = a.w;
    }
  }
  return r;
}

// The 8 fp32 values of a Raw8<4>.
__device__ __forceinline__ void UnpackF32(const Raw8<4>& r, float (&x)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = num::FloatOf(r.w[i]);
}

// The scale bits of element e's quantization group (shared by the 4 lanes of a quad).
__device__ __forceinline__ uint16_t LoadScale(const uint16_t* scales, uint64_t e) {
  return LoadGlobal2(scales + e / kQuantGroup);
}

// The raw words of this thread's part of a fast tile (Note [One round trip per tile]):
// what LoadTile reads and ComputeTile decodes. kGradBytes: 4 (fp32) or 2 (bf16, fp16).
template <Kind kKind, MasterFormat kMaster, MomentFormat kMom, MomentFormat kVar, int kGradBytes>
struct TileRaw {
  static constexpr int kMasterBytes = kMaster == MasterFormat::kF32 ? 4 : 2;
  static constexpr int kEccBytes = kMaster == MasterFormat::kBF16Ecc16 ? 2 : 1;
  static constexpr int kMomBytes = kMom == MomentFormat::kQ8 ? 1 : 4;
  static constexpr int kVarBytes = kVar == MomentFormat::kQ8 ? 1 : 4;
  Raw8<kGradBytes> g;
  Raw8<kMasterBytes> w;
  Raw8<kEccBytes> ecc;                // bf16+ecc masters
  Raw8<kMomBytes> m;                  // when the span keeps momentum
  Raw8<kVarBytes> v;                  // Adam
  uint16_t m_scale = 0, v_scale = 0;  // q8
};

// Issues every load of a fast tile at element e (all lanes of a warp, Note [Fast tiles]).
template <Kind kKind, MasterFormat kMaster, MomentFormat kMom, MomentFormat kVar, int kGradBytes>
__device__ __forceinline__ TileRaw<kKind, kMaster, kMom, kVar, kGradBytes> LoadTile(
    const SpanMeta& sp, uint64_t e, bool has_m) {
  using Raw = TileRaw<kKind, kMaster, kMom, kVar, kGradBytes>;
  Raw r{};
  r.g = LoadRaw8<kGradBytes>(sp.grad, e);
  r.w = LoadRaw8<Raw::kMasterBytes>(sp.master, e);
  if constexpr (kMaster == MasterFormat::kBF16Ecc8 || kMaster == MasterFormat::kBF16Ecc16)
    r.ecc = LoadRaw8<Raw::kEccBytes>(sp.ecc, e);
  if (has_m) {
    r.m = LoadRaw8<Raw::kMomBytes>(sp.m, e);
    if constexpr (kMom == MomentFormat::kQ8) r.m_scale = LoadScale(sp.m_scales, e);
  }
  if constexpr (kKind == Kind::kAdam) {
    r.v = LoadRaw8<Raw::kVarBytes>(sp.v, e);
    if constexpr (kVar == MomentFormat::kQ8) r.v_scale = LoadScale(sp.v_scales, e);
  }
  return r;
}

}  // namespace tandem::gpu::detail
