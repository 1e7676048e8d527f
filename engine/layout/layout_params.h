// LayoutParams: what the optimizer's memory layout reads of its configuration, and
// nothing else: the state each group keeps and the sizes of the executors' chunks, slots
// and speculation budgets. Each field is OptimizerConfig's of the same name (its default
// and requirements are there, tandem/config.h); LayoutParamsOf copies them, so the values
// are only ever the configuration's.
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/config.h"

namespace tandem::layout {

struct LayoutParams {
  Algorithm algorithm{};
  // Per group, whether it keeps a momentum buffer (HasMomentum); TensorSpec::group indexes it.
  std::vector<HyperParams> groups;
  uint64_t chunk_elements = 0;            // the offload pipeline's chunk
  int pipeline_slots = 0;                 // its gradient (and parameter) slots
  uint64_t stream_chunk_bytes = 0;        // the most bytes a streamed chunk holds
  int stream_slots = 0;                   // device slots chunks stream through
  bool release_grads = false;             // gradient release's buffers
  bool speculative_early_start = false;   // speculation's backups and spares
  uint64_t speculative_host_bytes = 0;    // Note [Host speculation budget]
  uint64_t speculative_stream_bytes = 0;
};

inline LayoutParams LayoutParamsOf(const OptimizerConfig& cfg) {
  LayoutParams p;
  p.algorithm = cfg.algorithm;
  p.groups = cfg.groups;
  p.chunk_elements = cfg.chunk_elements;
  p.pipeline_slots = cfg.pipeline_slots;
  p.stream_chunk_bytes = cfg.stream_chunk_bytes;
  p.stream_slots = cfg.stream_slots;
  p.release_grads = cfg.release_grads;
  p.speculative_early_start = cfg.speculative_early_start;
  p.speculative_host_bytes = cfg.speculative_host_bytes;
  p.speculative_stream_bytes = cfg.speculative_stream_bytes;
  return p;
}

}  // namespace tandem::layout
