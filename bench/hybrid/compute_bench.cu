// tandem-bench-compute: where offloaded elements are computed (offload_compute), on Llama
// shapes, against limits measured in the same run.
//
// The run first measures the machine: PCIe one way and both ways at once (pinned), the host
// kernel for the benchmarked formats while PCIe copies run in both directions (host mode,
// the optimizer's own threads), and the fused GPU kernel (the hot step of a fraction-0
// optimizer). Then, for each fraction, it times the step with offload_compute = host first:
// its host stage (the pipeline's host kernels, with the pipeline's own DMA running) gives
// the host rate the model uses at that fraction; then gpu, then auto given those rates.
// For each it reports:
//   bound: the compute-split model (tandem/compute_split.h) at the share used, plus the
//          measured pre-pass: the step the measured rates allow for that split (at share 0
//          and 1 the largest of bytes down / D2H, bytes up / H2D, host elements / host
//          rate and GPU time);
//   vs host: step / the host-only step (target for auto: <= 0.55);
//   vs bound: step / bound (target for auto: <= 1.15);
//   copy: for gpu, the streamed bytes each way / the streaming time, as a fraction of the
//         one-way copy rate (target at fraction 1: >= 0.85 in both directions at once).
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
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

// Pinned and device buffers for the copy measurements and the DMA load.
struct CopyRig {
  size_t bytes;
  void *h_up = nullptr, *h_down = nullptr, *d_up = nullptr, *d_down = nullptr;
  cudaStream_t up = nullptr, down = nullptr;
  explicit CopyRig(size_t b) : bytes(b) {
    Check(cudaHostAlloc(&h_up, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    Check(cudaHostAlloc(&h_down, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    Check(cudaMalloc(&d_up, bytes), "cudaMalloc");
    Check(cudaMalloc(&d_down, bytes), "cudaMalloc");
    Check(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking), "stream");
    Check(cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking), "stream");
  }
  ~CopyRig() {
    cudaStreamSynchronize(up);
    cudaStreamSynchronize(down);
    cudaFreeHost(h_up);
    cudaFreeHost(h_down);
    cudaFree(d_up);
    cudaFree(d_down);
    cudaStreamDestroy(up);
    cudaStreamDestroy(down);
  }
  // GB/s of `reps` copies each way (one way when the other flag is off), best of 3.
  void Measure(bool do_up, bool do_down, int reps, double* up_gbps, double* down_gbps) {
    cudaEvent_t e[4];
    for (cudaEvent_t& x : e) Check(cudaEventCreate(&x), "event");
    *up_gbps = *down_gbps = 0;
    for (int r = 0; r < 4; ++r) {
      Check(cudaEventRecord(e[0], up), "record");
      Check(cudaStreamWaitEvent(down, e[0], 0), "wait");
      Check(cudaEventRecord(e[2], down), "record");
      for (int i = 0; i < reps; ++i) {
        if (do_up) Check(cudaMemcpyAsync(d_up, h_up, bytes, cudaMemcpyHostToDevice, up), "h2d");
        if (do_down)
          Check(cudaMemcpyAsync(h_down, d_down, bytes, cudaMemcpyDeviceToHost, down), "d2h");
      }
      Check(cudaEventRecord(e[1], up), "record");
      Check(cudaEventRecord(e[3], down), "record");
      Check(cudaEventSynchronize(e[1]), "sync");
      Check(cudaEventSynchronize(e[3]), "sync");
      float a = 0, b = 0;
      cudaEventElapsedTime(&a, e[0], e[1]);
      cudaEventElapsedTime(&b, e[2], e[3]);
      if (r == 0) continue;  // warm-up
      if (do_up) *up_gbps = std::max(*up_gbps, double(bytes) * reps / (a * 1e6));
      if (do_down) *down_gbps = std::max(*down_gbps, double(bytes) * reps / (b * 1e6));
    }
    for (cudaEvent_t x : e) cudaEventDestroy(x);
  }
  // Keeps both directions busy for about `ms` (enqueued, not waited for).
  void Load(double ms, double gbps) {
    const int reps = std::max(1, static_cast<int>(ms * 1e6 * gbps / double(bytes)));
    for (int i = 0; i < reps; ++i) {
      Check(cudaMemcpyAsync(d_up, h_up, bytes, cudaMemcpyHostToDevice, up), "h2d");
      Check(cudaMemcpyAsync(h_down, d_down, bytes, cudaMemcpyDeviceToHost, down), "d2h");
    }
  }
};

// The host kernel's rate (1e9 elements/s) for `f` on a host-mode optimizer of n elements
// in 64 tensors, with both PCIe directions busy.
double HostKernelRate(const StateFormats& f, int threads, CopyRig& rig, double pcie_gbps) {
  const size_t n = size_t{1} << 26, tensors = 64, per = n / tensors;
  std::vector<uint16_t> param(n, 0x3c00), grad(n, 0x3800);
  std::vector<TensorSpec> specs;
  for (size_t t = 0; t < tensors; ++t) {
    TensorSpec s;
    s.name = std::to_string(t);
    s.name.insert(0, 1, 't');
    s.numel = per;
    s.param_dtype = s.grad_dtype = DType::kBF16;
    s.param = param.data() + t * per;
    s.grad = grad.data() + t * per;
    specs.push_back(s);
  }
  OptimizerConfig cfg;
  cfg.formats = f;
  cfg.mode = ExecutionMode::kHost;
  cfg.host_threads = threads;
  HybridOptimizer opt(specs, cfg);
  opt.Step(1e-5);  // warm-up
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    rig.Load(300, pcie_gbps);
    opt.Step(1e-5);
    ms.push_back(opt.last_step_times().gpu_update_ms);  // host mode: the hot step, on the host
    Check(cudaStreamSynchronize(rig.up), "sync");
    Check(cudaStreamSynchronize(rig.down), "sync");
  }
  return double(n) / (Median(ms) * 1e6);
}

struct Point {
  double fraction = 0;
  std::string compute;
  double share = 0, step_ms = 0, bound_ms = 0;
  StageTimes stages;
  ComputeSplit model;
};

Point Time(const DeviceModel& m, const StateFormats& f, double fraction, double compute,
           const MachineRates& rates, int steps, int threads, int slots, uint64_t chunk_bytes) {
  OptimizerConfig cfg;
  cfg.stream_slots = slots;
  cfg.stream_chunk_bytes = chunk_bytes;
  cfg.formats = f;
  cfg.offload_fraction = fraction;
  cfg.mode = ExecutionMode::kGpu;
  cfg.host_threads = threads;
  cfg.offload_compute = compute;
  cfg.machine_rates = rates;
  cfg.groups[0].weight_decay = 0.01;
  HybridOptimizer opt(m.Specs(), cfg);
  std::vector<double> times;
  std::vector<StageTimes> stages;
  for (int i = 0; i < steps + 2; ++i) {
    const auto t0 = Clock::now();
    opt.Step(1e-5);
    Check(cudaDeviceSynchronize(), "step");
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const StageTimes st = opt.last_step_times();
    if (i < 2) continue;
    times.push_back(ms);
    stages.push_back(st);
  }
  Point p;
  p.fraction = fraction;
  p.compute = OffloadComputeName(compute);
  p.share = opt.placement().stream_share;
  p.step_ms = Median(times);
  for (size_t i = 0; i < times.size(); ++i)
    if (times[i] == p.step_ms) p.stages = stages[i];
  p.model = opt.compute_split();
  p.bound_ms = p.stages.prepass_ms + p.model.step_ms;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tandem-bench-compute: offload_compute host / gpu / auto against measured limits"};
  app.set_version_flag("--version", std::string("tandem-bench-compute ") + tandem::kVersion);
  std::string model_name = "llama3-8b", json_path;
  std::vector<double> fractions{0.5, 1.0};
  int steps = 5, threads = 0, slots = 3;
  uint64_t chunk_mib = 64;
  app.add_option("--model", model_name, "preset (llama3-1b, llama3-8b, ...) or config.json");
  app.add_option("--fractions", fractions, "offload fractions");
  app.add_option("--steps", steps, "timed steps per point (median)");
  app.add_option("--threads", threads, "host threads (0: all)");
  app.add_option("--stream-slots", slots, "device slots of the stream executor");
  app.add_option("--stream-chunk-mib", chunk_mib, "stream chunk size, MiB");
  app.add_option("--json", json_path, "write results as JSON");
  CLI11_PARSE(app, argc, argv);
  if (!CudaDeviceAvailable()) {
    std::printf("tandem-bench-compute: no CUDA device; nothing measured\n");
    return 0;
  }
  const StateFormats f{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  nlohmann::json out;
  try {
    DeviceModel m(model_name);
    m.Allocate();

    // 1. The machine, measured now.
    CopyRig rig(size_t{256} << 20);
    double h2d1 = 0, d2h1 = 0, h2d2 = 0, d2h2 = 0, unused = 0;
    rig.Measure(true, false, 4, &h2d1, &unused);
    rig.Measure(false, true, 4, &unused, &d2h1);
    rig.Measure(true, true, 4, &h2d2, &d2h2);
    MachineRates rates;
    rates.h2d_gbps = h2d2;
    rates.d2h_gbps = d2h2;
    rates.host_gparams = HostKernelRate(f, threads, rig, std::max(h2d2, d2h2));
    rates.gpu_gparams = 1e3;  // replaced below by the measured hot kernel
    {
      const Point hot = Time(m, f, 0.0, 0.0, rates, 3, threads, slots, chunk_mib << 20);
      rates.gpu_gparams = double(m.numel()) / (hot.stages.gpu_update_ms * 1e6);
    }
    std::printf("machine: PCIe one way h2d %.1f d2h %.1f GB/s; both at once h2d %.1f d2h %.1f "
                "GB/s; host kernel under DMA %.2f Gparam/s; GPU kernel %.1f Gparam/s\n",
                h2d1, d2h1, h2d2, d2h2, rates.host_gparams, rates.gpu_gparams);
    out["machine"] = {{"h2d_one_way_gbps", h2d1}, {"d2h_one_way_gbps", d2h1},
                      {"h2d_both_gbps", h2d2}, {"d2h_both_gbps", d2h2},
                      {"host_kernel_gparams_under_dma", rates.host_gparams},
                      {"gpu_kernel_gparams", rates.gpu_gparams}};

    // 2. The step at each fraction, host / gpu / auto.
    out["points"] = nlohmann::json::array();
    std::printf("%-5s %-5s %6s %9s %9s %8s %8s %9s %9s %7s %6s %6s\n", "frac", "comp", "share",
                "step ms", "bound ms", "vs host", "vs bnd", "host ms", "strm ms", "chunks",
                "bound", "copy");
    for (double frac : fractions) {
      double host_ms = 0;
      MachineRates at = rates;  // the host rate as the host-only run achieves it
      for (double compute : {0.0, 1.0, kOffloadComputeAuto}) {
        Point p = Time(m, f, frac, compute, at, steps, threads, slots, chunk_mib << 20);
        if (compute == 0.0) {
          host_ms = p.step_ms;
          const double total = double(m.numel());
          const double offloaded = frac >= 1.0 ? total : frac * total;
          at.host_gparams = offloaded / (p.stages.host_update_ms * 1e6);
          p.model.host_ms = p.stages.host_update_ms;
          p.model.host_path_ms = std::max({p.model.down_ms, p.model.up_ms, p.model.host_ms});
          p.model.step_ms = std::max(p.model.gpu_ms, p.model.host_path_ms);
          p.bound_ms = p.stages.prepass_ms + p.model.step_ms;
          std::printf("f=%.2f: host rate in the pipeline %.2f Gparam/s\n", frac, at.host_gparams);
        }
        const StageTimes& s = p.stages;
        // All streamed (share 1): the model's upload term is the streamed bytes each way
        // over the measured rate; copy = those bytes over the streaming time, against the
        // one-way copy rate of the slower direction.
        double copy = 0;
        if (p.share == 1.0 && s.stream_ms > 0) {
          const double bytes = p.model.up_ms * rates.h2d_gbps * 1e6;
          copy = bytes / (s.stream_ms * 1e6) / std::min(h2d1, d2h1);
        }
        std::printf("%-5.2f %-5s %6.3f %9.1f %9.1f %8.3f %8.3f %9.1f %9.1f %7llu %6s %6.2f\n",
                    frac, p.compute.c_str(), p.share, p.step_ms, p.bound_ms, p.step_ms / host_ms,
                    p.step_ms / p.bound_ms, s.host_update_ms, s.stream_ms,
                    static_cast<unsigned long long>(s.stream_chunks), p.model.bound(), copy);
        std::fflush(stdout);
        out["points"].push_back(
            {{"fraction", frac}, {"offload_compute", p.compute}, {"share", p.share},
             {"step_ms", p.step_ms}, {"bound_ms", p.bound_ms},
             {"vs_host", p.step_ms / host_ms}, {"vs_bound", p.step_ms / p.bound_ms},
             {"prepass_ms", s.prepass_ms}, {"gpu_update_ms", s.gpu_update_ms},
             {"d2h_ms", s.d2h_ms}, {"host_update_ms", s.host_update_ms}, {"h2d_ms", s.h2d_ms},
             {"stream_ms", s.stream_ms}, {"stream_chunks", s.stream_chunks},
             {"model_d2h_ms", p.model.down_ms}, {"model_h2d_ms", p.model.up_ms},
             {"model_host_ms", p.model.host_ms}, {"model_gpu_ms", p.model.gpu_ms},
             {"model_stream_ms", p.model.stream_ms}, {"model_host_path_ms", p.model.host_path_ms},
             {"bound", p.model.bound()}, {"copy_vs_one_way", copy}});
      }
    }
    std::printf("targets: auto <= 0.55 x host and <= 1.15 x bound at each fraction; gpu at "
                "fraction 1: copy >= 0.85 of one way, both directions at once\n");
  } catch (const tandem::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
