// tandem-bench-construct: how long constructing a HybridOptimizer takes, against what the
// same run needs at the least to allocate and first-touch its memory.
//
// For each model, format set, offload fraction and offload_compute share it
//   (b) constructs a HybridOptimizer over real device buffers (bf16 parameters and
//       gradients) and times the constructor (layout, allocation, initialising the state
//       from the parameters, building the plans; with offload_compute auto, measuring the
//       machine's rates too);
//   (a) then allocates the byte counts that optimizer's memory() reported, device bytes
//       with cudaMalloc and host bytes with cudaHostAlloc, and first-touches each with one
//       memset (cudaMemset / std::memset), timing allocation and touch separately;
// and prints b / a against the limit (2.0 by default: construction should cost at most
// twice the allocation and first touch it cannot avoid). --json writes every point.
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench/hybrid/device_model.cuh"
#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tandem/planner.h"
#include "tandem/version.h"

namespace {

using namespace tandem;
using bench::Check;
using bench::DeviceModel;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Baseline {
  double device_alloc_ms = 0, device_touch_ms = 0, host_alloc_ms = 0, host_touch_ms = 0;
  double total() const { return device_alloc_ms + device_touch_ms + host_alloc_ms + host_touch_ms; }
};

// (a): allocation and one first-touch memset of `device` and `host` (pinned) bytes.
Baseline AllocateAndTouch(uint64_t device, uint64_t host) {
  Baseline b;
  void *d = nullptr, *h = nullptr;
  Check(cudaDeviceSynchronize(), "sync");
  auto t0 = Clock::now();
  if (device > 0) Check(cudaMalloc(&d, device), "cudaMalloc (baseline)");
  b.device_alloc_ms = MsSince(t0);
  t0 = Clock::now();
  if (device > 0) Check(cudaMemset(d, 0, device), "cudaMemset (baseline)");
  Check(cudaDeviceSynchronize(), "sync");
  b.device_touch_ms = MsSince(t0);
  t0 = Clock::now();
  if (host > 0) Check(cudaHostAlloc(&h, host, cudaHostAllocDefault), "cudaHostAlloc (baseline)");
  b.host_alloc_ms = MsSince(t0);
  t0 = Clock::now();
  if (host > 0) std::memset(h, 0, host);
  b.host_touch_ms = MsSince(t0);
  if (h != nullptr) cudaFreeHost(h);
  if (d != nullptr) cudaFree(d);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tandem-bench-construct: HybridOptimizer construction against allocation and "
               "first touch of the same memory"};
  app.set_version_flag("--version", std::string("tandem-bench-construct ") + tandem::kVersion);
  std::vector<std::string> models{"llama3-1b"};
  std::vector<double> fractions{0.5};
  std::vector<std::string> computes{"0"};
  int threads = 0;
  bool fp32 = false;
  double limit = 2.0;
  std::string json_path;
  app.add_option("--models", models, "presets (llama3-1b, llama3-3b, llama3-8b, llama3-70b) "
                 "or config.json paths");
  app.add_option("--fractions", fractions, "offload fractions (default 0.5)");
  app.add_option("--compute", computes,
                 "offload_compute shares, or 'auto' (measures the machine's rates; default 0)");
  app.add_option("--threads", threads, "host threads (0: all)");
  app.add_flag("--fp32", fp32, "also run fp32 master/m/v");
  app.add_option("--limit", limit, "the largest acceptable construction / baseline ratio");
  app.add_option("--json", json_path, "write results as JSON");
  CLI11_PARSE(app, argc, argv);
  if (!CudaDeviceAvailable()) {
    std::printf("tandem-bench-construct: no CUDA device; nothing measured\n");
    return 0;
  }
  std::vector<StateFormats> formats = {
      {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}};
  if (fp32) formats.push_back({MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kF32});
  nlohmann::json out = nlohmann::json::array();
  bool all_within = true;
  std::printf("%-10s %-34s %5s %5s %9s %9s %10s %10s %12s %12s %6s\n", "model", "formats",
              "frac", "comp", "dev GiB", "host GiB", "alloc ms", "touch ms", "construct ms",
              "baseline ms", "ratio");
  try {
    for (const std::string& name : models) {
      DeviceModel m(name);
      m.Allocate(/*zero_grads=*/true);
      for (const StateFormats& f : formats)
        for (double frac : fractions)
          for (const std::string& comp : computes) {
            OptimizerConfig cfg;
            cfg.algorithm = Algorithm::kAdamW;
            cfg.formats = f;
            cfg.offload_fraction = frac;
            cfg.mode = ExecutionMode::kGpu;
            cfg.host_threads = threads;
            cfg.offload_compute = comp == "auto" ? kOffloadComputeAuto : std::stod(comp);
            cfg.groups[0].weight_decay = 0.01;
            MemoryReport mem;
            double construct_ms = 0;
            try {
              Check(cudaDeviceSynchronize(), "sync");
              const auto t0 = Clock::now();
              {
                HybridOptimizer opt(m.Specs(), cfg);
                construct_ms = MsSince(t0);
                mem = opt.memory();
              }
            } catch (const tandem::Error& e) {
              if (e.kind() != ErrorKind::kOutOfMemory) throw;
              std::printf("%-10s %-34s %5.3f %5s skipped: too little memory (%s)\n",
                          name.c_str(), Name(f).c_str(), frac, comp.c_str(), e.what());
              out.push_back({{"model", name}, {"formats", Name(f)}, {"fraction", frac},
                             {"offload_compute", comp},
                             {"skipped", std::string("too little memory: ") + e.what()}});
              continue;
            }
            const uint64_t dev = mem.device.total(), host = mem.host.total();
            const Baseline b = AllocateAndTouch(dev, host);
            const double ratio = b.total() > 0 ? construct_ms / b.total() : 0;
            const bool within = ratio <= limit;
            all_within &= within;
            std::printf("%-10s %-34s %5.3f %5s %9.2f %9.2f %10.1f %10.1f %12.1f %12.1f %6.2f %s\n",
                        name.c_str(), Name(f).c_str(), frac, comp.c_str(),
                        double(dev) / (1ull << 30), double(host) / (1ull << 30),
                        b.device_alloc_ms + b.host_alloc_ms, b.device_touch_ms + b.host_touch_ms,
                        construct_ms, b.total(), ratio, within ? "ok" : "OVER LIMIT");
            std::fflush(stdout);
            out.push_back({{"model", name}, {"formats", Name(f)}, {"fraction", frac},
                           {"offload_compute", comp}, {"device_bytes", dev},
                           {"host_bytes", host}, {"device_alloc_ms", b.device_alloc_ms},
                           {"device_touch_ms", b.device_touch_ms},
                           {"host_alloc_ms", b.host_alloc_ms}, {"host_touch_ms", b.host_touch_ms},
                           {"baseline_ms", b.total()}, {"construct_ms", construct_ms},
                           {"ratio", ratio}, {"limit", limit}, {"within_limit", within}});
          }
    }
  } catch (const tandem::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf("limit %.2f: %s\n", limit, all_within ? "every point within" : "some points over");
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return all_within ? 0 : 3;
}
