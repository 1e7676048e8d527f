// Internal: pieces of the plan shared by MakePlan and the tests.
#pragma once

#include <vector>

#include "tandem/optimizer.h"
#include "tandem/planner.h"

namespace tandem::planner {

// Fraction grid of the searches: multiples of 1 / kFractionSteps.
inline constexpr int kFractionSteps = 10000;
// Sweep reported in tables and charts: 0, 1/16, ..., 1.
inline constexpr int kSweepSteps = 16;

// Data-parallel ranks: gpus_per_node * nodes.
uint64_t RankCount(const PlanInputs& in);

// The tensors rank 0 steps: every tensor whole (the engine today), or with the
// zero1_sharding what-if each tensor's first ceil(numel / ranks) elements rounded up to
// a quantization group (rank 0 holds the largest shard of every tensor, so it is the
// rank that bounds memory and time).
std::vector<TensorSpec> ShardSpecs(const PlanInputs& in);

// The optimizer configuration rank 0 would run with at `fraction`.
OptimizerConfig ShardConfig(const PlanInputs& in, double fraction);

// Activation bytes per GPU from the inputs (given, estimated, or 0).
uint64_t ActivationBytes(const PlanInputs& in);

}  // namespace tandem::planner
