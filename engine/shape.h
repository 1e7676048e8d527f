// The element count of a tensor's shape, the one place it is computed for checks
// (TensorSpec::shape against numel in the optimizer, TensorSnapshot::shape in
// ValidateSnapshot).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace tandem {

// The product of `shape`'s dimensions (1 for an empty shape), or nullopt when it does
// not fit in 64 bits.
inline std::optional<uint64_t> ShapeElements(const std::vector<uint64_t>& shape) {
  uint64_t product = 1;
  bool overflow = false;
  for (uint64_t d : shape) {
    if (d != 0 && product > std::numeric_limits<uint64_t>::max() / d) overflow = true;
    product *= d;
  }
  if (overflow) return std::nullopt;
  return product;
}

}  // namespace tandem
