#include "tandem/rate_cache.h"

#include "tandem/error.h"

namespace tandem {
namespace {
// The process's cache (tandem/rate_cache.h): an object of namespace scope, so that every
// optimizer without a cache of its own shares it and the caller can reach it.
RateCache g_default_rate_cache;
}  // namespace

RateCache& DefaultRateCache() { return g_default_rate_cache; }

std::optional<MachineRates> RateCache::Find(const Key& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, r] : entries_)
    if (k == key) return r;
  return std::nullopt;
}

MachineRates RateCache::FindOrMeasure(const Key& key,
                                      const std::function<MachineRates()>& measure) {
  if (const std::optional<MachineRates> r = Find(key)) return *r;
  std::lock_guard<std::mutex> one_at_a_time(measure_mu_);
  if (const std::optional<MachineRates> r = Find(key)) return *r;  // measured meanwhile
  const MachineRates measured = measure();
  Store(key, measured);
  return measured;
}

void RateCache::Store(const Key& key, const MachineRates& rates) {
  if (!rates.valid())
    throw Error(ErrorKind::kInvalidArgument,
                "RateCache::Store: machine rates must all be finite and > 0");
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [k, r] : entries_)
    if (k == key) {
      r = rates;
      return;
    }
  entries_.emplace_back(key, rates);
}

std::vector<std::pair<RateCache::Key, MachineRates>> RateCache::Entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

void RateCache::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
}

}  // namespace tandem
