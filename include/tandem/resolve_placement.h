// The one placement decision: where each element's state lives and is computed (Note
// [Three placement classes] in tandem/compute_split.h), with the compute share
// offload_compute resolves to and the memory the optimizer built from it will hold.
//
// The optimizer's constructor, its host-budget check, PredictMemory and the planner all
// call ResolvePlacement, so what is predicted and checked is what is built. It is pure:
// it allocates nothing, measures nothing and needs no GPU; the rates for offload_compute
// auto are handed in (the constructor measures them once into a RateCache,
// tandem/rate_cache.h; PredictMemory reads that cache).
//
// Thread safety: every function here is pure (RatesFor reads a RateCache, which is
// thread-safe).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "tandem/compute_split.h"
#include "tandem/config.h"
#include "tandem/placement.h"
#include "tandem/rate_cache.h"

namespace tandem {

namespace layout {
struct MemoryPlan;  // engine/layout/memory_plan.h: the engine's own, opaque here
}

struct ResolvedPlacement {
  // The cut of every tensor; placement.stream_share is the compute share resolved.
  Placement placement;
  // The compute-split model at that share (all zeros without rates: a share given
  // explicitly without machine rates, host mode, or nothing offloaded).
  ComputeSplit split;
  // What HybridOptimizer::memory() reports for an optimizer built from the same tensors
  // and configuration in this mode (before GradReady allocates the early-start buffer:
  // docs/user_guide.md, "Memory").
  MemoryReport memory;
  // The layout `memory` adds up (every executor's slabs, slots and buffers at
  // `placement`): what the optimizer built from this resolution allocates, so it is
  // planned once. Never null after ResolvePlacement; immutable, shared by copies.
  std::shared_ptr<const layout::MemoryPlan> plan;
};

// The placement of `tensors` under `config` in `mode` (kGpu or kHost; kAuto is taken as
// kHost here: the caller resolves it). The share: config.offload_compute when it is a
// share; 0 for auto in host mode or with nothing offloaded; auto in GPU mode:
// ChooseSplit's for `rates`, over the share-0 placement's host-resident elements (their
// state's bytes per element, gradient, parameter, and with release_grads the gradient
// again beside the streamed state: Note [The compute share's input] in
// engine/layout/stream_layout.h). `rates` (may be null) also gives `split` for an explicit
// share. The tensors' pointers are ignored. Throws Error(kInvalidArgument) for a tensor
// whose group is out of range, a fraction or share out of [0, 1], invalid rates, a
// stream_chunk_bytes too small for one group, or auto in GPU mode without rates (naming
// how to get them).
ResolvedPlacement ResolvePlacement(const std::vector<TensorSpec>& tensors,
                                   const OptimizerConfig& config, ExecutionMode mode,
                                   const MachineRates* rates);

// ResolvePlacement's decision without sizing its memory: the same placement and split,
// at the cost of a pass over the tensors (no layout is built). For callers that scan many
// fractions for the placement alone (the planner's step-time search). Throws as
// ResolvePlacement, except for a stream_chunk_bytes too small (only sizing finds that).
struct PlacementDecision {
  Placement placement;
  ComputeSplit split;
};
PlacementDecision DecidePlacement(const std::vector<TensorSpec>& tensors,
                                  const OptimizerConfig& config, ExecutionMode mode,
                                  const MachineRates* rates);

// The key an optimizer built from `tensors` and `config` looks its measured rates up
// with (RateCache::Key). Error(kInvalidArgument) for a group out of range.
RateCache::Key RateKeyFor(const std::vector<TensorSpec>& tensors, const OptimizerConfig& config);

// The rates offload_compute auto decides with, without measuring: config.machine_rates
// when set, else the entry for RateKeyFor(tensors, config) in config.rate_cache (nullptr:
// DefaultRateCache()), else none.
std::optional<MachineRates> RatesFor(const std::vector<TensorSpec>& tensors,
                                     const OptimizerConfig& config);

// The memory a HybridOptimizer built from `tensors` and `config` in `mode` (kGpu or kHost)
// would report, computed without allocating or measuring anything:
// ResolvePlacement(tensors, config, mode, RatesFor(tensors, config)).memory. For
// offload_compute auto in GPU mode without machine_rates it needs the rates a construction
// of the same setting measured into the rate cache (Error(kInvalidArgument) saying so
// when there are none): the memory depends on the share the rates choose.
MemoryReport PredictMemory(const std::vector<TensorSpec>& tensors, const OptimizerConfig& config,
                           ExecutionMode mode);

}  // namespace tandem
