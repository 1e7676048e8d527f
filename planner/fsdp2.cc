// FSDP2 shards as the planner models them: rank 0's rows, the shard-safe group rule's
// f32 moments, and the unsharded working set of the units in flight.
#include <algorithm>
#include <map>
#include <optional>

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

std::vector<TensorSpec> RankSpecs(const std::vector<TensorSpec>& specs,
                                  const std::vector<bool>& f32_moments, const OptimizerConfig& cfg) {
  const StateFormats f32 = F32MomentFormats(cfg.formats);
  std::vector<TensorSpec> with_formats = specs;
  if (f32 == cfg.formats) return with_formats;
  // The flagged tensors with their own formats (TensorSpec::formats), as tandem.torch
  // builds the optimizer under FSDP2.
  for (size_t t = 0; t < specs.size() && t < f32_moments.size(); ++t)
    if (f32_moments[t]) with_formats[t].formats = f32;
  return with_formats;
}

ResolvedPlacement ResolveRankPlacement(const std::vector<TensorSpec>& specs,
                                       const std::vector<bool>& f32_moments,
                                       const OptimizerConfig& cfg) {
  // The plan hands a share it resolved itself; auto (a caller's) reads the rate cache.
  const std::optional<MachineRates> rates =
      cfg.offload_compute == kOffloadComputeAuto ? RatesFor(specs, cfg) : std::nullopt;
  return ResolvePlacement(RankSpecs(specs, f32_moments, cfg), cfg, ExecutionMode::kGpu,
                          rates ? &*rates : nullptr);
}

uint64_t GradientsInFlight(const PlanInputs& in, const std::vector<TensorSpec>& specs) {
  // Per release group (a block, or a tensor outside the blocks): its elements on rank 0.
  uint64_t root = 0, largest_outside = 0;
  std::map<int, uint64_t> blocks;
  for (size_t t = 0; t < specs.size(); ++t) {
    const int layer = in.model.tensors[t].layer;
    if (layer >= 0) {
      blocks[layer] += specs[t].numel;
    } else {
      root += specs[t].numel;
      largest_outside = std::max(largest_outside, specs[t].numel);
    }
  }
  uint64_t block = 0;
  for (const auto& [layer, n] : blocks) block = std::max(block, n);
  if (!in.fsdp2) return std::max(block, largest_outside);
  // FSDP2 reduce-scatters a group into one buffer that lives until every gradient in it
  // was taken: the blocks in flight, or the root unit's (its gradients arrive together,
  // at the end of backward).
  const uint64_t in_flight = std::min<uint64_t>(in.fsdp2_blocks_in_flight, blocks.size());
  return std::max(in_flight * block, root);
}

MemoryReport PredictRankMemory(const std::vector<TensorSpec>& specs,
                               const std::vector<bool>& f32_moments, const OptimizerConfig& cfg) {
  return ResolveRankPlacement(specs, f32_moments, cfg).memory;
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
