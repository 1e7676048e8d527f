// The optimizer configuration the gradient-release tests (release_host_test.cc,
// release_gpu_test.cc) step with: small chunks and streamed pieces so a few thousand
// elements cross every boundary, two groups with different hyper-parameters.
#pragma once

#include <cstdint>

#include "tandem/config.h"

namespace tandem::testing {

// An in-place budget (OptimizerConfig::in_place_grad_bytes) that holds the model's
// smaller gradients one or two at a time, and not its largest (tests/offload/
// hybrid_fixture.h: 9000 bf16 elements).
constexpr uint64_t kSomeInPlaceBytes = 6000;

// in_place: OptimizerConfig::in_place_grad_bytes.
inline OptimizerConfig ReleaseTestConfig(ExecutionMode mode, double fraction, double share,
                                         bool release, bool speculative, uint64_t in_place = 0) {
  OptimizerConfig c;
  c.algorithm = Algorithm::kAdamW;
  c.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kF32};
  c.offload_fraction = fraction;
  c.offload_compute = share;
  c.stream_chunk_bytes = 4096;
  c.chunk_elements = 256;
  c.host_threads = 2;
  c.pipeline_slots = 2;
  c.mode = mode;
  c.release_grads = release;
  c.speculative_early_start = speculative;
  c.in_place_grad_bytes = in_place;
  c.groups.resize(2);
  c.groups[0].weight_decay = 0.01;
  c.groups[1].lr_scale = 0.5;
  return c;
}

}  // namespace tandem::testing
