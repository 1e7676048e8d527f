// ResolvePlacement for callers that size many placements and build none (the planner's
// sweep): the same decision and memory, its plan sized without parts.
#pragma once

#include <vector>

#include "tandem/resolve_placement.h"

namespace tandem {

// ResolvePlacement(tensors, config, mode, rates) with its plan from PlanMemory's
// sizes_only (Note [Sizes without parts] in engine/layout/state_layout.h): placement,
// split, memory and every size of the plan are ResolvePlacement's; the plan's layouts keep
// no parts, so nothing can be allocated by it. Throws as ResolvePlacement.
ResolvedPlacement ResolvePlacementSizes(const std::vector<TensorSpec>& tensors,
                                        const OptimizerConfig& config, ExecutionMode mode,
                                        const MachineRates* rates);

}  // namespace tandem
