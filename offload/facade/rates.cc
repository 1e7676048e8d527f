// HybridOptimizer::Impl: the rates offload_compute = auto decides with (tandem/
// rate_cache.h), measured once per setting into the rate cache.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "engine/layout/state_layout.h"
#include "engine/tensor_state.h"
#include "offload/facade/impl.h"
#include "tandem/compute_split.h"

namespace tandem {

using Clock = std::chrono::steady_clock;

namespace {

// Bytes of the host's last-level caches together (every distinct L3 instance, from
// sysfs), 0 when unknown.
uint64_t LastLevelCacheBytes() {
  std::set<std::string> seen;
  uint64_t total = 0;
  for (int cpu = 0;; ++cpu) {
    const std::string dir =
        "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cache/index3/";
    std::ifstream size(dir + "size"), shared(dir + "shared_cpu_list");
    if (!size || !shared) {
      if (cpu == 0 || !std::ifstream("/sys/devices/system/cpu/cpu" + std::to_string(cpu)))
        return total;
      continue;  // a CPU without an L3 entry
    }
    std::string text, list;
    size >> text;
    shared >> list;
    if (!seen.insert(list).second) continue;
    uint64_t kib = 0;
    for (char c : text)
      if (c >= '0' && c <= '9') kib = kib * 10 + static_cast<uint64_t>(c - '0');
    total += text.find('M') != std::string::npos ? kib << 20 : kib << 10;
  }
}

}  // namespace

// The host kernel's rate on this optimizer's threads for the rate key's formats and
// parameter dtype (those of the largest host-resident tensor, with its group's
// hyper-parameters), bf16 gradients, stepped chunk by chunk as the pipeline steps them,
// best of four runs, as the model takes it: under the pipeline's own DMA traffic
// (HostRateUnderDma). Its state, gradient and parameter take at least four times the
// host's last-level caches and 512 MiB (Note [The node is one machine] in
// tandem/compute_split.h): a probe that fits in cache measures the cache, not the DRAM
// the step streams through (with 8M elements, 128 MiB of fp32 AdamW state, auto predicted
// 330 ms for a step of Llama-3-8B at fraction 0.5 on a 64-core host, which took 918 ms:
// docs/planner.md "Auto's own rates").
double HybridOptimizer::Impl::ProbeHostRate(const RateCache::Key& key) {
  std::vector<uint64_t> numels;
  for (const TensorSpec& t : specs_) numels.push_back(t.numel);
  const TensorSpec& s =
      specs_[LargestHostTensor(ComputePlacement(numels, cfg_.offload_fraction, cfg_.placement))];
  // key.kernel_bytes = gradient + separate parameter + 2 x state: the footprint is about
  // half of it plus the gradient and parameter again.
  const double footprint =
      0.5 * (key.kernel_bytes + 2.0 + static_cast<double>(DTypeSize(key.param_dtype)));
  const uint64_t want = std::max<uint64_t>(uint64_t{512} << 20, 4 * LastLevelCacheBytes());
  const size_t n = std::max<size_t>(
      size_t{1} << 23, static_cast<size_t>(static_cast<double>(want) / std::max(footprint, 1.0)));
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
  return HostRateUnderDma(best, key.kernel_bytes, 2.0,
                          static_cast<double>(DTypeSize(key.param_dtype)));
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
