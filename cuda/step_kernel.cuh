// Fused multi-tensor optimizer step: the kernel template and its launcher.
//
// Work mapping (docs/gpu_kernels.md). A launch walks a device table of work units; each
// covers kUnitElems consecutive elements of one span (the last unit of a span may be
// short), and a persistent grid of blocks takes them in a grid-stride loop. A unit is
// kTilesPerUnit tiles processed in turn; in a tile each thread owns kElemsPerThread = 8
// consecutive elements, so the 4 consecutive threads of a quad own one quantization
// group of 32: the q8 group maxima need two xor-shuffles inside the quad and nothing else.
//
// Note [Groups never straddle units]: kUnitElems is a multiple of kQuantGroup and every
// span starts on a group boundary (StepSpan contract), so a group lies in one quad of one
// block; tensors of any size share a launch with no cross-block dependency.
//
// Bit identity: every per-element operation is the TANDEM_HD source of engine/ (the
// update in update_math.h, the codecs in master_codec.h, conversions in fp_bits.h),
// compiled with --fmad=false, IEEE div/sqrt and no flush-to-zero
// (cmake/TandemFlags.cmake), except the q8 codecs and the ecc8 rounding, which use the
// exact shortcuts of Note [Exact fast paths] (fast_codec.cuh), and full tiles, which use
// the batched shortcuts and tile transcriptions of the update of Note [Batched
// fallbacks] (Note [Fast tiles] below). The group maximum is exact in any order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/fast_codec.cuh"
#include "cuda/gpu_step.h"
#include "engine/fp_bits.h"
#include "engine/master_codec.h"
#include "engine/q8_codec.h"
#include "engine/update_math.h"

namespace tandem::gpu::detail {

inline constexpr int kElemsPerThread = 8;
inline constexpr int kThreadsPerGroup = kQuantGroup / kElemsPerThread;
// Block shape (Note [Block shape]): 512 threads, 2 resident blocks per SM (the register
// allocation must allow 2 x 512 threads: <= 64 registers), 8 tiles per unit.
// -DTANDEM_GPU_BLOCK_THREADS, -DTANDEM_GPU_MIN_BLOCKS and -DTANDEM_GPU_TILES_PER_UNIT change
// them, for measuring (scripts/gpu-ab.sh); results do not depend on them.
#ifndef TANDEM_GPU_BLOCK_THREADS
#define TANDEM_GPU_BLOCK_THREADS 512
#endif
#ifndef TANDEM_GPU_MIN_BLOCKS
#define TANDEM_GPU_MIN_BLOCKS 2
#endif
#ifndef TANDEM_GPU_TILES_PER_UNIT
#define TANDEM_GPU_TILES_PER_UNIT 8
#endif
inline constexpr int kBlockThreads = TANDEM_GPU_BLOCK_THREADS;
inline constexpr int kTilesPerUnit = TANDEM_GPU_TILES_PER_UNIT;
inline constexpr int kTileElems = kBlockThreads * kElemsPerThread;  // 4096
inline constexpr int kUnitElems = kTileElems * kTilesPerUnit;       // 32768
// Note [Block shape]: a unit is kTilesPerUnit tiles of kBlockThreads * kElemsPerThread
// elements; the per-unit costs (loop, metadata prefetch, the block barrier) are shared by
// 8 tiles. Measured on the H200 (flat 2^30, % of copy, AdamW ecc8/q8/q8 | Lion | SGD; each
// line one host, A/B in one call):
//  * 256 threads x 4 blocks: 2 / 4 / 8 / 16 tiles per unit 64.9 | 79.6 | 76.7, 65.8 |
//    81.0 | 78.0, 66.3 | 80.9 | 78.5, 66.4 | 80.5 | 77.8 (bulk L2 prefetch then).
//  * 8 tiles: 128 threads x 8 blocks 63.2 | 86.7 | 80.2; 256 x 4 67.5 | 88.0 | 81.7; 512 x 2
//    68.5 | 89.8 | 84.5; 1024 x 1 68.2 | 92.3 | 87.6 (512 x 2 with 16 tiles 68.9 | 90.1 |
//    85.0, with 4 tiles 67.7 | 88.3 | 82.8). Larger blocks win although the barrier then
//    waits for more warps; 512 is best for AdamW (and its ecc16 variant: 71.1 against
//    69.8 at 1024), the kernel that is furthest from its target.
//  * Registers: 64 at any of these shapes. Forcing 48 (5 x 256) spills 136-200 bytes per
//    thread and loses 2-11 points; allowing ~78 (3 x 256, no spill) loses 5-9: the
//    kernels want warps in flight. 2026-11-24, loads up front: 320 x 2 (20 warps, 94
//    registers) 65.7 against 77.6 for AdamW ecc8/q8/q8, and a register pipeline that
//    loads the next tile's words before computing the current one (+16 registers) gets
//    back only 6 of those 12 points at that shape (docs/gpu_kernels.md).
//  * 2026-11-24, whole fast units: 16 tiles per unit measured 80.3 against 79.3 on one
//    host and 81.0 against 81.9 on another (3 rounds each, AdamW ecc8/q8/q8); 8 stays.
inline constexpr int kMinBlocksPerSm = TANDEM_GPU_MIN_BLOCKS;
// Note [L2 prefetch] on (1) or off (0), for measuring it: -DTANDEM_GPU_L2_PREFETCH=0 in
// CMAKE_CUDA_FLAGS; _ADAM=1 turns it on for every Adam kernel too (by default only the
// bf16+ecc16 ones prefetch: see the Note). Results are the same either way.
#ifndef TANDEM_GPU_L2_PREFETCH
#define TANDEM_GPU_L2_PREFETCH 1
#endif
#ifndef TANDEM_GPU_L2_PREFETCH_ADAM
#define TANDEM_GPU_L2_PREFETCH_ADAM 0
#endif
// Note [Whole fast units] on (1) or off (0), for measuring; results are the same either way.
#ifndef TANDEM_GPU_FAST_UNIT
#define TANDEM_GPU_FAST_UNIT 1
#endif
static_assert(kQuantGroup == 32, "Note [Group size]: the quad mapping assumes 32");
static_assert(kBlockThreads % 32 == 0 && kBlockThreads <= 1024, "whole warps, one block");
static_assert(kThreadsPerGroup == 4, "the shuffles below reduce over 4 lanes");
static_assert(kUnitElems % kQuantGroup == 0, "Note [Groups never straddle units]");

// Which algorithm family a kernel instance runs; Adam covers AdamW and Adam (L2), which
// update_math.h tells apart by StepScalars::algo.
enum class Kind : int { kAdam = 0, kLion = 1, kSgd = 2 };

// Whether an instance keeps a moment in q8 (and so builds the decode tables): the kernels
// that Note [L2 prefetch] and Note [Whole fast units] apply to.
template <Kind kKind, MomentFormat kMom, MomentFormat kVar>
inline constexpr bool kQ8Kernel =
    kMom == MomentFormat::kQ8 || (kKind == Kind::kAdam && kVar == MomentFormat::kQ8);

// Bits of SpanMeta::vec_ok: the array's base is aligned for this kernel's vector access
// (16 bytes, 8 for 1-byte arrays), so every full 8-element tile is loaded in one piece.
enum VecBit : uint32_t {
  kVecGrad = 1u << 0,
  kVecParam = 1u << 1,
  kVecMaster = 1u << 2,   // master.f32 or master.bf16
  kVecEcc = 1u << 3,      // master.ecc8 or master.ecc16
  kVecM = 1u << 4,        // m.f32 or m.codes
  kVecV = 1u << 5,        // v.f32 or v.codes
};

// One span in the device table (built once per StepPlan).
struct SpanMeta {
  const void* grad;
  void* param;   // null when absent or when it aliases master.bf16
  void* master;  // float* (f32) or uint16_t* (bf16 bits)
  void* ecc;     // int8_t* or int16_t*
  void* m;       // float* or codes
  uint16_t* m_scales;
  void* v;
  uint16_t* v_scales;
  uint64_t n;
  uint32_t scalar_index;  // into LaunchArgs::scalars; kSkipSpanIndex: not stepped now
  uint32_t vec_ok;      // VecBit mask
  uint8_t grad_dtype;   // DType
  uint8_t param_dtype;  // DType
  uint8_t pad[6];
};
static_assert(sizeof(SpanMeta) == 88, "the kernel copies SpanMeta as 11 words");

// SpanMeta::scalar_index of a span left out of the launch (StepPlan::kSkipSpan).
inline constexpr uint32_t kSkipSpanIndex = 0xFFFFFFFFu;

struct alignas(8) WorkUnit {  // 8-byte aligned: copied with cp.async
  uint32_t span;
  uint32_t chunk;  // elements [chunk * kUnitElems, ...) of the span
};

// Kernel parameters: a few pointers and the per-group scalars by value (about 2 KB).
// kMaxScalarGroups (gpu_step.h) must match the array below.
struct LaunchArgs {
  const SpanMeta* spans;
  const WorkUnit* units;
  uint32_t num_units;
  StepScalars scalars[kMaxScalarGroups];
};
static_assert(sizeof(LaunchArgs) < 4096, "kernel parameters must stay small");

// ---- Vector stores. ----
//
// Note [Explicit vector stores]: a store of a uint4 / float4 / uint2 value should be one
// PTX vector store, but NVVM splits some of them into 4-byte stores with no alignment
// known (at 6ad3212: the fp32 m and v stores of the fp32-state AdamW as 8 x ST.E per
// thread each, the bf16 master of the ecc8 kernels as 4 x ST.E). Each split store is a
// separate request whose 32 lanes write a quarter of each sector they touch, so the
// stores cost 4x the LSU requests and L2 partial-sector writes: the fp32-state AdamW fell
// from 90% to 56% of copy. These helpers emit the vector store itself. The kernel's
// arrays are device pointers (StepSpan), i.e. global memory, whose generic address is
// the global address (as CUDA's own __stwb assumes). `p` must be aligned to the size.
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

// Largest of the 4 quad partial maxima. Partials are >= +0 and never NaN (the
// reference's `a > amax ? a : amax` never lets NaN in), so the result equals the
// reference's sequential maximum over the group.
__device__ __forceinline__ float QuadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, 1));  // no NaN, no -0: same as the select
  return fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, 2));
}

