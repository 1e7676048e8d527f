// The gradient pre-pass of host mode: global sum of squares (in double) and a non-finite
// flag over every gradient, deterministic for a given set of tensors whatever the thread
// count: fixed pieces, each summed in order, then the pieces summed in index order.
#pragma once

#include <cstddef>
#include <vector>

#include "tandem/types.h"

namespace tandem::offload {

struct HostGrad {
  const void* ptr;
  size_t n;
  DType dtype;
};

struct NormResult {
  double sum_squares = 0;
  bool nonfinite = false;
};

// Runs on the calling thread's current TBB arena (parallel_for over fixed pieces).
NormResult HostGradNorm(const std::vector<HostGrad>& grads);

}  // namespace tandem::offload
