// Internal: the per-element byte counts behind the kernel rooflines.
#pragma once

#include "tandem/planner.h"

namespace tandem::planner {

// Fewest bytes one optimizer-step element must move: read the gradient, read and write
// the master and each moment (with its q8 scales, 2 bytes per 32 elements), and write the
// parameter where the master does not alias it. AdamW bf16+ecc8/q8/q8 with bf16 gradients
// and parameters: 12.25; all-fp32 AdamW: 28.
double KernelBytesPerElement(Algorithm algo, const HyperParams& hyper, const StateFormats& f,
                             DType param_dtype, DType grad_dtype);

// The compute-split model's input for a rank with `hot` GPU-resident and `cold`
// host-resident elements under `in` (its chunk, dtypes) and `rates` (stream bytes);
// `release`: gradient release (streamed chunks take their gradient up again).
ComputeSplitInput SplitInputFor(const PlanInputs& in, const Rates& rates, uint64_t hot,
                                uint64_t cold, bool release = false);

// Parses a KernelKey; false if it is not one.
bool ParseKernelKey(const std::string& key, Algorithm* algo, StateFormats* f, DType* grad);

// Efficiency assumed for rooflines when a profile measured no kernel on that side.
inline constexpr double kDefaultKernelEfficiency = 0.90;

}  // namespace tandem::planner