// ---- The kernel. ----

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

// Any tile: this thread's 8 elements starting at e, fewer at the end of the span, each
// array with the vector access where its alignment allows. All lanes of the warp call it
// together (the quad shuffles).
template <Kind kKind, MasterFormat kMaster, MomentFormat kMom, MomentFormat kVar>
__device__ __forceinline__ void GenericTile(const StepScalars& s, const SpanMeta& sp,
                                            const uint64_t e, const DecodeTables& tables) {
  constexpr bool kAdam = kKind == Kind::kAdam;
  const uint64_t n = sp.n;
  const int cnt = e < n ? (n - e < 8 ? static_cast<int>(n - e) : 8) : 0;
  const bool full = cnt == 8;
  const uint32_t vec = full ? sp.vec_ok : 0u;
  const bool has_m = s.has_momentum != 0;
  const uint64_t group = e / kQuantGroup;
  const bool group_leader = threadIdx.x % kThreadsPerGroup == 0 && cnt > 0;

  // 1. Gradient, as fp32.
  float g[8] = {};
  if (cnt > 0) LoadAsF32(sp.grad, sp.grad_dtype, e, vec & kVecGrad, cnt, g);

  // 2. Decode the master weight (reference_step.cc, DecodeMaster).
  float w[8] = {};
  [[maybe_unused]] uint16_t wb[8] = {};
  if (cnt > 0) {
    if constexpr (kMaster == MasterFormat::kF32) {
      LoadF32(static_cast<float*>(sp.master) + e, vec & kVecMaster, cnt, w);
    } else {
      LoadU16(static_cast<uint16_t*>(sp.master) + e, vec & kVecMaster, cnt, wb);
      if constexpr (kMaster == MasterFormat::kBF16) {
#pragma unroll
        for (int i = 0; i < 8; ++i) w[i] = num::Bf16ToF32(wb[i]);
      } else if constexpr (kMaster == MasterFormat::kBF16Ecc8) {
        uint8_t c[8] = {};
        LoadU8(static_cast<uint8_t*>(sp.ecc) + e, vec & kVecEcc, cnt, c);
#pragma unroll
        for (int i = 0; i < 8; ++i) w[i] = num::DecodeEcc8(wb[i], static_cast<int8_t>(c[i]));
      } else {
        uint16_t c[8] = {};
        LoadU16(static_cast<uint16_t*>(sp.ecc) + e, vec & kVecEcc, cnt, c);
#pragma unroll
        for (int i = 0; i < 8; ++i) w[i] = num::DecodeEcc16(wb[i], static_cast<int16_t>(c[i]));
      }
    }
  }

  // 3. Decode the first moment (q8: codes * group scale, q8_codec.h).
  float m[8] = {};
  if (has_m && cnt > 0) {
    if constexpr (kMom == MomentFormat::kF32) {
      LoadF32(static_cast<float*>(sp.m) + e, vec & kVecM, cnt, m);
    } else {
      uint8_t c[8] = {};
      LoadU8(static_cast<uint8_t*>(sp.m) + e, vec & kVecM, cnt, c);
      const float scale = num::Bf16ToF32(sp.m_scales[group]);
#pragma unroll
      for (int i = 0; i < 8; ++i) m[i] = tables.momentum[c[i]] * scale;  // DecodeMomentum
    }
  }

  // 4. Decode the second moment (q8 stores u = sqrt(v); v = u * u).
  [[maybe_unused]] float v[8] = {};
  [[maybe_unused]] float u[8] = {};
  if constexpr (kAdam) {
    if (cnt > 0) {
      if constexpr (kVar == MomentFormat::kF32) {
        LoadF32(static_cast<float*>(sp.v) + e, vec & kVecV, cnt, v);
      } else {
        uint8_t c[8] = {};
        LoadU8(static_cast<uint8_t*>(sp.v) + e, vec & kVecV, cnt, c);
        const float scale = num::Bf16ToF32(sp.v_scales[group]);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          u[i] = tables.variance[c[i]] * scale;  // DecodeSqrtVariance
          v[i] = u[i] * u[i];
        }
      }
    }
  }

  // 5. The update, element by element (update_math.h). Slots past the end of the span
  // hold zeros; they are updated harmlessly and never stored or counted in a maximum.
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if constexpr (kKind == Kind::kAdam) {
      // Two copies of the call so that the compiler folds s.algo in each.
      if (s.algo == Algorithm::kAdamW)
        num::AdamElement(s, g[i], w[i], m[i], v[i], &u[i]);
      else
        num::AdamElement(s, g[i], w[i], m[i], v[i], &u[i]);
    } else if constexpr (kKind == Kind::kLion) {
      num::LionElement(s, g[i], w[i], m[i]);
    } else {
      num::SgdElement(s, g[i], w[i], m[i]);
    }
  }

  // 6. Encode the master weight (the parameter step decodes it again if it needs to).
  [[maybe_unused]] uint8_t e8[8];
  [[maybe_unused]] uint16_t e16[8];
  if (cnt > 0) {
    if constexpr (kMaster == MasterFormat::kF32) {
      StoreF32(static_cast<float*>(sp.master) + e, vec & kVecMaster, cnt, w);
    } else if constexpr (kMaster == MasterFormat::kBF16) {
#pragma unroll
      for (int i = 0; i < 8; ++i) wb[i] = num::F32ToBf16(w[i]);
      StoreU16(static_cast<uint16_t*>(sp.master) + e, vec & kVecMaster, cnt, wb);
    } else if constexpr (kMaster == MasterFormat::kBF16Ecc8) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        int8_t ecc;
        EncodeEcc8Fast(w[i], &wb[i], &ecc);  // num::EncodeEcc8
        e8[i] = static_cast<uint8_t>(ecc);
      }
      StoreU16(static_cast<uint16_t*>(sp.master) + e, vec & kVecMaster, cnt, wb);
      StoreU8(static_cast<uint8_t*>(sp.ecc) + e, vec & kVecEcc, cnt, e8);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        int16_t ecc;
        num::EncodeEcc16(w[i], &wb[i], &ecc);
        e16[i] = static_cast<uint16_t>(ecc);
      }
      StoreU16(static_cast<uint16_t*>(sp.master) + e, vec & kVecMaster, cnt, wb);
      StoreU16(static_cast<uint16_t*>(sp.ecc) + e, vec & kVecEcc, cnt, e16);
    }
  }

  // 7. Encode the first moment. q8: scale from the group maximum of |m| (all 4 quad
  // lanes take part in the shuffles, also those past the end of the span).
  if (has_m) {
    if constexpr (kMom == MomentFormat::kF32) {
      if (cnt > 0) StoreF32(static_cast<float*>(sp.m) + e, vec & kVecM, cnt, m);
    } else {
      float amax = 0.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float a = fabsf(m[i]);
        if (i < cnt) amax = a > amax ? a : amax;
      }
      amax = QuadMax(amax);
      const uint16_t sb = num::GroupScaleBits(amax);
      const float inv = 1.0f / num::Bf16ToF32(sb);
      uint8_t c[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) c[i] = EncodeMomentumFast(m[i], inv);
      if (cnt > 0) StoreU8(static_cast<uint8_t*>(sp.m) + e, vec & kVecM, cnt, c);
      if (group_leader) sp.m_scales[group] = sb;
    }
  }

  // 8. Encode the second moment (q8: u = sqrt(v) against the group maximum of u).
  if constexpr (kAdam) {
    if constexpr (kVar == MomentFormat::kF32) {
      if (cnt > 0) StoreF32(static_cast<float*>(sp.v) + e, vec & kVecV, cnt, v);
    } else {
      float amax = 0.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i)
        if (i < cnt) amax = u[i] > amax ? u[i] : amax;
      amax = QuadMax(amax);
      const uint16_t sb = num::GroupScaleBits(amax);
      const float inv = 1.0f / num::Bf16ToF32(sb);
      uint8_t c[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) c[i] = EncodeSqrtVarianceFast(u[i], inv);
      if (cnt > 0) StoreU8(static_cast<uint8_t*>(sp.v) + e, vec & kVecV, cnt, c);
      if (group_leader) sp.v_scales[group] = sb;
    }
  }

  // 9. The parameter the model sees: the decoded stored master (DecodeMaster).
  if (sp.param != nullptr && cnt > 0) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if constexpr (kMaster == MasterFormat::kBF16) w[i] = num::Bf16ToF32(wb[i]);
      if constexpr (kMaster == MasterFormat::kBF16Ecc8)
        w[i] = num::DecodeEcc8(wb[i], static_cast<int8_t>(e8[i]));
      if constexpr (kMaster == MasterFormat::kBF16Ecc16)
        w[i] = num::DecodeEcc16(wb[i], static_cast<int16_t>(e16[i]));
    }
    StoreParam<kMaster>(sp, e, (vec & kVecParam) != 0, cnt, w, wb);
  }
}

