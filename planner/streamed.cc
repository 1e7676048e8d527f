// Memory of a placement with streamed elements (Note [Three placement classes] in
// tandem/compute_split.h), from PredictMemory on the parts of each class.
#include "planner/plan.h"

namespace tandem::planner {

MemoryReport PredictStreamedRankMemory(const std::vector<TensorSpec>& specs,
                                       const std::vector<bool>& f32_moments,
                                       const OptimizerConfig& cfg, const Placement& placement,
                                       uint64_t stream_slot_bytes) {
  // The GPU side (GPU-resident state, kernel tables) does not depend on the split.
  MemoryReport r = PredictRankMemory(specs, f32_moments, cfg);
  if (placement.streamed == 0) return r;
  // Each class's parts on their own: fraction 1 puts a list wholly on the host (the
  // host-computed parts: full master, pipeline staging, speculation), fraction 0 wholly
  // on the GPU (the streamed parts: their arrays as a GPU-resident part has them, the
  // master less what aliases the parameter). Arrays are carved per part either way.
  std::vector<TensorSpec> computed, streamed;
  std::vector<bool> computed_f32, streamed_f32;
  for (size_t t = 0; t < specs.size(); ++t) {
    TensorSpec s = specs[t];
    s.shape.clear();
    s.numel = placement.tensors[t].host_compute_count();
    if (s.numel > 0) computed.push_back(s), computed_f32.push_back(f32_moments[t]);
    s.numel = placement.tensors[t].stream_count;
    if (s.numel > 0) streamed.push_back(s), streamed_f32.push_back(f32_moments[t]);
  }
  MemoryReport::Bytes host;
  host.metadata = r.host.metadata;  // the pre-pass result, whatever the split
  if (!computed.empty()) {
    OptimizerConfig c = cfg;
    c.offload_fraction = 1.0;
    const MemoryReport::Bytes h = PredictRankMemory(computed, computed_f32, c).host;
    host.master = h.master;
    host.correction = h.correction;
    host.momentum = h.momentum;
    host.variance = h.variance;
    host.scales = h.scales;
    host.staging = h.staging;
    host.speculation = h.speculation;
  }
  OptimizerConfig c = cfg;
  c.offload_fraction = 0.0;
  c.speculative_early_start = false;
  const MemoryReport::Bytes s = PredictRankMemory(streamed, streamed_f32, c).device;
  host.master += s.master;
  host.correction += s.correction;
  host.momentum += s.momentum;
  host.variance += s.variance;
  host.scales += s.scales;
  r.host = host;
  r.device.staging += stream_slot_bytes;
  return r;
}

}  // namespace tandem::planner
