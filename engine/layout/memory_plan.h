// MemoryPlan: everything about the optimizer's memory that follows from the tensors, their
// formats, the layout's parameters (LayoutParams) and the placement alone: the layout of each placement class's state, the
// slots and staging of the executors, the early-start and speculation buffers, and the
// report they add up to. ResolvePlacement plans once and hands the plan with the placement
// (ResolvedPlacement::plan); the optimizer allocates what that plan says, so the memory
// predicted (and checked against the host budget) is the memory built.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/layout/slab_layout.h"
#include "engine/layout/state_layout.h"
#include "engine/layout/layout_params.h"
#include "engine/layout/stream_layout.h"
#include "tandem/config.h"
#include "tandem/placement.h"

namespace tandem::layout {

struct MemoryPlan {
  StateLayout hot, cold;           // GPU-resident; host-resident and computed on the host
  StreamLayout stream;             // host-resident, computed on the GPU
  // The stream executor's device slots: stream_slot_bytes in all, one every slot_stride
  // bytes; with release_grads a slot holds a chunk's gradients from slot_grad_off on.
  // release_slot_bytes: what release_grads adds to all the slots (counted whether or not
  // it is set, for a plan that resolves without release and adds it itself).
  uint64_t stream_slot_bytes = 0, slot_stride = 0, slot_grad_off = 0, release_slot_bytes = 0;
  // The offload pipeline's staging: K gradient slots and, where a chunk cannot upload its
  // state directly, K parameter slots.
  uint64_t grad_slot_bytes = 0, param_slot_bytes = 0;
  std::vector<uint64_t> grad_slot_off, param_slot_off;
  uint64_t staging_bytes = 0;
  // Early start: per tensor, the offset of its offloaded gradients in the early-start
  // buffer and (speculation) of its held parameters (kNoOffset: uploads from the state).
  std::vector<uint64_t> early_off, hold_off;
  uint64_t early_bytes = 0, hold_bytes = 0;
  // Speculating host-computed chunks: the backup of the chunks taken within
  // speculative_host_bytes (Note [Host speculation budget]): per tensor, the first
  // cold_backup.part(t).count elements of its host-computed part.
  StateLayout cold_backup;
  // Gradient release (OptimizerConfig::release_grads; Note [Gradient release] in
  // tandem/optimizer.h): per tensor, the offset of its GPU-resident part's gradients in
  // the gradient buffer; per stream chunk, the offset of its gradients (StreamChunk::
  // grad_bytes) in the pinned gradient area. Empty without release.
  std::vector<uint64_t> hot_grad_off, stream_grad_off;
  uint64_t hot_grad_bytes = 0, stream_grad_bytes = 0;
  // Speculating streamed chunks (Note [Speculating streamed chunks]): per stream chunk,
  // the offsets of its spare and of its parameters' holding place (kNoOffset: the chunk
  // streams at Step only).
  std::vector<uint64_t> spec_spare_off, spec_hold_off;
  uint64_t spec_spare_bytes = 0, spec_hold_bytes = 0;
  // What the above adds up to; the GPU plans' tables (device.metadata) are not in it
  // (AddPlanMetadata), nor is host_budget (the configuration's, not the layout's).
  MemoryReport report;
};

// Note [Host speculation budget]: the host-computed chunks are speculated in the order
// their gradients arrive (tensors from the last registered, each tensor's chunks of
// chunk_elements from its part's start), and taken while the sum of their state bytes
// (PartBytes of the chunk) and held parameter bytes stays within
// LayoutParams::speculative_host_bytes (0: every chunk); the first that does not fit
// ends the list. So each tensor's speculated chunks are a prefix of its part, and the
// backup carved per tensor (alignment per part, not per chunk) takes at most the budget.
//
// The plan for `specs`, tensor t stepped in formats[t] (layout::TensorFormats), under
// `params` at `placement`; gpu: GPU mode (the GPU-resident state and the stream slots in
// device memory), else host mode. sizes_only: the state layouts (hot, cold, stream,
// cold_backup) keep no parts (Note [Sizes without parts] in engine/layout/state_layout.h):
// every size, offset and the report are the full plan's, but nothing can be allocated by
// it. Every group index must be in range. Throws Error(kInvalidArgument) when
// stream_chunk_bytes cannot hold one group of a streamed tensor.
MemoryPlan PlanMemory(const std::vector<TensorSpec>& specs,
                      const std::vector<StateFormats>& formats, const LayoutParams& params,
                      const Placement& placement, bool gpu, bool sizes_only = false);

// GPU mode: the device bytes of the fused step's plans (one per format set of the hot
// spans, one per format set of every streamed chunk and, for a speculative chunk, its
// hold spans: Note [One plan per format set]) and of the pre-pass's plan, and the pinned
// bytes of the pre-pass's result, added to `report`'s metadata.
void AddPlanMetadata(const std::vector<TensorSpec>& specs,
                     const std::vector<StateFormats>& formats, const Placement& placement,
                     const MemoryPlan& plan, MemoryReport* report);

}  // namespace tandem::layout