// ---- Full tiles. ----
//
// Note [Fast tiles]: where all 32 lanes of a warp hold 8 elements of the span (so the
// choice is uniform in the warp, as the quad shuffles need) and every array the tile
// touches allows the vector access, FastTile runs instead of GenericTile: the gradient
// dtype is a template parameter, the arrays move as whole words, and the codecs are the
// packed shortcuts of Note [Batched fallbacks] (fast_codec.cuh). Same bits as
// GenericTile, which the parity tests check on both paths (odd sizes and misaligned
// tensors take GenericTile for part or all of their tiles).

// The vector-access bits (VecBit) a fast tile needs.
template <Kind kKind, MasterFormat kMaster>
__device__ __forceinline__ uint32_t FastVecMask(bool has_m) {
  uint32_t need = kVecGrad | kVecMaster;
  if (kMaster == MasterFormat::kBF16Ecc8 || kMaster == MasterFormat::kBF16Ecc16) need |= kVecEcc;
  if (has_m) need |= kVecM;
  if (kKind == Kind::kAdam) need |= kVecV;
  return need;
}

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

// Note [One round trip per tile]: a fast tile issues every load it needs (gradient,
// master, correction, both moments' codes and scales) before it decodes anything, so the
// DRAM latency of a tile is paid once. Written in decode order, the second moment's
// table lookups came before the first moment's loads, and since whether momentum exists
// was a runtime flag, ptxas kept those loads behind the branch on it: every Adam tile
// waited for its v codes, then issued the m loads and waited again (two serial round
// trips, visible in the SASS at 22e286e). Adam and Lion always keep a momentum buffer
// (StepPlan::Launch rejects scalars that say otherwise), so for them the flag is a
// compile-time constant; SGD loads its buffer under the flag, still up front. The loads
// are explicit global loads (ld.global; generic loads were emitted before).

