#include "tandem/placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "tandem/error.h"
#include "tandem/types.h"

namespace tandem {

const char* Name(PlacementPolicy p) noexcept {
  switch (p) {
    case PlacementPolicy::kBackwardOrder: return "backward_order";
    case PlacementPolicy::kForwardOrder: return "forward_order";
    case PlacementPolicy::kLargestFirst: return "largest_first";
  }
  return "?";
}

PlacementPolicy ParsePlacementPolicy(std::string_view s) {
  for (PlacementPolicy p : {PlacementPolicy::kBackwardOrder, PlacementPolicy::kForwardOrder,
                            PlacementPolicy::kLargestFirst})
    if (s == Name(p)) return p;
  throw Error(ErrorKind::kInvalidArgument,
              "unknown placement policy '" + std::string(s) +
                  "' (expected backward_order, forward_order or largest_first)");
}

Placement ComputePlacement(const std::vector<uint64_t>& numels, double fraction,
                           PlacementPolicy policy, double stream_share) {
  if (!(stream_share >= 0.0 && stream_share <= 1.0))
    throw Error(ErrorKind::kInvalidArgument,
                "offload_compute share must be in [0, 1], got " + std::to_string(stream_share));
  if (!(fraction >= 0.0 && fraction <= 1.0))
    throw Error(ErrorKind::kInvalidArgument,
                "offload_fraction must be in [0, 1], got " + std::to_string(fraction));
  Placement p;
  p.tensors.resize(numels.size());
  for (size_t i = 0; i < numels.size(); ++i) {
    p.tensors[i].numel = numels[i];
    p.tensors[i].device_count = numels[i];
    p.total += numels[i];
  }
  p.target = fraction >= 1.0 ? p.total
                             : static_cast<uint64_t>(std::llround(fraction * double(p.total)));
  std::vector<size_t> order(numels.size());
  std::iota(order.begin(), order.end(), size_t{0});
  switch (policy) {
    case PlacementPolicy::kBackwardOrder: std::reverse(order.begin(), order.end()); break;
    case PlacementPolicy::kForwardOrder: break;
    case PlacementPolicy::kLargestFirst:
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return numels[a] > numels[b]; });
      break;
    default:
      throw Error(ErrorKind::kInvalidArgument, "unknown placement policy value " +
                                                   std::to_string(static_cast<int>(policy)));
  }
  uint64_t need = p.target;
  for (size_t i : order) {
    if (need == 0) break;
    TensorPlacement& t = p.tensors[i];
    if (t.numel <= need) {  // offload the whole tensor
      t.device_count = 0;
      need -= t.numel;
      continue;
    }
    // Cut inside this tensor at the group boundary nearest to numel - need.
    const uint64_t g = kQuantGroup;
    const uint64_t ideal = t.numel - need;
    uint64_t cut = (ideal + g / 2) / g * g;
    cut = std::min(cut, t.numel);
    t.device_count = cut;
    need = 0;
  }
  for (const TensorPlacement& t : p.tensors) p.offloaded += t.host_count();
  // The streamed part: the first host-resident elements in registration order.
  p.stream_share = stream_share;
  uint64_t stream = stream_share >= 1.0
                        ? p.offloaded
                        : static_cast<uint64_t>(std::llround(stream_share * double(p.offloaded)));
  for (TensorPlacement& t : p.tensors) {
    if (stream == 0) break;
    const uint64_t host = t.host_count();
    if (host <= stream) {
      t.stream_count = host;
      stream -= host;
      continue;
    }
    const uint64_t g = kQuantGroup;
    t.stream_count = std::min(host, (stream + g / 2) / g * g);
    stream = 0;
  }
  for (const TensorPlacement& t : p.tensors) p.streamed += t.stream_count;
  return p;
}

size_t LargestHostTensor(const Placement& p) {
  size_t big = 0;
  for (size_t t = 0; t < p.tensors.size(); ++t)
    if (p.tensors[t].host_count() > p.tensors[big].host_count()) big = t;
  return big;
}

}  // namespace tandem
