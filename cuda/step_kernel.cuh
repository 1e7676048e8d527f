// Fused multi-tensor optimizer step: the kernel template and its launcher. Maps the work
// units of a launch to tiles (the work mapping and Note [Groups never straddle units] are
// in step_args.h): a persistent grid walks the units, each unit runs its tiles through
// FastTile or GenericTile (tiles.cuh), and asks L2 for the next tile as it goes
// (prefetch.cuh). Relies on those layers for all per-element work and memory access; the
// instances are compiled per family in step_adam.cu, step_lion.cu and step_sgd.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/fast_codec.cuh"
#include "cuda/prefetch.cuh"
#include "cuda/step_args.h"
#include "cuda/tiles.cuh"

namespace tandem::gpu::detail {

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
// tile's first load falls from ~45 to ~32 instructions. Only the q8 kernels (kQ8Kernel)
// use it: it made them faster and the fp32-state AdamW slower (docs/gpu_kernels.md,
// "Tuning decisions").
template <Kind kKind, MasterFormat kMaster, MomentFormat kMom, MomentFormat kVar, DType kGrad,
          bool kPrefetch>
__device__ __forceinline__ void FastUnit(const LaunchArgs& args, const StepScalars& s,
                                         const SpanMeta& sp, uint64_t unit_base,
                                         const SpanMeta& next_sp, uint64_t next_base, bool has_next,
                                         const DecodeTables& tables) {
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
  constexpr bool kFastUnits = kQ8Kernel<kKind, kMom, kVar>;  // Note [Whole fast units]
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
  constexpr bool kPrefetch = kL2Prefetch<kKind, kMaster, kMom, kVar>;  // Note [L2 prefetch]
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
    StepUnit<kKind, kMaster, kMom, kVar, kPrefetch>(args, units[k & 3], meta[slot],
                                                    units[(k + 1) & 3], meta[slot1],
                                                    u + stride < n_units, tables, issue_meta);
    // The metadata copy.
    if (copier) CopyAsyncWaitAll();
    __syncthreads();
    slot = slot1;
  }
}

// One instance's LaunchFn (step_args.h): a grid of at most (resident blocks per SM) x
// sm_count blocks; returns the CUDA error of the occupancy query or of the launch.
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

}  // namespace tandem::gpu::detail