// The cache operator of the tile loads, for measuring: 0 (default) plain ld.global, 1
// ld.global.cg, 2 ld.global.cs (evict first). Results are the same either way. Measured
// (H200, flat 2^30, one A/B call, % of copy, 0 | 1): AdamW ecc8/q8/q8 76.0 | 76.3, fp32
// AdamW 88.9 | 87.5, Lion 89.7 | 89.5: the same but for fp32, which plain loads suit.
#ifndef TANDEM_GPU_LOAD_MODE
#define TANDEM_GPU_LOAD_MODE 0
#endif
#if TANDEM_GPU_LOAD_MODE == 0
#define TANDEM_GPU_LD "ld.global"
#elif TANDEM_GPU_LOAD_MODE == 1
#define TANDEM_GPU_LD "ld.global.cg"
#else
#define TANDEM_GPU_LD "ld.global.cs"
#endif
// Global loads of 16, 8 and 2 bytes; `p` aligned to the size. volatile: they stay in
// program order with the explicit stores (Note [Explicit vector stores]).
__device__ __forceinline__ uint4 LoadGlobal16(const void* p) {
  uint4 a;
  asm volatile(TANDEM_GPU_LD ".v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(a.x), "=r"(a.y), "=r"(a.z), "=r"(a.w)
               : "l"(p));
  return a;
}
__device__ __forceinline__ uint2 LoadGlobal8(const void* p) {
  uint2 a;
  asm volatile(TANDEM_GPU_LD ".v2.b32 {%0, %1}, [%2];" : "=r"(a.x), "=r"(a.y) : "l"(p));
  return a;
}
__device__ __forceinline__ uint16_t LoadGlobal2(const void* p) {
  uint16_t a;
  asm volatile(TANDEM_GPU_LD ".b16 %0, [%1];" : "=h"(a) : "l"(p));
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
  Raw8<kEccBytes> ecc;  // bf16+ecc masters
  Raw8<kMomBytes> m;    // when the span keeps momentum
  Raw8<kVarBytes> v;    // Adam
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

// Only SGD may run without a momentum buffer: StepPlan::Launch rejects Adam or Lion
// scalars with has_momentum == 0, so for them the flag is a compile-time constant (Note
// [One round trip per tile]).
template <Kind kKind>
__device__ __forceinline__ bool HasMomentum(const StepScalars& s) {
  return kKind != Kind::kSgd || s.has_momentum != 0;
}

// The update of a fast tile from its raw words (LoadTile), stores included. kGrad: the
// gradient dtype, whose size the raw words match.
template <Kind kKind, MasterFormat kMaster, MomentFormat kMom, MomentFormat kVar, DType kGrad>
__device__ __forceinline__ void ComputeTile(
    const StepScalars& s, const SpanMeta& sp, const uint64_t e,
    const TileRaw<kKind, kMaster, kMom, kVar, kGrad == DType::kF32 ? 4 : 2>& raw,
    const DecodeTables& tables) {
  constexpr bool kAdam = kKind == Kind::kAdam;
  constexpr bool kBf16Based = kMaster != MasterFormat::kF32;
  const bool has_m = HasMomentum<kKind>(s);
  const uint64_t group = e / kQuantGroup;
  const bool group_leader = threadIdx.x % kThreadsPerGroup == 0;

  // 1. Gradient, as fp32 (exact).
  float g[8];
  if constexpr (kGrad == DType::kF32) {
    UnpackF32(raw.g, g);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (kGrad == DType::kBF16) {
        g[2 * j] = num::FloatOf(raw.g.w[j] << 16);
        g[2 * j + 1] = num::FloatOf(raw.g.w[j] & 0xFFFF0000u);
      } else {
        g[2 * j] = num::F16ToF32(static_cast<uint16_t>(raw.g.w[j] & 0xFFFFu));
        g[2 * j + 1] = num::F16ToF32(static_cast<uint16_t>(raw.g.w[j] >> 16));
      }
    }
  }

  // 2. Decode the master weight (DecodeMaster). wp: the bf16 pairs, ep: the corrections.
  float w[8];
  [[maybe_unused]] uint32_t wp[4];
  [[maybe_unused]] uint32_t ep[4];  // ecc8: ep[0..1]; ecc16: pairs
  if constexpr (kMaster == MasterFormat::kF32) {
    UnpackF32(raw.w, w);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) wp[j] = raw.w.w[j];
    if constexpr (kMaster == MasterFormat::kBF16) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        w[2 * j] = num::FloatOf(wp[j] << 16);
        w[2 * j + 1] = num::FloatOf(wp[j] & 0xFFFF0000u);
      }
    } else if constexpr (kMaster == MasterFormat::kBF16Ecc8) {
      ep[0] = raw.ecc.w[0], ep[1] = raw.ecc.w[1];
      w[0] = DecodeEcc8Packed<0>(wp[0], ep[0]);
      w[1] = DecodeEcc8Packed<1>(wp[0], ep[0]);
      w[2] = DecodeEcc8Packed<2>(wp[1], ep[0]);
      w[3] = DecodeEcc8Packed<3>(wp[1], ep[0]);
      w[4] = DecodeEcc8Packed<4>(wp[2], ep[1]);
      w[5] = DecodeEcc8Packed<5>(wp[2], ep[1]);
      w[6] = DecodeEcc8Packed<6>(wp[3], ep[1]);
      w[7] = DecodeEcc8Packed<7>(wp[3], ep[1]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        ep[j] = raw.ecc.w[j];
        w[2 * j] = num::DecodeEcc16(static_cast<uint16_t>(wp[j] & 0xFFFFu),
                                    static_cast<int16_t>(ep[j] & 0xFFFFu));
        w[2 * j + 1] =
            num::DecodeEcc16(static_cast<uint16_t>(wp[j] >> 16), static_cast<int16_t>(ep[j] >> 16));
      }
    }
  }

  // 3. Decode the first moment (q8: table value * group scale, DecodeMomentum).
  float m[8] = {};
  if (has_m) {
    if constexpr (kMom == MomentFormat::kF32) {
      UnpackF32(raw.m, m);
    } else {
      const float scale = num::Bf16ToF32(raw.m_scale);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        m[i] = tables.momentum[(raw.m.w[i / 4] >> (8 * (i % 4))) & 0xFFu] * scale;
    }
  }

  // 4. Decode the second moment (q8 stores u = sqrt(v); v = u * u).
  [[maybe_unused]] float v[8] = {};
  [[maybe_unused]] float u[8] = {};
  if constexpr (kAdam) {
    if constexpr (kVar == MomentFormat::kF32) {
      UnpackF32(raw.v, v);
    } else {
      const float scale = num::Bf16ToF32(raw.v_scale);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        u[i] = tables.variance[(raw.v.w[i / 4] >> (8 * (i % 4))) & 0xFFu] * scale;
        v[i] = u[i] * u[i];
      }
    }
  }

  // 5. The update (update_math.h, or its tile transcriptions in fast_codec.cuh); the
  // tests of uniform flags sit outside the element loop. u_pos: every u > 0 (AdamTile).
  [[maybe_unused]] bool u_pos = false;
  if constexpr (kKind == Kind::kAdam) {
    if (s.algo == Algorithm::kAdamW)
      u_pos = AdamTile<true>(s, g, w, m, v, u);
    else
      u_pos = AdamTile<false>(s, g, w, m, v, u);
  } else if constexpr (kKind == Kind::kLion) {
    LionTile(s, g, w, m);
  } else if (s.nesterov) {  // folded into each copy, as the Adam test above
#pragma unroll
    for (int i = 0; i < 8; ++i) num::SgdElement(s, g[i], w[i], m[i]);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) num::SgdElement(s, g[i], w[i], m[i]);
  }

  // 6. Encode the master weight.
  if constexpr (kMaster == MasterFormat::kF32) {
    StoreF32(static_cast<float*>(sp.master) + e, true, 8, w);
  } else if constexpr (kMaster == MasterFormat::kBF16) {
    bool ok = true;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      wp[j] = PackBf16x2(w[2 * j], w[2 * j + 1]);
      ok &= !(w[2 * j] != w[2 * j]) && !(w[2 * j + 1] != w[2 * j + 1]);
    }
    if (!ok) {  // a NaN: num::F32ToBf16's 0x7FC0 (Note [Batched fallbacks])
#pragma unroll
      for (int j = 0; j < 4; ++j)
        wp[j] = uint32_t{num::F32ToBf16(w[2 * j])} | (uint32_t{num::F32ToBf16(w[2 * j + 1])} << 16);
    }
    StoreGlobal16(static_cast<uint16_t*>(sp.master) + e, wp[0], wp[1], wp[2], wp[3]);
  } else if constexpr (kMaster == MasterFormat::kBF16Ecc8) {
    bool ok = true;
    uint32_t e8[2];
    EncodeEcc8Tile(w, wp, e8, ok);
    ep[0] = e8[0], ep[1] = e8[1];
    if (!ok) {  // a NaN: the per-element encoder
      uint8_t c[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        uint16_t b;
        int8_t q;
        EncodeEcc8Fast(w[i], &b, &q);
        c[i] = static_cast<uint8_t>(q);
        if (i % 2 == 0)
          wp[i / 2] = b;
        else
          wp[i / 2] |= uint32_t{b} << 16;
      }
      const uint2 a = PackBytes(c);
      ep[0] = a.x, ep[1] = a.y;
    }
    StoreGlobal16(static_cast<uint16_t*>(sp.master) + e, wp[0], wp[1], wp[2], wp[3]);
    StoreGlobal8(static_cast<uint8_t*>(sp.ecc) + e, ep[0], ep[1]);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint16_t b0, b1;
      int16_t q0, q1;
      num::EncodeEcc16(w[2 * j], &b0, &q0);
      num::EncodeEcc16(w[2 * j + 1], &b1, &q1);
      wp[j] = uint32_t{b0} | (uint32_t{b1} << 16);
      ep[j] = uint32_t{static_cast<uint16_t>(q0)} | (uint32_t{static_cast<uint16_t>(q1)} << 16);
    }
    StoreGlobal16(static_cast<uint16_t*>(sp.master) + e, wp[0], wp[1], wp[2], wp[3]);
    StoreGlobal16(static_cast<uint16_t*>(sp.ecc) + e, ep[0], ep[1], ep[2], ep[3]);
  }

  // 7. Encode the first moment (q8: scale from the group maximum of |m|).
  if (has_m) {
    if constexpr (kMom == MomentFormat::kF32) {
      StoreF32(static_cast<float*>(sp.m) + e, true, 8, m);
    } else {
      float amax = 0.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(m[i]));  // no NaN, +0 start
      amax = QuadMax(amax);
      const uint16_t sb = GroupScaleBitsFast(amax);
      const float inv = 1.0f / num::Bf16ToF32(sb);
      uint32_t cw[2];
      bool ok = true;
      EncodeMomentumTile(m, inv, cw, ok);
      if (!ok) {
        uint8_t c[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) c[i] = EncodeMomentumFast(m[i], inv);
        const uint2 a = PackBytes(c);
        cw[0] = a.x, cw[1] = a.y;
      }
      StoreGlobal8(static_cast<uint8_t*>(sp.m) + e, cw[0], cw[1]);
      if (group_leader) sp.m_scales[group] = sb;
    }
  }

  // 8. Encode the second moment (q8: u = sqrt(v) against the group maximum of u).
  if constexpr (kAdam) {
    if constexpr (kVar == MomentFormat::kF32) {
      StoreF32(static_cast<float*>(sp.v) + e, true, 8, v);
    } else {
      float local = 0.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) local = fmaxf(local, fabsf(u[i]));  // u >= +0 unless NaN
      const float amax = QuadMax(local);
      const uint16_t sb = GroupScaleBitsFast(amax);
      const float inv = 1.0f / num::Bf16ToF32(sb);
      uint32_t cw[2];
      bool ok = true;
      if (u_pos)
        EncodeSqrtVarianceTilePositive(u, local, inv, cw, ok);
      else
        EncodeSqrtVarianceTile(u, inv, cw, ok);
      if (!ok) {
        uint8_t c[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) c[i] = EncodeSqrtVarianceFast(u[i], inv);
        const uint2 a = PackBytes(c);
        cw[0] = a.x, cw[1] = a.y;
      }
      StoreGlobal8(static_cast<uint8_t*>(sp.v) + e, cw[0], cw[1]);
      if (group_leader) sp.v_scales[group] = sb;
    }
  }

  // 9. The parameter the model sees: the decoded stored master (DecodeMaster).
  if (sp.param != nullptr) {
    uint16_t wb[8] = {};
    if constexpr (kBf16Based) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        wb[2 * j] = static_cast<uint16_t>(wp[j] & 0xFFFFu);
        wb[2 * j + 1] = static_cast<uint16_t>(wp[j] >> 16);
      }
    }
    if constexpr (kMaster == MasterFormat::kBF16) {
#pragma unroll
      for (int i = 0; i < 8; ++i) w[i] = num::Bf16ToF32(wb[i]);
    } else if constexpr (kMaster == MasterFormat::kBF16Ecc8) {
      w[0] = DecodeEcc8Packed<0>(wp[0], ep[0]);
      w[1] = DecodeEcc8Packed<1>(wp[0], ep[0]);
      w[2] = DecodeEcc8Packed<2>(wp[1], ep[0]);
      w[3] = DecodeEcc8Packed<3>(wp[1], ep[0]);
      w[4] = DecodeEcc8Packed<4>(wp[2], ep[1]);
      w[5] = DecodeEcc8Packed<5>(wp[2], ep[1]);
      w[6] = DecodeEcc8Packed<6>(wp[3], ep[1]);
      w[7] = DecodeEcc8Packed<7>(wp[3], ep[1]);
    } else if constexpr (kMaster == MasterFormat::kBF16Ecc16) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        w[2 * j] = num::DecodeEcc16(wb[2 * j], static_cast<int16_t>(ep[j] & 0xFFFFu));
        w[2 * j + 1] = num::DecodeEcc16(wb[2 * j + 1], static_cast<int16_t>(ep[j] >> 16));
      }
    }
    StoreParam<kMaster>(sp, e, (sp.vec_ok & kVecParam) != 0, 8, w, wb);
  }
}

