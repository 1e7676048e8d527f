// What follows from one TensorSpec under a configuration: its state formats (its
// TensorSpec::formats where set, the configured OptimizerConfig::formats otherwise, and
// the one check both kinds go through) and the runs its pre-pass sums. Everything that
// lays out, steps, snapshots or restores a tensor's state asks for that tensor's formats
// here (the layout, ResolvePlacement and the optimizer use the same function, so the
// memory report and the prediction agree).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tandem/config.h"

namespace tandem::layout {

// The formats tensor `s` is stepped in under `cfg`.
inline const StateFormats& EffectiveFormats(const TensorSpec& s, const OptimizerConfig& cfg) {
  return s.formats ? *s.formats : cfg.formats;
}

// Throws Error(kInvalidArgument) "<who>: ..." for an unknown format value, a variance
// format other than f32 for an algorithm without a second moment, or a momentum format
// other than f32 for a group in `groups` that keeps no momentum buffer (SGD with momentum
// 0, named "group <first_group + i>" in the message).
void CheckFormats(Algorithm algo, std::span<const HyperParams> groups, const StateFormats& f,
                  const std::string& who, size_t first_group = 0);

// Every tensor's effective formats, in tensor order (groups must be in range).
std::vector<StateFormats> TensorFormats(const std::vector<TensorSpec>& specs,
                                        const OptimizerConfig& cfg);

// The run length of tensor `s` for the pre-pass (TensorSpec::norm_unit's rule; Note
// [Exact sum of squares] in engine/exact_sum.h).
uint64_t NormRun(const TensorSpec& s);

}  // namespace tandem::layout
