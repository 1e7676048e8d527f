// The two halves of ValidateSnapshot, for readers that hold one tensor's arrays at a time
// (the checkpoint verifier). ValidateSnapshot(s) is exactly ValidateSnapshotLayout(s)
// followed by ValidateTensorState(s, t) for every tensor t in order. Thread-safe (pure).
#pragma once

#include "tandem/snapshot.h"

namespace tandem {

// Everything that needs no array: groups (ValidateHyperParams), the global step in
// [0, 2^53], then per tensor in order: duplicate name, group index, step in
// [0, s.step], shape product == numel. Array contents of s are not read.
// Throws Error(kInvalidArgument) naming the first problem.
void ValidateSnapshotLayout(const OptimizerSnapshot& s);

// An unknown format value in t.formats, then the array sizes of `t` for s's algorithm,
// t's own formats (TensorSnapshot::formats) and t's group (which must exist: run
// ValidateSnapshotLayout first), then every value the formats cannot hold, first by
// array then by element index (a deterministic choice, whatever the thread count).
// Throws Error(kInvalidArgument) naming the tensor, the array and the element.
void ValidateTensorState(const OptimizerSnapshot& s, const TensorSnapshot& t);

// The largest global step a snapshot may hold: 2^53, so that it is exact in a double
// (Python and JSON readers).
inline constexpr int64_t kMaxSnapshotStep = int64_t{1} << 53;

}  // namespace tandem