// A fast tile: every load (LoadTile), then the update (ComputeTile).
template <Kind kKind, MasterFormat kMaster, MomentFormat kMom, MomentFormat kVar, DType kGrad>
__device__ __forceinline__ void FastTile(const StepScalars& s, const SpanMeta& sp, const uint64_t e,
                                         const DecodeTables& tables) {
  constexpr int kGradBytes = kGrad == DType::kF32 ? 4 : 2;
  ComputeTile<kKind, kMaster, kMom, kVar, kGrad>(
      s, sp, e, LoadTile<kKind, kMaster, kMom, kVar, kGradBytes>(sp, e, HasMomentum<kKind>(s)),
      tables);
}

// ---- Asynchronous copies global -> shared (cp.async, sm_80+): no registers held while
// the load is in flight. ----
__device__ __forceinline__ void CopyAsync8(void* shared_dst, const void* global_src) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(dst), "l"(global_src) : "memory");
}
__device__ __forceinline__ void CopyAsyncWaitAll() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// Whether this warp's part of the tile at `base` of span `sp` takes FastTile (Note [Fast
// tiles]): uniform in the warp.
template <Kind kKind, MasterFormat kMaster>
__device__ __forceinline__ bool FastOk(const SpanMeta& sp, bool has_m, uint64_t base) {
  const uint32_t need = FastVecMask<kKind, kMaster>(has_m);
  const uint64_t warp_end = base + (threadIdx.x / 32 + 1) * (32 * kElemsPerThread);
  const uint8_t gd = sp.grad_dtype;
  return warp_end <= sp.n && (sp.vec_ok & need) == need &&
         (gd == static_cast<uint8_t>(DType::kBF16) || gd == static_cast<uint8_t>(DType::kF32) ||
          gd == static_cast<uint8_t>(DType::kF16));
}

