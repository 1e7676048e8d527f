// Placement: which elements of each tensor are stepped on the GPU and which on the host.
//
// Each tensor is split into a GPU prefix [0, device_count) and a host suffix
// [device_count, numel); the cut is a multiple of kQuantGroup so that no quantization group
// straddles it (Note [Group size] in tandem/types.h). The offloaded element count meets
// round(fraction * total) to within one group (< 32 elements), and exactly for fractions
// 0 and 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tandem {

enum class PlacementPolicy : uint8_t {
  // Offload the tensors whose gradients arrive first in backward: the last tensors in
  // registration (forward) order, so their host work overlaps the rest of backward.
  kBackwardOrder = 0,
  kForwardOrder = 1,  // offload the first tensors in registration order
  kLargestFirst = 2,  // offload the largest tensors first (ties: earlier registered first)
};

const char* Name(PlacementPolicy p) noexcept;  // "backward_order", "forward_order", "largest_first"
PlacementPolicy ParsePlacementPolicy(std::string_view s);  // throws Error(kInvalidArgument)

struct TensorPlacement {
  uint64_t numel = 0;
  uint64_t device_count = 0;  // elements [0, device_count) on the GPU
  uint64_t host_count() const { return numel - device_count; }
};

struct Placement {
  std::vector<TensorPlacement> tensors;  // in registration order
  uint64_t total = 0;
  uint64_t offloaded = 0;  // sum of host_count()
  uint64_t target = 0;     // round(fraction * total)
};

// fraction must be in [0, 1] (Error(kInvalidArgument) otherwise).
Placement ComputePlacement(const std::vector<uint64_t>& numels, double fraction,
                           PlacementPolicy policy);

}  // namespace tandem
