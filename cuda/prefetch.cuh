// Getting data closer before it is used: the L2 prefetch of the block's next tile (Note
// [L2 prefetch]) and the asynchronous global -> shared copies of the kernel's metadata
// prefetch (Note [Metadata prefetch], step_kernel.cuh). Hints and copies only, never
// arithmetic: results do not depend on them. Relies on step_args.h for the span table,
// the launch arguments and the tile shape.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/step_args.h"

namespace tandem::gpu::detail {

// ---- Asynchronous copies global -> shared (cp.async, sm_80+): no registers held while
// the load is in flight. ----
__device__ __forceinline__ void CopyAsync8(void* shared_dst, const void* global_src) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(dst), "l"(global_src) : "memory");
}
__device__ __forceinline__ void CopyAsyncWaitAll() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// ---- L2 prefetch. ----
//
// Note [L2 prefetch]: in the q8 kernels a warp spends 50-90 instructions per element
// between its loads and its stores, so the DRAM latency of every tile start is exposed
// and only the warps that are waiting keep bytes in flight. Before each tile, each thread
// therefore asks L2 for the lines of its 8 elements of the block's next tile
// (prefetch.global.L2, one instruction per array, merged across the warp, no registers
// held): the DRAM traffic runs one tile ahead and the tile's own loads hit L2. The
// lookahead is one tile (4096 elements per block, ~13 MB over a full H200 grid for
// ecc8/q8/q8), well below L2's 50 MB, so prefetched lines are not evicted before use.
// A hint only: results do not depend on it. Which kernels prefetch is kL2Prefetch.

// Whether an instance prefetches (Note [L2 prefetch]): the Lion and SGD q8 kernels, and
// the Adam q8 kernels only with the bf16+ecc16 master, because the other Adam kernels are
// issue-bound and measured slower with it; the fp32-state kernels do not, as their loads
// are not behind long compute (docs/gpu_kernels.md, "Tuning decisions").
template <Kind kKind, MasterFormat kMaster, MomentFormat kMom, MomentFormat kVar>
inline constexpr bool kL2Prefetch = kQ8Kernel<kKind, kMom, kVar> &&
                                    (kKind != Kind::kAdam || kMaster == MasterFormat::kBF16Ecc16);

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

}  // namespace tandem::gpu::detail