// ---- L2 prefetch (Note [L2 prefetch]). ----
//
// Note [L2 prefetch]: in the q8 kernels a warp spends 50-90 instructions per element
// between its loads and its stores, so the DRAM latency of every tile start is exposed
// and only the warps that are waiting keep bytes in flight. Before each tile, each thread
// therefore asks L2 for the lines of its 8 elements of the block's next tile
// (prefetch.global.L2, one instruction per array, merged across the warp, no registers
// held): the DRAM traffic runs one tile ahead and the tile's own loads hit L2. The
// lookahead is one tile (4096 elements per block, ~13 MB over a full H200 grid for
// ecc8/q8/q8), well below L2's 50 MB, so prefetched lines are not evicted before use.
// The fp32-state kernels (28 B/elem, already at ~90% of copy) do not prefetch: their
// one-tile footprint would be twice that and their loads are not behind long compute.
// Measured (H200, flat 2^30, % of copy, 8 tiles per unit, one machine): Lion q8 without
// 73.0, with the per-thread prefetch 86.2; SGD q8 72.3 -> 81.4. A first version in which
// warp 1 issued one cp.async.bulk.prefetch per array (ptxas loops over the 7 distinct
// addresses) reached 80.9 / 78.5: warp 1 fell behind and the unit's barrier waited for
// it. The Adam q8 kernels lose 1.6 points with the per-thread prefetch (69.5 -> 67.9) and
// 2.5 with the bulk one: their tiles are long enough that the other warps' loads already
// overlap a warp's compute, and they are closer to issue-bound, so they do not prefetch
// (TANDEM_GPU_L2_PREFETCH_ADAM=1 turns it on, for measuring), except with the bf16+ecc16
// master: after the instruction cuts of 05afa00 that kernel gains 4 points with it
// (73.6 -> 77.5, one A/B run at c07b12c), while bf16+ecc8 still loses 1.8 (71.9 -> 70.1).
// On 2026-11-24 (the loads up front, Note [One round trip per tile], and whole fast units):
// turned on for AdamW ecc8/q8/q8 it measured 74.4 against 76.3, then 79.8 against 79.3 and
// 80.5 against 81.8 on two other hosts (flat 2^30, % of copy): still off for it.
// A hint only: results do not depend on it.

