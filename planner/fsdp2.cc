// FSDP2 shards as the planner models them: rank 0's rows, the shard-safe group rule's
// f32 moments, and the unsharded working set of the units in flight.
#include <algorithm>
#include <map>

#include "planner/plan.h"
#include "tandem/error.h"

namespace tandem::planner {

uint64_t Fsdp2Rows(uint64_t rows, uint64_t ranks) { return (rows + ranks - 1) / ranks; }

uint64_t Fsdp2ShardNumel(const ModelTensor& t, uint64_t ranks) {
  const uint64_t rows = t.shape.empty() ? t.numel : t.shape[0];
  if (rows == 0) return 0;
  return Fsdp2Rows(rows, ranks) * (t.numel / rows);
}

bool GroupSafe(const ModelTensor& t) {
  return t.shape.size() >= 2 && t.shape.back() % kQuantGroup == 0;
}

StateFormats F32MomentFormats(StateFormats f) {
  if (f.momentum == MomentFormat::kQ8) f.momentum = MomentFormat::kF32;
  if (f.variance == MomentFormat::kQ8) f.variance = MomentFormat::kF32;
  return f;
}

std::vector<bool> F32MomentTensors(const PlanInputs& in) {
  std::vector<bool> f32(in.model.tensors.size(), false);
  const bool q8 =
      in.formats.momentum == MomentFormat::kQ8 || in.formats.variance == MomentFormat::kQ8;
  if (!in.fsdp2 || !q8) return f32;
  for (size_t t = 0; t < f32.size(); ++t) f32[t] = !GroupSafe(in.model.tensors[t]);
  return f32;
}

MemoryReport PredictRankMemory(const std::vector<TensorSpec>& specs,
                               const std::vector<bool>& f32_moments, const OptimizerConfig& cfg) {
  MemoryReport r = PredictMemory(specs, cfg, ExecutionMode::kGpu);
  const StateFormats f32 = F32MomentFormats(cfg.formats);
  if (f32 == cfg.formats ||
      std::none_of(f32_moments.begin(), f32_moments.end(), [](bool b) { return b; }))
    return r;
  // The engine's placement over all tensors, then the flagged tensors' parts on their own.
  std::vector<uint64_t> numels;
  for (const TensorSpec& s : specs) numels.push_back(s.numel);
  const Placement p = ComputePlacement(numels, cfg.offload_fraction, cfg.placement);
  std::vector<TensorSpec> hot, cold;
  for (size_t t = 0; t < specs.size(); ++t) {
    if (!f32_moments[t]) continue;
    TensorSpec s = specs[t];
    s.shape.clear();
    s.numel = p.tensors[t].device_count;
    if (s.numel > 0) hot.push_back(s);
    s.numel = p.tensors[t].host_count();
    if (s.numel > 0) cold.push_back(s);
  }
  // Fraction 0 puts a list wholly on the GPU, fraction 1 wholly on the host; the moment
  // and scale bytes of a part depend only on its count and formats (offload/state_layout).
  auto replace = [&](const std::vector<TensorSpec>& parts, double fraction,
                     MemoryReport::Bytes MemoryReport::*side) {
    if (parts.empty()) return;
    OptimizerConfig c = cfg;
    c.offload_fraction = fraction;
    c.speculative_early_start = false;
    const MemoryReport q8 = PredictMemory(parts, c, ExecutionMode::kGpu);
    c.formats = f32;
    const MemoryReport wide = PredictMemory(parts, c, ExecutionMode::kGpu);
    MemoryReport::Bytes& b = r.*side;
    b.momentum = b.momentum + (wide.*side).momentum - (q8.*side).momentum;
    b.variance = b.variance + (wide.*side).variance - (q8.*side).variance;
    b.scales = b.scales + (wide.*side).scales - (q8.*side).scales;
  };
  replace(hot, 0.0, &MemoryReport::device);
  replace(cold, 1.0, &MemoryReport::host);
  return r;
}

uint64_t Fsdp2UnshardedBytes(const PlanInputs& in) {
  uint64_t root = 0;
  std::map<int, uint64_t> blocks;
  for (const ModelTensor& t : in.model.tensors) (t.layer < 0 ? root : blocks[t.layer]) += t.numel;
  uint64_t largest = 0;
  for (const auto& [layer, n] : blocks) largest = std::max(largest, n);
  const uint64_t in_flight = std::min<uint64_t>(in.fsdp2_blocks_in_flight, blocks.size());
  return (root + in_flight * largest) * (DTypeSize(in.param_dtype) + DTypeSize(in.grad_dtype));
}

}  // namespace tandem::planner
