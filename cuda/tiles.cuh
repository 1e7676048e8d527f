// The per-element math of the fused step over one thread's 8-element register tile:
// decode the state, update, encode, store. GenericTile serves any tile (span tails,
// misaligned arrays); FastTile serves full, vector-aligned tiles. Relies on tile_io.cuh
// for moving the arrays (only the q8 group scales, one per quad, are accessed in place
// here) and on fast_codec.cuh and engine/ for the arithmetic.
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
#include "cuda/step_args.h"
#include "cuda/tile_io.cuh"
#include "engine/fp_bits.h"
#include "engine/master_codec.h"
#include "engine/q8_codec.h"
#include "engine/update_math.h"

namespace tandem::gpu::detail {

// Largest of the 4 quad partial maxima. Partials are >= +0 and never NaN (the
// reference's `a > amax ? a : amax` never lets NaN in), so the result equals the
// reference's sequential maximum over the group.
__device__ __forceinline__ float QuadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, 1));  // no NaN, no -0: same as the select
  return fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, 2));
}

// ---- Any tile. ----

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

// Only SGD may run without a momentum buffer: StepPlan::Launch rejects Adam or Lion
// scalars with has_momentum == 0, so for them the flag is a compile-time constant (Note
// [One round trip per tile], tile_io.cuh).
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

}  // namespace tandem::gpu::detail
