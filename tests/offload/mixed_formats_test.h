// Per-tensor state formats (TensorSpec::formats), shared by the host and GPU suites: a
// model whose tensors mix format sets, and the "global" optimizers it is compared with
// (one per distinct format set, every tensor in it), which give each tensor its bits.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "tandem/optimizer.h"
#include "tests/offload/hybrid_fixture.h"

namespace tandem::testing {

// Default bf16+ecc8 / q8 / q8. Tensors 1 (64 elements) and 3 (3) stand for the 1-D norm
// weights that get f32 moments; tensor 7 (9000, several chunks) overrides the master to
// f32 and keeps q8 moments; tensor 9 (777, odd) takes bf16 / f32 m / q8 v. Tensor 4 is empty
// and overridden too (nothing to step).
inline const StateFormats kMixedDefault{MasterFormat::kBF16Ecc8, MomentFormat::kQ8,
                                        MomentFormat::kQ8};
inline const StateFormats kF32Moments{MasterFormat::kBF16Ecc8, MomentFormat::kF32,
                                      MomentFormat::kF32};
inline const StateFormats kF32Master{MasterFormat::kF32, MomentFormat::kQ8, MomentFormat::kQ8};
inline const StateFormats kBf16Mixed{MasterFormat::kBF16, MomentFormat::kF32, MomentFormat::kQ8};

inline std::map<size_t, StateFormats> MixedOverrides() {
  return {{1, kF32Moments}, {3, kF32Moments}, {4, kF32Moments}, {7, kF32Master}, {9, kBf16Mixed}};
}

// Tensor t's formats in the mixed model.
inline StateFormats MixedFormatsOf(size_t t) {
  const auto o = MixedOverrides();
  const auto it = o.find(t);
  return it == o.end() ? kMixedDefault : it->second;
}

// The distinct format sets of the mixed model, default first.
inline std::vector<StateFormats> MixedFormatSets() {
  return {kMixedDefault, kF32Moments, kF32Master, kBf16Mixed};
}

// specs with the mixed overrides applied.
inline std::vector<TensorSpec> WithMixedFormats(std::vector<TensorSpec> specs) {
  for (const auto& [t, f] : MixedOverrides())
    if (t < specs.size()) specs[t].formats = f;
  return specs;
}

}  // namespace tandem::testing
