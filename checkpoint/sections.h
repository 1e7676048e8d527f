// The map between a TensorSnapshot's arrays and section kinds. Thread-safe (pure).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "checkpoint/format.h"
#include "tandem/snapshot.h"

namespace tandem::ckpt {

// Stable name of a data kind ("master_f32", ..., "v_scales"); "manifest" for kManifest;
// "unknown" otherwise.
const char* KindName(SectionKind kind) noexcept;
std::optional<SectionKind> KindFromId(uint32_t id) noexcept;  // data kinds only

// Bytes per element of the arrays of a data kind.
size_t KindElementSize(SectionKind kind) noexcept;

// Whether kCheckpointCompression::kAuto tries to compress this kind (see the doc).
bool KindCompressesWell(SectionKind kind) noexcept;

// A read-only view of one array of a tensor.
struct ArrayView {
  const void* data;
  size_t bytes;
};
ArrayView ViewOf(const TensorSnapshot& t, SectionKind kind);

// Resizes the array of `kind` in `t` to `bytes / KindElementSize(kind)` elements and
// returns its storage. bytes must be a multiple of the element size.
void* ResizeArray(TensorSnapshot* t, SectionKind kind, size_t bytes);

}  // namespace tandem::ckpt
