// Note [Grain]: the elements one unit of parallel work takes, wherever the engine cuts a
// loop over elements into tasks (snapshot checks, the speculation's pieces, the host
// driver's pieces, reloads, the GPU pre-pass's blocks, benchmarks' host loops): large
// enough that a task's scheduling costs nothing next to its work (a few microseconds),
// small enough to spread one large tensor over every thread, and a whole number of
// quantization groups, so that a unit never splits a group. No result depends on it (the
// bytes written never depend on how the work is cut), only speed.
#pragma once

#include <cstdint>

#include "tandem/types.h"

namespace tandem {

inline constexpr uint64_t kGrainElements = uint64_t{1} << 16;
static_assert(kGrainElements % kQuantGroup == 0, "a unit of work never splits a group");

}  // namespace tandem
