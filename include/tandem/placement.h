// Placement: where each element's optimizer state lives and where it is computed (Note
// [Three placement classes] in tandem/compute_split.h).
//
// Each tensor is split into a GPU-resident prefix [0, device_count) and a host-resident
// suffix [device_count, numel); the host-resident suffix is split again into a streamed
// part [device_count, device_count + stream_count), computed by the GPU kernel, and the
// rest, computed on the host. Every cut is a multiple of kQuantGroup (or the tensor's end)
// so that no quantization group straddles it (Note [Group size] in tandem/types.h). The
// offloaded element count meets round(fraction * total) to within one group (< 32
// elements), and exactly for fractions 0 and 1; the streamed count meets
// round(share * offloaded) the same way.
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
  uint64_t device_count = 0;  // elements [0, device_count): state on the GPU
  uint64_t stream_count = 0;  // the next stream_count: state on the host, computed on the GPU
  uint64_t host_count() const { return numel - device_count; }  // state on the host
  uint64_t host_compute_count() const { return numel - device_count - stream_count; }
};

struct Placement {
  std::vector<TensorPlacement> tensors;  // in registration order
  uint64_t total = 0;
  uint64_t offloaded = 0;  // sum of host_count()
  uint64_t target = 0;     // round(fraction * total)
  uint64_t streamed = 0;   // sum of stream_count
  double stream_share = 0; // the share it was computed for
};

// fraction and stream_share must be in [0, 1] (Error(kInvalidArgument) otherwise). The
// streamed elements are the first round(stream_share * offloaded) host-resident elements
// in registration order (the host computes the tensors whose gradients arrive first in
// backward, which early start can overlap with backward).
Placement ComputePlacement(const std::vector<uint64_t>& numels, double fraction,
                           PlacementPolicy policy, double stream_share = 0.0);

// The tensor with the most host-resident elements (the first of equals; 0 when there are
// no tensors): the one whose formats the measured host rate is for.
size_t LargestHostTensor(const Placement& p);

}  // namespace tandem
