// The one placement decision (tandem/resolve_placement.h).
#include "tandem/resolve_placement.h"

#include <memory>
#include <string>
#include <utility>

#include "engine/layout/memory_plan.h"
#include "engine/layout/stream_layout.h"
#include "engine/layout/tensor_rules.h"
#include "engine/resolve_sizes.h"
#include "tandem/error.h"

namespace tandem {
namespace {

void CheckGroups(const std::vector<TensorSpec>& tensors, const OptimizerConfig& config) {
  for (const TensorSpec& s : tensors)
    if (s.group >= config.groups.size())
      throw Error(ErrorKind::kInvalidArgument,
                  "tensor '" + s.name + "': group " + std::to_string(s.group) + " out of range");
}

std::vector<uint64_t> Numels(const std::vector<TensorSpec>& tensors) {
  std::vector<uint64_t> numels;
  numels.reserve(tensors.size());
  for (const TensorSpec& s : tensors) numels.push_back(s.numel);
  return numels;
}

// DecidePlacement with the tensors' effective formats (layout::TensorFormats) given, so
// that Resolve computes them once for the decision and the plan.
PlacementDecision Decide(const std::vector<TensorSpec>& tensors,
                         const std::vector<StateFormats>& formats, const OptimizerConfig& config,
                         ExecutionMode mode, const MachineRates* rates) {
  const bool gpu = mode == ExecutionMode::kGpu;
  const std::vector<uint64_t> numels = Numels(tensors);
  const double asked = config.offload_compute;
  PlacementDecision r;
  r.placement = ComputePlacement(numels, config.offload_fraction, config.placement);
  // Where the host-resident elements are computed (Note [Three placement classes]), from
  // Note [The compute share's input] in engine/layout/stream_layout.h.
  double share = 0.0;
  if (r.placement.offloaded > 0 && !(asked == kOffloadComputeAuto && !gpu)) {
    const ComputeSplitInput in =
        layout::SplitInput(tensors, formats, layout::LayoutParamsOf(config), r.placement);
    if (asked == kOffloadComputeAuto) {
      if (rates == nullptr)
        throw Error(ErrorKind::kInvalidArgument,
                    "offload_compute is auto in GPU mode, but no machine rates are known for "
                    "this setting: set OptimizerConfig::machine_rates (tandem-bench calibrate "
                    "measures them), build an optimizer of this setting first (it measures "
                    "them into its RateCache), or give offload_compute a share");
      r.split = ChooseSplit(in, *rates);
      share = r.split.share;
    } else {
      share = asked;
      if (rates != nullptr) r.split = PredictSplit(in, *rates, share);
    }
  }
  if (share > 0)
    r.placement = ComputePlacement(numels, config.offload_fraction, config.placement, share);
  return r;
}

ResolvedPlacement Resolve(const std::vector<TensorSpec>& tensors, const OptimizerConfig& config,
                          ExecutionMode mode, const MachineRates* rates, bool sizes_only) {
  CheckGroups(tensors, config);
  const std::vector<StateFormats> formats = layout::TensorFormats(tensors, config);
  PlacementDecision decided = Decide(tensors, formats, config, mode, rates);
  const bool gpu = mode == ExecutionMode::kGpu;
  ResolvedPlacement r;
  r.placement = std::move(decided.placement);
  r.split = decided.split;
  auto plan = std::make_shared<layout::MemoryPlan>(layout::PlanMemory(
      tensors, formats, layout::LayoutParamsOf(config), r.placement, gpu, sizes_only));
  r.memory = plan->report;
  r.memory.host_budget = config.pinned_budget_bytes;
  if (gpu) layout::AddPlanMetadata(tensors, formats, r.placement, *plan, &r.memory);
  r.plan = std::move(plan);
  return r;
}

}  // namespace

PlacementDecision DecidePlacement(const std::vector<TensorSpec>& tensors,
                                  const OptimizerConfig& config, ExecutionMode mode,
                                  const MachineRates* rates) {
  CheckGroups(tensors, config);
  return Decide(tensors, layout::TensorFormats(tensors, config), config, mode, rates);
}

ResolvedPlacement ResolvePlacement(const std::vector<TensorSpec>& tensors,
                                   const OptimizerConfig& config, ExecutionMode mode,
                                   const MachineRates* rates) {
  return Resolve(tensors, config, mode, rates, /*sizes_only=*/false);
}

ResolvedPlacement ResolvePlacementSizes(const std::vector<TensorSpec>& tensors,
                                        const OptimizerConfig& config, ExecutionMode mode,
                                        const MachineRates* rates) {
  return Resolve(tensors, config, mode, rates, /*sizes_only=*/true);
}

RateCache::Key RateKeyFor(const std::vector<TensorSpec>& tensors, const OptimizerConfig& config) {
  CheckGroups(tensors, config);
  RateCache::Key key;
  key.algorithm = config.algorithm;
  key.formats = config.formats;
  key.host_threads = config.host_threads;
  key.host_cpus = config.host_cpus;
  key.chunk_elements = config.chunk_elements;
  if (tensors.empty()) return key;
  // The rates are those of the share-0 placement's largest host-resident tensor (the host
  // kernel) and of its average HBM bytes per element (the fused kernel).
  const Placement base =
      ComputePlacement(Numels(tensors), config.offload_fraction, config.placement);
  const size_t big = LargestHostTensor(base);
  key.formats = layout::EffectiveFormats(tensors[big], config);
  key.param_dtype = tensors[big].param_dtype;
  (void)layout::SplitInput(tensors, layout::TensorFormats(tensors, config),
                           layout::LayoutParamsOf(config), base, &key.kernel_bytes);
  return key;
}

std::optional<MachineRates> RatesFor(const std::vector<TensorSpec>& tensors,
                                     const OptimizerConfig& config) {
  if (config.machine_rates) return config.machine_rates;
  const RateCache& cache = config.rate_cache ? *config.rate_cache : DefaultRateCache();
  return cache.Find(RateKeyFor(tensors, config));
}

MemoryReport PredictMemory(const std::vector<TensorSpec>& tensors, const OptimizerConfig& config,
                           ExecutionMode mode) {
  const std::optional<MachineRates> rates = RatesFor(tensors, config);
  return ResolvePlacement(tensors, config, mode, rates ? &*rates : nullptr).memory;
}

}  // namespace tandem