// Asks L2 for the lines of this thread's 8 elements of the tile at `lo` of span `sp`, one
// prefetch.global.L2 per array (merged across the warp); only elements inside the span
// are named.
__device__ __forceinline__ void PrefetchLine(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
template <Kind kKind, MasterFormat kMaster, MomentFormat kMom, MomentFormat kVar>
__device__ __forceinline__ void PrefetchThread(const LaunchArgs& args, const SpanMeta& sp,
                                               uint64_t lo) {
  const uint64_t e = lo + threadIdx.x * kElemsPerThread;
  if (e >= sp.n || sp.scalar_index == kSkipSpanIndex) return;
  constexpr bool kAdam = kKind == Kind::kAdam;
  const bool has_m = args.scalars[sp.scalar_index].has_momentum != 0;
  const unsigned gsize = sp.grad_dtype == static_cast<uint8_t>(DType::kF32) ? 4 : 2;
  PrefetchLine(static_cast<const unsigned char*>(sp.grad) + e * gsize);
  PrefetchLine(static_cast<const unsigned char*>(sp.master) +
               e * (kMaster == MasterFormat::kF32 ? 4 : 2));
  if constexpr (kMaster == MasterFormat::kBF16Ecc8 || kMaster == MasterFormat::kBF16Ecc16)
    PrefetchLine(static_cast<const unsigned char*>(sp.ecc) +
                 e * (kMaster == MasterFormat::kBF16Ecc8 ? 1 : 2));
  if (has_m) {
    PrefetchLine(static_cast<const unsigned char*>(sp.m) + e * (kMom == MomentFormat::kQ8 ? 1 : 4));
    if constexpr (kMom == MomentFormat::kQ8) PrefetchLine(sp.m_scales + e / kQuantGroup);
  }
  if constexpr (kAdam) {
    PrefetchLine(static_cast<const unsigned char*>(sp.v) + e * (kVar == MomentFormat::kQ8 ? 1 : 4));
    if constexpr (kVar == MomentFormat::kQ8) PrefetchLine(sp.v_scales + e / kQuantGroup);
  }
}

// Note [L2 prefetch] for the block's next tile: the unit's next tile at `base` + one tile
// when in_unit, else tile 0 of the block's next unit (at next_base of next_sp) if any.
template <Kind kKind, MasterFormat kMaster, MomentFormat kMom, MomentFormat kVar>
__device__ __forceinline__ void PrefetchNextTile(const LaunchArgs& args, const SpanMeta& sp,
                                                 uint64_t base, bool in_unit,
                                                 const SpanMeta& next_sp, uint64_t next_base,
                                                 bool has_next) {
  if (in_unit || has_next)
    PrefetchThread<kKind, kMaster, kMom, kVar>(args, in_unit ? sp : next_sp,
                                               in_unit ? base + kTileElems : next_base);
}

// Whether every tile of the unit at `unit_base` of span `sp` is a full fast tile (Note
// [Fast tiles]): the unit lies inside the span and every array allows the vector access.
// Uniform in the block.
template <Kind kKind, MasterFormat kMaster>
__device__ __forceinline__ bool UnitFastOk(const SpanMeta& sp, bool has_m, uint64_t unit_base) {
  const uint32_t need = FastVecMask<kKind, kMaster>(has_m);
  return unit_base + kUnitElems <= sp.n && (sp.vec_ok & need) == need;
}

// Note [Whole fast units]: most units (all but the last of each span, and that one too
// when the span ends on a unit boundary) are made of full fast tiles. For them the
// per-tile choices of StepUnit (is the tile inside the span, is it fast, which gradient
// dtype) are made once per unit, and the tile loop is FastTile alone: the SASS before a
// tile's first load falls from ~45 to ~32 instructions. Measured (H200, flat 2^30, % of
// copy, 3 rounds on one host, with | without): AdamW ecc8/q8/q8 81.0 | 77.2, ecc16 85.9 |
// 83.7, Lion 91.5 | 90.7, SGD 91.0 | 89.2 (16 tiles per unit there), more than the count
// predicts; the fp32-state AdamW lost a point (88.0 | 89.1), so only the q8 kernels use
// it (kQ8Kernel). TANDEM_GPU_FAST_UNIT=0 turns it off, for measuring.
template <Kind kKind, MasterFormat kMaster, MomentFormat kMom, MomentFormat kVar, DType kGrad,
          bool kPrefetch>
__device__ __forceinline__ void FastUnit(const LaunchArgs& args, const StepScalars& s,
                                         const SpanMeta& sp, uint64_t unit_base,
                                         const SpanMeta& next_sp, uint64_t next_base,
                                         bool has_next, const DecodeTables& tables) {
#pragma unroll 1
  for (int t = 0; t < kTilesPerUnit; ++t) {
    const uint64_t base = unit_base + static_cast<uint64_t>(t) * kTileElems;
    if constexpr (kPrefetch)
      PrefetchNextTile<kKind, kMaster, kMom, kVar>(args, sp, base, t + 1 < kTilesPerUnit, next_sp,
                                                   next_base, has_next);
    FastTile<kKind, kMaster, kMom, kVar, kGrad>(s, sp, base + threadIdx.x * kElemsPerThread,
                                                tables);
  }
}

// One work unit: this thread's 8 elements of each of its tiles, by FastTile where
// Note [Fast tiles] allows, else by GenericTile; whole fast units by FastUnit (Note
// [Whole fast units]). A tile past the end of the span is skipped by the whole block
// (uniform, so the quad shuffles stay warp-wide). Each tile first looks at the block's
// next tile: the unit's next tile, else tile 0 of `next` (when has_next), the block's
// next unit; with kPrefetch it asks L2 for it (Note [L2 prefetch]). issue_meta() issues
// the unit's metadata copy (Note [Metadata prefetch]).
template <Kind kKind, MasterFormat kMaster, MomentFormat kMom, MomentFormat kVar, bool kPrefetch,
          class MetaFn>
__device__ __forceinline__ void StepUnit(const LaunchArgs& args, const WorkUnit unit,
                                         const SpanMeta& sp, const WorkUnit next,
                                         const SpanMeta& next_sp, bool has_next,
                                         const DecodeTables& tables, MetaFn issue_meta) {
  if (sp.scalar_index == kSkipSpanIndex) {  // left out of this launch (uniform in the block)
    issue_meta();
    return;
  }
  const StepScalars& s = args.scalars[sp.scalar_index];
  const bool has_m = HasMomentum<kKind>(s);
  issue_meta();
  const uint64_t unit_base = uint64_t{unit.chunk} * kUnitElems;
  const uint64_t next_base = uint64_t{next.chunk} * kUnitElems;
  constexpr bool kFastUnits = TANDEM_GPU_FAST_UNIT != 0 && kQ8Kernel<kKind, kMom, kVar>;
  if (kFastUnits && UnitFastOk<kKind, kMaster>(sp, has_m, unit_base)) {
    switch (static_cast<DType>(sp.grad_dtype)) {
      case DType::kBF16:
        FastUnit<kKind, kMaster, kMom, kVar, DType::kBF16, kPrefetch>(
            args, s, sp, unit_base, next_sp, next_base, has_next, tables);
        return;
      case DType::kF32:
        FastUnit<kKind, kMaster, kMom, kVar, DType::kF32, kPrefetch>(
            args, s, sp, unit_base, next_sp, next_base, has_next, tables);
        return;
      case DType::kF16:
        FastUnit<kKind, kMaster, kMom, kVar, DType::kF16, kPrefetch>(
            args, s, sp, unit_base, next_sp, next_base, has_next, tables);
        return;
      default:
        break;  // not a valid dtype (StepPlan validates): the per-tile loop below
    }
  }
#pragma unroll 1
  for (int t = 0; t < kTilesPerUnit; ++t) {
    const uint64_t base = unit_base + static_cast<uint64_t>(t) * kTileElems;
    if (base >= sp.n) break;
    const bool in_unit = t + 1 < kTilesPerUnit && base + kTileElems < sp.n;
    if constexpr (kPrefetch)
      PrefetchNextTile<kKind, kMaster, kMom, kVar>(args, sp, base, in_unit, next_sp, next_base,
                                                   has_next);
    const uint64_t e = base + threadIdx.x * kElemsPerThread;
    if (FastOk<kKind, kMaster>(sp, has_m, base)) {
      switch (static_cast<DType>(sp.grad_dtype)) {
        case DType::kBF16:
          FastTile<kKind, kMaster, kMom, kVar, DType::kBF16>(s, sp, e, tables);
          break;
        case DType::kF32:
          FastTile<kKind, kMaster, kMom, kVar, DType::kF32>(s, sp, e, tables);
          break;
        default:  // kF16 (FastOk)
          FastTile<kKind, kMaster, kMom, kVar, DType::kF16>(s, sp, e, tables);
      }
    } else {
      GenericTile<kKind, kMaster, kMom, kVar>(s, sp, e, tables);
    }
  }
}

// The kernel: a grid-stride loop over the work units (a persistent grid, so that the
// decode tables are built once per block). Note [Metadata prefetch]: while unit k is
// processed, the first kMetaWords threads copy the span entry of unit k+2 into shared
// memory and thread 0 the index of unit k+3, with cp.async; so a unit's data loads never
// wait behind the dependent unit -> span -> pointer loads, and unit k+1's entry is there
// for Note [L2 prefetch] during unit k. Buffers: meta[k % 3] and units[k % 4]; the
// barrier at the end of each iteration publishes them (a slot is rewritten in the
// iteration after its last reader at the earliest, behind that iteration's barrier).
template <Kind kKind, MasterFormat kMaster, MomentFormat kMom, MomentFormat kVar>
__global__ void __launch_bounds__(kBlockThreads, kMinBlocksPerSm)
    FusedStepKernel(const __grid_constant__ LaunchArgs args) {
  constexpr int kMetaWords = static_cast<int>(sizeof(SpanMeta) / sizeof(uint64_t));
  static_assert(sizeof(SpanMeta) % sizeof(uint64_t) == 0 && 2 * kMetaWords <= kBlockThreads,
                "SpanMeta is copied as 8-byte words, one per thread");
  __shared__ DecodeTables tables;
  __shared__ SpanMeta meta[3];
  __shared__ WorkUnit units[4];
  constexpr bool kTables = kQ8Kernel<kKind, kMom, kVar>;
  if constexpr (kTables) {
    FillDecodeTables(tables);
  }
  // Note [L2 prefetch].
  constexpr bool kPrefetch =
      kTables && TANDEM_GPU_L2_PREFETCH != 0 &&
      (kKind != Kind::kAdam || kMaster == MasterFormat::kBF16Ecc16 ||
       TANDEM_GPU_L2_PREFETCH_ADAM != 0);
  const uint32_t n_units = args.num_units;
  const uint64_t stride = gridDim.x;
  const uint32_t first = blockIdx.x;  // < n_units: the grid never exceeds the unit count
  const bool copier = threadIdx.x < kMetaWords;
  // Prologue (plain loads): the entries of units 0 and 1, the indices of units 0, 1, 2.
  if (threadIdx.x < 2 * kMetaWords) {
    const uint32_t j = threadIdx.x / kMetaWords, word = threadIdx.x % kMetaWords;
    const uint64_t uj = first + j * stride;
    if (uj < n_units) {
      const WorkUnit wu = args.units[uj];
      reinterpret_cast<uint64_t*>(&meta[j])[word] =
          reinterpret_cast<const uint64_t*>(args.spans + wu.span)[word];
      if (word == 0) units[j] = wu;
    }
    if (threadIdx.x == 0 && first + 2 * stride < n_units) units[2] = args.units[first + 2 * stride];
  }
  __syncthreads();
  int k = 0;
  int slot = 0;  // k % 3
  for (uint64_t u = first; u < n_units; u += stride, ++k) {
    const int slot1 = slot == 2 ? 0 : slot + 1, slot2 = slot1 == 2 ? 0 : slot1 + 1;
    const auto issue_meta = [&] {
      if (copier && u + 2 * stride < n_units) {
        CopyAsync8(
            reinterpret_cast<uint64_t*>(&meta[slot2]) + threadIdx.x,
            reinterpret_cast<const uint64_t*>(args.spans + units[(k + 2) & 3].span) + threadIdx.x);
        if (threadIdx.x == 0 && u + 3 * stride < n_units)
          CopyAsync8(&units[(k + 3) & 3], &args.units[u + 3 * stride]);
      }
    };
    StepUnit<kKind, kMaster, kMom, kVar, kPrefetch>(
        args, units[k & 3], meta[slot], units[(k + 1) & 3], meta[slot1], u + stride < n_units,
        tables, issue_meta);
    // The metadata copy.
    if (copier) CopyAsyncWaitAll();
    __syncthreads();
    slot = slot1;
  }
}

// Launches one instance with a grid of at most (resident blocks per SM) x sm_count
// blocks; returns the CUDA error of the occupancy query or of the launch.
using LaunchFn = cudaError_t (*)(const LaunchArgs& args, int sm_count, cudaStream_t stream,
                                 unsigned* grid);

template <Kind kKind, MasterFormat kMaster, MomentFormat kMom, MomentFormat kVar>
cudaError_t LaunchFused(const LaunchArgs& args, int sm_count, cudaStream_t stream, unsigned* grid) {
  auto* kernel = &FusedStepKernel<kKind, kMaster, kMom, kVar>;
  int per_sm = 0;
  cudaError_t err =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlockThreads, 0);
  if (err != cudaSuccess) return err;
  const uint64_t resident = static_cast<uint64_t>(per_sm > 0 ? per_sm : 1) * sm_count;
  *grid = static_cast<unsigned>(args.num_units < resident ? args.num_units : resident);
  kernel<<<*grid, kBlockThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

// Per-family tables (step_adam.cu, step_lion.cu, step_sgd.cu). The momentum format of
// SGD without momentum is f32 (ValidateStepSpan); Lion and SGD ignore `var`.
LaunchFn AdamLauncher(MasterFormat master, MomentFormat mom, MomentFormat var);
LaunchFn LionLauncher(MasterFormat master, MomentFormat mom);
LaunchFn SgdLauncher(MasterFormat master, MomentFormat mom);

}  // namespace tandem::gpu::detail
