// The two halves of ValidateSnapshot, for readers that hold one tensor's arrays at a time
// (the checkpoint verifier). ValidateSnapshot(s) is exactly ValidateSnapshotLayout(s)
// followed by ValidateTensorState(s, t) for every tensor t in order; likewise
// ValidateRestorable(s) is ValidateRestorableLayout(s) then ValidateRestorableTensor(s, t)
// for every t. Thread-safe (pure).
#pragma once

#include <cstdint>
#include <string>

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

// Why tensor state is refused whose SGD group and momentum arrays disagree (held: the
// tensor has a momentum buffer; the group's momentum says the opposite): "group G has SGD
// momentum M, which keeps a momentum buffer, but the tensor has none (...)" or "... keeps
// no momentum buffer, but the tensor has one (...)". ValidateTensorState and the
// checkpoint manifest's check say it alike.
std::string SgdMomentumMismatch(uint32_t group, double momentum, bool held);

// The largest global step a snapshot may hold: 2^53, so that it is exact in a double
// (Python and JSON readers).
inline constexpr int64_t kMaxSnapshotStep = int64_t{1} << 53;

// The largest global step a run may be restored at: 2^52, which leaves 2^52 more steps
// (far more than any run takes) before the state can no longer be saved.
inline constexpr int64_t kMaxRestoreStep = int64_t{1} << 52;
static_assert(kMaxRestoreStep <= kMaxSnapshotStep / 2, "a restored run must be able to go on");

// The global step at most kMaxRestoreStep. Throws Error(kInvalidArgument).
void ValidateRestorableLayout(const OptimizerSnapshot& s);

// Every value of t survives the next step, as the step decodes and uses it: a q8 variance
// decodes to u = (code / 255) * scale and the step squares it, so a large scale with a
// large code (e.g. the largest finite bf16 with code 255) gives an infinite variance
// (ConvertSnapshot to fp32 refuses the same state); Adam's and AdamW's first moment is
// divided by sqrt(v) + eps, so a moment near the largest float over a small variance
// (e.g. a q8 scale at the largest finite bf16 with code 127) gives an infinite update
// whatever the gradient and learning rate (f32 or q8 moments alike). LoadCheckpoint
// applies this check, HybridOptimizer::Restore all of ValidateRestorable. Requires
// ValidateTensorState(s, t) to have passed. Throws Error(kInvalidArgument) naming the
// tensor, the arrays and elements.
void ValidateRestorableTensor(const OptimizerSnapshot& s, const TensorSnapshot& t);

}  // namespace tandem
