// tandem-bench-hybrid: the whole hybrid step on Llama-3 shapes across offload fractions.
//
// For each model and fraction it builds a HybridOptimizer over real device buffers (bf16
// parameters and gradients), runs warm-up steps, then times `--steps` steps and reports the
// median step time, each stage's busy time (pre-pass, GPU kernel, D2H, host kernels, H2D),
// the achieved copy bandwidths and the overlap efficiency = busy time of the slowest stage
// / step time (1.0: the other stages are completely hidden behind the slowest).
//
// --early-start measures, after a simulated backward (spin kernels of known duration, one
// per tensor, in backward order), the exposed step time (last gradient to the end of the
// step, all uploads done) and the time until the next forward could start (last gradient
// to the first forward tensor's parameter being final), without early start, with
// GradReady only, and with BeginStep + GradReady (speculative host update in backward).
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
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
using bench::Median;
using Clock = std::chrono::steady_clock;

// Spins for `ns` nanoseconds of GPU time: a stand-in for one layer's backward.
__global__ void SpinKernel(long long ns) {
  long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= ns) break;
  }
}

struct Result {
  std::string model, formats;
  double fraction = 0, step_ms = 0;
  StageTimes stages;
  double d2h_gbps = 0, h2d_gbps = 0, overlap = 0;
  uint64_t offloaded = 0, total = 0;
  MemoryReport mem;
};

Result RunOne(const DeviceModel& m, const StateFormats& f, double fraction, int steps, int threads,
              uint64_t chunk) {
  OptimizerConfig cfg;
  cfg.algorithm = Algorithm::kAdamW;
  cfg.formats = f;
  cfg.offload_fraction = fraction;
  cfg.mode = ExecutionMode::kGpu;
  cfg.host_threads = threads;
  cfg.chunk_elements = chunk;
  cfg.groups[0].weight_decay = 0.01;
  HybridOptimizer opt(m.Specs(), cfg);
  std::vector<double> times;
  std::vector<StageTimes> stages;
  for (int i = 0; i < steps + 2; ++i) {
    const auto t0 = Clock::now();
    const StepResult r = opt.Step(1e-5);
    Check(cudaDeviceSynchronize(), "step");
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (!r.applied) std::fprintf(stderr, "warning: step skipped (non-finite gradient)\n");
    if (i >= 2) {
      times.push_back(ms);
      stages.push_back(opt.last_step_times());
    }
  }
  Result res;
  res.model = m.name;
  res.formats = Name(f);
  res.fraction = fraction;
  res.step_ms = Median(times);
  // The stage times of the median step.
  size_t idx = 0;
  for (size_t i = 0; i < times.size(); ++i)
    if (times[i] == res.step_ms) idx = i;
  res.stages = stages[idx];
  res.offloaded = opt.placement().offloaded;
  res.total = opt.placement().total;
  const double cold_bytes = double(res.offloaded) * 2;  // bf16 grads down, bf16 params up
  res.d2h_gbps = res.stages.d2h_ms > 0 ? cold_bytes / (res.stages.d2h_ms * 1e6) : 0;
  res.h2d_gbps = res.stages.h2d_ms > 0 ? cold_bytes / (res.stages.h2d_ms * 1e6) : 0;
  const StageTimes& s = res.stages;
  const double slowest = std::max({s.prepass_ms + s.gpu_update_ms, s.d2h_ms, s.host_update_ms,
                                   s.h2d_ms});
  res.overlap = slowest / res.step_ms;
  res.mem = opt.memory();
  return res;
}

// Early start after a simulated backward (one spin kernel per tensor, in backward order, on
// the compute stream), in three modes: none (Step after backward), GradReady only (the
// offloaded gradients copy down during backward) and speculative (BeginStep before
// backward, GradReady after each tensor: the host updates run during backward). Times
// start when the last gradient is final (an event after the last spin kernel):
//   exposed:       until Step returned and the device is idle (every upload finished);
//   forward ready: until Step returned and the parameter of the first tensor in forward
//                  order is final on another stream (WaitParam): what the next forward
//                  waits for.
enum class EarlyMode { kNone = 0, kGradReady = 1, kSpeculative = 2 };
const char* Name(EarlyMode m) {
  return m == EarlyMode::kNone ? "none" : m == EarlyMode::kGradReady ? "gradready" : "speculative";
}

struct EarlyResult {
  double exposed_ms = 0, forward_ready_ms = 0;
  StageTimes stages;  // of the median (exposed) repetition
};

