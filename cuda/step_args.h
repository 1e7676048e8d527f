// What one launch of the fused multi-tensor step receives, shared by the host plan
// (step_plan.cu) and every layer of the kernel: the block and work-unit shape, the
// device span table (SpanMeta), the work-unit map (WorkUnit), the kernel parameters
// (LaunchArgs) and the per-family launcher entry points (step_adam.cu, step_lion.cu,
// step_sgd.cu). Plain data only; relies on gpu_step.h for StepScalars and the formats.
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
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/gpu_step.h"

namespace tandem::gpu::detail {

inline constexpr int kElemsPerThread = 8;
inline constexpr int kThreadsPerGroup = kQuantGroup / kElemsPerThread;
// Note [Block shape]: a unit is kTilesPerUnit tiles of kBlockThreads * kElemsPerThread
// elements, so the per-unit costs (loop, metadata prefetch, the block barrier) are shared
// by its tiles. Results never depend on the shape, only speed does; the measurements
// behind each value are in docs/gpu_kernels.md ("Tuning decisions").
// 512 threads: the fastest shape for AdamW with q8 state, the kernel furthest from its target.
inline constexpr int kBlockThreads = 512;
// 2 resident blocks per SM caps registers at 64: the issue-bound kernels want warps in flight.
inline constexpr int kMinBlocksPerSm = 2;
// 8 tiles per unit: enough to amortise the per-unit costs; more measured no better.
inline constexpr int kTilesPerUnit = 8;
inline constexpr int kTileElems = kBlockThreads * kElemsPerThread;  // 4096
inline constexpr int kUnitElems = kTileElems * kTilesPerUnit;       // 32768
static_assert(kQuantGroup == 32, "Note [Group size]: the quad mapping assumes 32");
static_assert(kBlockThreads % 32 == 0 && kBlockThreads <= 1024, "whole warps, one block");
static_assert(kThreadsPerGroup == 4, "QuadMax (tiles.cuh) reduces over 4 lanes");
static_assert(kUnitElems % kQuantGroup == 0, "Note [Groups never straddle units]");

// Which algorithm family a kernel instance runs; Adam covers AdamW and Adam (L2), which
// update_math.h tells apart by StepScalars::algo.
enum class Kind : int { kAdam = 0, kLion = 1, kSgd = 2 };

// Whether an instance keeps a moment in q8 (and so builds the decode tables): the kernels
// that Note [L2 prefetch] and Note [Whole fast units] apply to.
template <Kind kKind, MomentFormat kMom, MomentFormat kVar>
inline constexpr bool kQ8Kernel = kMom == MomentFormat::kQ8 ||
                                  (kKind == Kind::kAdam && kVar == MomentFormat::kQ8);

// Bits of SpanMeta::vec_ok: the array's base is aligned for this kernel's vector access
// (16 bytes, 8 for 1-byte arrays), so every full 8-element tile is loaded in one piece.
enum VecBit : uint32_t {
  kVecGrad = 1u << 0,
  kVecParam = 1u << 1,
  kVecMaster = 1u << 2,  // master.f32 or master.bf16
  kVecEcc = 1u << 3,     // master.ecc8 or master.ecc16
  kVecM = 1u << 4,       // m.f32 or m.codes
  kVecV = 1u << 5,       // v.f32 or v.codes
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
  uint32_t vec_ok;        // VecBit mask
  uint8_t grad_dtype;     // DType
  uint8_t param_dtype;    // DType
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

// Launches one instance with a grid of at most (resident blocks per SM) x sm_count
// blocks; returns the CUDA error of the occupancy query or of the launch.
using LaunchFn = cudaError_t (*)(const LaunchArgs& args, int sm_count, cudaStream_t stream,
                                 unsigned* grid);

// Per-family tables (step_adam.cu, step_lion.cu, step_sgd.cu). The momentum format of
// SGD without momentum is f32 (ValidateStepSpan); Lion and SGD ignore `var`.
LaunchFn AdamLauncher(MasterFormat master, MomentFormat mom, MomentFormat var);
LaunchFn LionLauncher(MasterFormat master, MomentFormat mom);
LaunchFn SgdLauncher(MasterFormat master, MomentFormat mom);

}  // namespace tandem::gpu::detail
