// HybridOptimizer::Impl: the rates offload_compute = auto decides with (tandem/
// rate_cache.h), measured once per setting into the rate cache.
#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/layout/state_layout.h"
#include "engine/tensor_state.h"
#include "offload/facade/impl.h"

namespace tandem {

using Clock = std::chrono::steady_clock;

// The host kernel's rate on this optimizer's threads for the rate key's formats and
// parameter dtype (those of the largest host-resident tensor, with its group's
// hyper-parameters), bf16 gradients: 8M elements stepped chunk by chunk, as the pipeline
// steps them, best of four runs.
double HybridOptimizer::Impl::ProbeHostRate(const RateCache::Key& key) {
  std::vector<uint64_t> numels;
  for (const TensorSpec& t : specs_) numels.push_back(t.numel);
  const TensorSpec& s =
      specs_[LargestHostTensor(ComputePlacement(numels, cfg_.offload_fraction, cfg_.placement))];
  const size_t n = size_t{1} << 23;
  std::vector<float> init(n, 0.5f);
  const HyperParams& h = cfg_.groups[s.group];
  TensorState state(cfg_.algorithm, h, key.formats, init.data(), n);
  std::vector<uint16_t> grad(n, 0x3c00);  // bf16 0.0078125
  std::vector<uint8_t> param(n * DTypeSize(key.param_dtype));
  const bool alias = layout::MasterAliases(key.formats.master, key.param_dtype);
  const StepScalars sc = GroupStepScalars(cfg_.algorithm, h, 1e-4, 1, 1.0);
  const size_t chunk = std::min<size_t>(n, cfg_.chunk_elements);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    for (size_t off = 0; off < n; off += chunk) {
      const size_t len = std::min(chunk, n - off);
      const cpu::HostWork w{
          &sc, state.Span(off, len, grad.data() + off, DType::kBF16,
                          alias ? nullptr : param.data() + off * DTypeSize(key.param_dtype),
                          key.param_dtype)};
      driver_.Run(&w, 1);
    }
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rep > 0) best = std::max(best, static_cast<double>(n) / sec / 1e9);
  }
  return best;
}

MachineRates HybridOptimizer::Impl::MeasureRates(const RateCache::Key& key) {
  MachineRates probed;
  gpu_->ProbeRates(uint64_t{64} << 20, key.kernel_bytes, &probed);
  probed.host_gparams = ProbeHostRate(key);
  return probed;
}

std::optional<MachineRates> HybridOptimizer::Impl::Rates() {
  if (cfg_.machine_rates) return cfg_.machine_rates;
  if (!gpu() || cfg_.offload_compute != kOffloadComputeAuto) return std::nullopt;
  std::vector<uint64_t> numels;
  for (const TensorSpec& t : specs_) numels.push_back(t.numel);
  if (ComputePlacement(numels, cfg_.offload_fraction, cfg_.placement).offloaded == 0)
    return std::nullopt;  // nothing offloaded: no share to choose
  RateCache& cache = cfg_.rate_cache ? *cfg_.rate_cache : DefaultRateCache();
  const RateCache::Key key = RateKeyFor(specs_, cfg_);
  return cache.FindOrMeasure(key, [&] { return MeasureRates(key); });
}

}  // namespace tandem