std::vector<EarlyResult> EarlyStart(const DeviceModel& m, const StateFormats& f, double fraction,
                                    int threads, uint64_t chunk, double layer_us, int reps) {
  OptimizerConfig cfg;
  cfg.formats = f;
  cfg.offload_fraction = fraction;
  cfg.mode = ExecutionMode::kGpu;
  cfg.host_threads = threads;
  cfg.chunk_elements = chunk;
  cfg.speculative_early_start = true;  // allocates the backup; unused by the first two modes
  HybridOptimizer opt(m.Specs(), cfg);
  cudaEvent_t last, ready;
  cudaStream_t forward;
  Check(cudaEventCreate(&last), "event");
  Check(cudaEventCreate(&ready), "event");
  Check(cudaStreamCreateWithFlags(&forward, cudaStreamNonBlocking), "forward stream");
  std::vector<EarlyResult> out;
  for (EarlyMode mode : {EarlyMode::kNone, EarlyMode::kGradReady, EarlyMode::kSpeculative}) {
    std::vector<double> exposed, fwd;
    std::vector<StageTimes> stages;
    for (int r = 0; r < reps + 1; ++r) {
      const double lr = 1e-5;
      if (mode == EarlyMode::kSpeculative) opt.BeginStep(lr);
      for (size_t i = m.shapes.size(); i-- > 0;) {  // backward order
        SpinKernel<<<1, 1>>>(static_cast<long long>(layer_us * 1e3));
        if (mode != EarlyMode::kNone) opt.GradReady(i);
      }
      Check(cudaEventRecord(last, 0), "record");
      Check(cudaEventSynchronize(last), "backward");
      const auto t0 = Clock::now();
      opt.Step(lr);
      opt.WaitParam(0, forward);
      Check(cudaEventRecord(ready, forward), "record forward");
      Check(cudaEventSynchronize(ready), "forward ready");
      const auto t1 = Clock::now();
      Check(cudaDeviceSynchronize(), "step");
      const auto t2 = Clock::now();
      if (r == 0) continue;  // warm-up
      fwd.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      exposed.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
      stages.push_back(opt.last_step_times());
    }
    EarlyResult e;
    e.exposed_ms = Median(exposed);
    e.forward_ready_ms = Median(fwd);
    for (size_t i = 0; i < exposed.size(); ++i)
      if (exposed[i] == e.exposed_ms) e.stages = stages[i];
    out.push_back(e);
  }
  cudaStreamDestroy(forward);
  cudaEventDestroy(ready);
  cudaEventDestroy(last);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tandem-bench-hybrid: the hybrid optimizer step across offload fractions"};
  app.set_version_flag("--version", std::string("tandem-bench-hybrid ") + tandem::kVersion);
  std::vector<std::string> models{"llama3-1b"};
  std::vector<double> fractions;
  double step = 0.125;
  int steps = 5, threads = 0;
  uint64_t chunk = 1 << 21;
  bool fp32 = false, early = false;
  double layer_us = 2000;
  std::string json_path;
  app.add_option("--models", models, "presets (llama3-1b, llama3-3b, llama3-8b, llama3-70b) "
                 "or config.json paths (Llama, Mistral, Qwen2, GPT-2)");
  app.add_option("--fractions", fractions, "explicit fractions (default: 0..1 by --fraction-step)");
  app.add_option("--fraction-step", step);
  app.add_option("--steps", steps, "timed steps per point (median reported)");
  app.add_option("--threads", threads, "host threads (0: all)");
  app.add_option("--chunk", chunk, "pipeline chunk elements");
  app.add_flag("--fp32", fp32, "also run fp32 master/m/v (the baseline's bytes per element)");
  app.add_flag("--early-start", early,
               "measure exposed time without early start, with GradReady, with BeginStep");
  app.add_option("--layer-us", layer_us, "simulated backward time per tensor (early start)");
  app.add_option("--json", json_path, "write results as JSON");
  CLI11_PARSE(app, argc, argv);
  if (fractions.empty())
    for (double f = 0; f <= 1.0 + 1e-9; f += step) fractions.push_back(std::min(f, 1.0));
  if (!CudaDeviceAvailable()) {
    std::printf("tandem-bench-hybrid: no CUDA device; nothing measured\n");
    return 0;
  }
  std::vector<StateFormats> formats = {
      {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}};
  if (fp32) formats.push_back({MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kF32});
  nlohmann::json out = nlohmann::json::array();
  std::printf("%-10s %-34s %5s %9s %8s %8s %8s %8s %8s %7s %7s %7s\n", "model", "formats", "frac",
              "step ms", "pre ms", "gpu ms", "d2h ms", "host ms", "h2d ms", "d2h GB/s",
              "h2d GB/s", "overlap");
  try {
    for (const std::string& name : models) {
      DeviceModel m(name);
      const uint64_t numel = m.numel();
      size_t free_bytes = 0, total_bytes = 0;
      Check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
      if (4 * numel > free_bytes) {  // bf16 parameters and gradients
        std::printf("%-10s skipped: too little GPU memory for its bf16 parameters and "
                    "gradients (%.1f GB needed, %.1f GB free)\n",
                    name.c_str(), 4e-9 * double(numel), 1e-9 * double(free_bytes));
        out.push_back({{"model", name}, {"skipped", "too little GPU memory"}});
        continue;
      }
      m.Allocate();
      for (const StateFormats& f : formats) {
        for (double frac : fractions) {
          Result r;
          try {
            r = RunOne(m, f, frac, steps, threads, chunk);
          } catch (const tandem::Error& e) {
            if (e.kind() != ErrorKind::kOutOfMemory) throw;
            std::printf("%-10s %-34s %5.3f skipped: too little memory (%s)\n", name.c_str(),
                        Name(f).c_str(), frac, e.what());
            out.push_back({{"model", name}, {"formats", Name(f)}, {"fraction", frac},
                           {"skipped", std::string("too little memory: ") + e.what()}});
            continue;
          }
          const StageTimes& s = r.stages;
          std::printf("%-10s %-34s %5.3f %9.2f %8.2f %8.2f %8.2f %8.2f %8.2f %7.1f %7.1f %7.2f\n",
                      name.c_str(), r.formats.c_str(), frac, r.step_ms, s.prepass_ms,
                      s.gpu_update_ms, s.d2h_ms, s.host_update_ms, s.h2d_ms, r.d2h_gbps,
                      r.h2d_gbps, r.overlap);
          std::fflush(stdout);
          out.push_back({{"model", name}, {"formats", r.formats}, {"fraction", frac},
                         {"step_ms", r.step_ms}, {"prepass_ms", s.prepass_ms},
                         {"gpu_update_ms", s.gpu_update_ms}, {"d2h_ms", s.d2h_ms},
                         {"host_update_ms", s.host_update_ms}, {"h2d_ms", s.h2d_ms},
                         {"d2h_gbps", r.d2h_gbps}, {"h2d_gbps", r.h2d_gbps},
                         {"overlap_efficiency", r.overlap}, {"offloaded", r.offloaded},
                         {"total", r.total}, {"chunks", s.chunks},
                         {"device_bytes", r.mem.device.total()},
                         {"host_bytes", r.mem.host.total()}});
        }
      }
      if (early) {
        const std::vector<EarlyResult> e =
            EarlyStart(m, formats[0], 0.5, threads, chunk, layer_us, 3);
        const EarlyResult& none = e[0];
        std::printf("early start %s f=0.5, %.0f us per tensor (%zu tensors):\n", name.c_str(),
                    layer_us, m.shapes.size());
        std::printf("  %-12s %12s %7s %18s %7s %11s %11s\n", "mode", "exposed ms", "ratio",
                    "forward-ready ms", "ratio", "speculated", "spec host ms");
        for (EarlyMode mode : {EarlyMode::kNone, EarlyMode::kGradReady, EarlyMode::kSpeculative}) {
          const EarlyResult& r = e[static_cast<int>(mode)];
          std::printf("  %-12s %12.2f %6.0f%% %18.2f %6.0f%% %5llu/%-5llu %11.2f\n", Name(mode),
                      r.exposed_ms, 100.0 * r.exposed_ms / none.exposed_ms, r.forward_ready_ms,
                      100.0 * r.forward_ready_ms / none.forward_ready_ms,
                      static_cast<unsigned long long>(r.stages.speculated_chunks),
                      static_cast<unsigned long long>(r.stages.chunks),
                      r.stages.speculative_host_ms);
        }
        const EarlyResult& gr = e[1];
        const EarlyResult& sp = e[2];
        // exposed_ms_without/with and ratio keep their earlier meaning (none vs GradReady).
        out.push_back({{"model", name}, {"experiment", "early_start"}, {"fraction", 0.5},
                       {"layer_us", layer_us}, {"tensors", m.shapes.size()},
                       {"exposed_ms_without", none.exposed_ms},
                       {"exposed_ms_with", gr.exposed_ms},
                       {"ratio", gr.exposed_ms / none.exposed_ms},
                       {"exposed_ms_speculative", sp.exposed_ms},
                       {"ratio_speculative", sp.exposed_ms / none.exposed_ms},
                       {"forward_ready_ms_without", none.forward_ready_ms},
                       {"forward_ready_ms_with", gr.forward_ready_ms},
                       {"forward_ready_ms_speculative", sp.forward_ready_ms},
                       {"forward_ready_ratio", gr.forward_ready_ms / none.forward_ready_ms},
                       {"forward_ready_ratio_speculative",
                        sp.forward_ready_ms / none.forward_ready_ms},
                       {"chunks", sp.stages.chunks},
                       {"speculated_chunks", sp.stages.speculated_chunks},
                       {"speculative_host_ms", sp.stages.speculative_host_ms},
                       {"step_ms_speculative", sp.stages.step_ms},
                       {"h2d_ms_speculative", sp.stages.h2d_ms}});
      }
    }
  } catch (const tandem::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
