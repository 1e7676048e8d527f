// RateCache: the machine rates that offload_compute = auto decides with (tandem/
// compute_split.h), measured once per setting and kept where the caller can see and reset
// them.
//
// An optimizer in GPU mode with offload_compute auto and no OptimizerConfig::machine_rates
// looks its setting (RateKeyFor in tandem/resolve_placement.h) up in its cache
// (OptimizerConfig::rate_cache, or the process's DefaultRateCache()): found, it decides
// with those rates; not found, it measures them (PCIe both ways at once, the fused
// kernel's HBM rate and the host kernel on the optimizer's threads: a few tens of ms) and
// stores them. PredictMemory and ResolvePlacement never measure: they read the same cache,
// so a prediction made after a construction is the placement that construction built.
//
//   auto rates = std::make_shared<tandem::RateCache>();
//   cfg.rate_cache = rates;                  // this job's measurements, kept apart
//   tandem::HybridOptimizer opt(specs, cfg);  // measures once into `rates`
//   for (const auto& [key, r] : rates->Entries()) ...;  // what was measured
//   rates->Reset();                          // the next construction measures again
//
// Thread safety: every method may be called from any thread at any time.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "tandem/compute_split.h"
#include "tandem/types.h"

namespace tandem {

class RateCache {
 public:
  // What measured rates depend on besides the machine: the host kernel's rate depends on
  // the algorithm, the formats and parameter dtype of the largest host-resident tensor,
  // the threads it runs on and the chunk it steps; the fused kernel's on its HBM bytes per
  // element. host_threads and host_cpus are as configured (OptimizerConfig).
  struct Key {
    Algorithm algorithm = Algorithm::kAdamW;
    StateFormats formats;
    DType param_dtype = DType::kBF16;
    int host_threads = 0;
    std::vector<int> host_cpus;
    uint64_t chunk_elements = 0;
    double kernel_bytes = 0;  // the fused kernel's HBM bytes per element

    friend bool operator==(const Key&, const Key&) = default;
  };

  // The rates stored for `key`, if any.
  std::optional<MachineRates> Find(const Key& key) const;
  // The rates stored for `key`; when there are none, `measure()` runs (one measurement at
  // a time per cache: a second caller of the same key waits for the first and takes its
  // result) and its result is stored. What `measure` throws propagates; nothing is stored
  // then.
  MachineRates FindOrMeasure(const Key& key, const std::function<MachineRates()>& measure);
  // Stores `rates` for `key` (replacing what was there). Error(kInvalidArgument) unless
  // rates.valid().
  void Store(const Key& key, const MachineRates& rates);
  // Every entry, in the order they were stored.
  std::vector<std::pair<Key, MachineRates>> Entries() const;
  // Forgets every entry: the next optimizer that needs rates measures them again.
  void Reset();

 private:
  mutable std::mutex mu_;  // guards entries_
  std::mutex measure_mu_;  // one measurement at a time
  std::vector<std::pair<Key, MachineRates>> entries_;
};

// The cache of optimizers whose OptimizerConfig::rate_cache is unset: one per process,
// living as long as the process.
RateCache& DefaultRateCache();

}  // namespace tandem
