// The gradient pre-pass: the exact sum of squares over every gradient and a non-finite
// flag (Note [Exact sum of squares] in engine/exact_sum.h). The host version below and the
// GPU's (cuda/grad_norm.cu) give the same bits for the same gradients, whatever the
// thread count or the sharding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/exact_sum.h"
#include "tandem/types.h"

namespace tandem::cpu {

struct HostGrad {
  const void* ptr;
  size_t n;
  DType dtype;
  uint64_t run = 0;  // elements per run (offload::NormRun); 0: the whole tensor
};

struct NormResult {
  double sum_squares = 0;  // `exact` rounded to double
  bool nonfinite = false;
  exact::Acc exact{};      // normalized
};

// The pieces of one run of `run` elements: pieces of at most exact::kNormPiece elements
// from the run's start.
inline uint64_t PiecesPerRun(uint64_t run) {
  return (run + exact::kNormPiece - 1) / exact::kNormPiece;
}

// The sum of x*x over n elements of `dtype` at `ptr`, in the order of Note [Exact sum of
// squares] (32 lanes, then a fixed tree); NaN or infinite if an element is.
double PieceSquares(const void* ptr, DType dtype, uint64_t n);

// Runs on the calling thread's current TBB arena (parallel_for over fixed pieces).
NormResult HostGradNorm(const std::vector<HostGrad>& grads);

}  // namespace tandem::cpu
