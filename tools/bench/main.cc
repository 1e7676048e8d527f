// tandem-bench: one command for Tandem's throughput measurements.
//
//   tandem-bench pcie       pinned and pageable H2D, D2H, and both directions at once
//   tandem-bench calibrate  quick host/GPU step rates, copy and PCIe bandwidths -> a
//                           profile JSON that tandem-plan reads (--profile)
//   tandem-bench kernels    host and GPU kernels against their rooflines
//                           (runs tandem-bench-host and tandem-bench-gpu)
//   tandem-bench hybrid     the whole step across offload fractions (tandem-bench-hybrid)
//
// Every subcommand runs on a machine without a GPU and says what it skipped and why.
// calibrate and pcie measure in-process with the engine itself: the step rates are those
// of HybridOptimizer::Step on one large tensor (host mode for the host rate, GPU mode at
// fraction 0 for the GPU rate), so the profile keys are exactly the planner's.
#include <cuda_runtime.h>
#include <tbb/parallel_for.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cpu_simd/host_kernels.h"
#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tandem/planner.h"

namespace {

using namespace tandem;
using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <typename Fn>
double MedianMs(int reps, Fn fn) {
  std::vector<double> t;
  fn();  // warm-up
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return Median(t);
}

void Cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(ErrorKind::kCuda, std::string(what) + ": " + cudaGetErrorString(e));
}

std::string Today() {
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

std::string CpuName() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// ---------------------------------------------------------------------------------------
// PCIe

struct PcieResult {
  double h2d = 0, d2h = 0, bidir = 0, h2d_pageable = 0, d2h_pageable = 0;
};

PcieResult MeasurePcie(size_t bytes, int reps) {
  PcieResult r;
  void *dev_a, *dev_b, *pin_a, *pin_b;
  Cuda(cudaMalloc(&dev_a, bytes), "cudaMalloc");
  Cuda(cudaMalloc(&dev_b, bytes), "cudaMalloc");
  Cuda(cudaHostAlloc(&pin_a, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  Cuda(cudaHostAlloc(&pin_b, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  std::vector<uint8_t> page_a(bytes, 1), page_b(bytes, 2);
  std::memset(pin_a, 3, bytes);
  cudaStream_t s1, s2;
  Cuda(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "stream");
  Cuda(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "stream");
  const double gb = double(bytes) / 1e9;
  auto copy = [&](void* dst, const void* src, cudaMemcpyKind k) {
    return gb / (MedianMs(reps, [&] {
                   Cuda(cudaMemcpyAsync(dst, src, bytes, k, s1), "copy");
                   Cuda(cudaStreamSynchronize(s1), "sync");
                 }) / 1e3);
  };
  r.h2d = copy(dev_a, pin_a, cudaMemcpyHostToDevice);
  r.d2h = copy(pin_b, dev_b, cudaMemcpyDeviceToHost);
  r.h2d_pageable = copy(dev_a, page_a.data(), cudaMemcpyHostToDevice);
  r.d2h_pageable = copy(page_b.data(), dev_b, cudaMemcpyDeviceToHost);
  r.bidir = 2 * gb / (MedianMs(reps, [&] {
                        Cuda(cudaMemcpyAsync(dev_a, pin_a, bytes, cudaMemcpyHostToDevice, s1), "h2d");
                        Cuda(cudaMemcpyAsync(pin_b, dev_b, bytes, cudaMemcpyDeviceToHost, s2), "d2h");
                        Cuda(cudaStreamSynchronize(s1), "sync");
                        Cuda(cudaStreamSynchronize(s2), "sync");
                      }) / 1e3);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  cudaFree(dev_a);
  cudaFree(dev_b);
  cudaFreeHost(pin_a);
  cudaFreeHost(pin_b);
  return r;
}

// ---------------------------------------------------------------------------------------
// Step rates through the engine

struct KernelCase {
  Algorithm algo;
  StateFormats f;
};

const KernelCase kCases[] = {
    {Algorithm::kAdamW, {MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kF32}},
    {Algorithm::kAdamW, {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}},
    {Algorithm::kAdamW, {MasterFormat::kBF16Ecc16, MomentFormat::kQ8, MomentFormat::kQ8}},
    {Algorithm::kLion, {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kF32}},
    {Algorithm::kSGD, {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kF32}},
};

// Gparam/s of the step over one tensor of n bf16 elements (params and grads in `mode`'s
// memory), measured from the engine's own stage timer of the update.
double StepRate(const KernelCase& c, ExecutionMode mode, uint64_t n, int threads, int reps) {
  const bool gpu = mode == ExecutionMode::kGpu;
  void *param = nullptr, *grad = nullptr;
  std::vector<uint16_t> hp, hg;
  hp.resize(n);
  hg.resize(n);
  tbb::parallel_for(uint64_t{0}, n, [&](uint64_t i) {
    hp[i] = 0x3C00 + uint16_t(i % 61);  // small positive bf16 weights
    hg[i] = uint16_t(0x3A00 + (i % 97)) | (i % 2 ? 0x8000 : 0);
  });
  if (gpu) {
    Cuda(cudaMalloc(&param, n * 2), "cudaMalloc");
    Cuda(cudaMalloc(&grad, n * 2), "cudaMalloc");
    Cuda(cudaMemcpy(param, hp.data(), n * 2, cudaMemcpyHostToDevice), "upload");
    Cuda(cudaMemcpy(grad, hg.data(), n * 2, cudaMemcpyHostToDevice), "upload");
  } else {
    param = hp.data();
    grad = hg.data();
  }
  TensorSpec s{"calibration", n, DType::kBF16, DType::kBF16, param, grad, 0, {}};
  OptimizerConfig cfg;
  cfg.algorithm = c.algo;
  cfg.formats = c.f;
  cfg.mode = mode;
  cfg.host_threads = threads;
  if (c.algo == Algorithm::kSGD) cfg.groups[0].momentum = 0.9;
  if (c.algo == Algorithm::kLion) cfg.groups[0].beta2 = 0.99;
  std::vector<double> ms;
  {
    HybridOptimizer opt({s}, cfg);
    for (int i = 0; i < reps + 1; ++i) {
      opt.Step(1e-4);
      if (gpu) Cuda(cudaDeviceSynchronize(), "step");
      if (i > 0) ms.push_back(opt.last_step_times().gpu_update_ms);
    }
  }
  if (gpu) {
    cudaFree(param);
    cudaFree(grad);
  }
  return double(n) / (Median(ms) * 1e6);
}

// STREAM-like copy and triad over all threads, GB/s counting bytes read and written.
std::pair<double, double> HostBandwidth(uint64_t n, int reps) {
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  auto par = [&](auto body) {
    tbb::parallel_for(tbb::blocked_range<uint64_t>(0, n, 1 << 16),
                      [&](const tbb::blocked_range<uint64_t>& r) {
                        for (uint64_t i = r.begin(); i < r.end(); ++i) body(i);
                      });
  };
  const double copy_ms = MedianMs(reps, [&] { par([&](uint64_t i) { c[i] = a[i]; }); });
  const double triad_ms =
      MedianMs(reps, [&] { par([&](uint64_t i) { c[i] = a[i] + 3.0f * b[i]; }); });
  return {8.0 * n / (copy_ms * 1e6), 12.0 * n / (triad_ms * 1e6)};
}

double HbmCopy(size_t bytes, int reps) {
  void *a, *b;
  Cuda(cudaMalloc(&a, bytes), "cudaMalloc");
  Cuda(cudaMalloc(&b, bytes), "cudaMalloc");
  Cuda(cudaMemset(a, 1, bytes), "memset");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> t;
  for (int i = 0; i < reps + 1; ++i) {
    cudaEventRecord(e0);
    Cuda(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice), "d2d");
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i > 0) t.push_back(ms);
  }
  cudaFree(a);
  cudaFree(b);
  return 2.0 * double(bytes) / (Median(t) * 1e6);
}

// ---------------------------------------------------------------------------------------
// Subcommands that run the specialised benchmark programs beside this one.

std::string Sibling(const char* name) {
  char buf[4096];
  const ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string self = len > 0 ? std::string(buf, size_t(len)) : std::string("./tandem-bench");
  const std::string dir = self.substr(0, self.find_last_of('/'));
  // Installed side by side, or in the build tree: tools/bench/../../bench/...
  for (const std::string& p : {dir + "/" + name, dir + "/../../bench/" + name,
                               dir + "/../../bench/gpu/" + name, dir + "/../../bench/hybrid/" + name})
    if (access(p.c_str(), X_OK) == 0) return p;
  return "";
}

int RunSibling(const char* name, const std::vector<std::string>& args) {
  const std::string path = Sibling(name);
  if (path.empty()) {
    std::printf("skipped %s: not found beside tandem-bench (not built?)\n", name);
    return 0;
  }
  std::string cmd = "'" + path + "'";
  for (const std::string& a : args) cmd += " '" + a + "'";
  std::printf("== %s\n", cmd.c_str());
  std::fflush(stdout);
  return std::system(cmd.c_str()) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tandem-bench: Tandem's throughput measurements"};
  app.require_subcommand(1);

  auto* pcie = app.add_subcommand("pcie", "pinned/pageable H2D, D2H and both at once");
  size_t pcie_mib = 512;
  int reps = 5;
  std::string pcie_json;
  pcie->add_option("--mib", pcie_mib, "transfer size in MiB");
  pcie->add_option("--reps", reps, "timed repetitions (median reported)");
  pcie->add_option("--json", pcie_json, "write JSON");

  auto* cal = app.add_subcommand("calibrate", "quick measurements -> a tandem-plan profile");
  uint64_t host_n = 64ull << 20, gpu_n = 512ull << 20;
  int threads = 0;
  std::string profile_path = "tandem-profile.json";
  cal->add_option("--host-elements", host_n, "elements per host measurement");
  cal->add_option("--gpu-elements", gpu_n, "elements per GPU measurement");
  cal->add_option("--threads", threads, "host threads (0: all)");
  cal->add_option("--reps", reps, "timed repetitions (median reported)");
  cal->add_option("-o,--out", profile_path, "profile JSON to write");

  std::vector<std::string> pass;
  auto* kern = app.add_subcommand("kernels", "host and GPU kernels against their rooflines");
  bool quick = false;
  std::string out_dir;
  kern->add_flag("--quick", quick, "small sizes (64Mi host elements, 256Mi GPU elements)");
  kern->add_option("--out-dir", out_dir, "write host_kernels.json and gpu_kernels.json here");
  auto* hyb = app.add_subcommand("hybrid", "the whole step across offload fractions");
  hyb->add_option("args", pass, "passed to tandem-bench-hybrid (--models, --fractions, ...)");
  hyb->allow_extras();
  CLI11_PARSE(app, argc, argv);

  const bool gpu = CudaDeviceAvailable();
  try {
    if (*pcie) {
      if (!gpu) {
        std::printf("tandem-bench pcie: skipped: no CUDA device on this machine\n");
        return 0;
      }
      const PcieResult r = MeasurePcie(pcie_mib << 20, reps);
      std::printf("PCIe, %zu MiB transfers, median of %d\n", pcie_mib, reps);
      std::printf("  %-26s %8.1f GB/s\n  %-26s %8.1f GB/s\n  %-26s %8.1f GB/s\n"
                  "  %-26s %8.1f GB/s\n  %-26s %8.1f GB/s\n",
                  "pinned H2D", r.h2d, "pinned D2H", r.d2h, "pinned both at once", r.bidir,
                  "pageable H2D", r.h2d_pageable, "pageable D2H", r.d2h_pageable);
      if (!pcie_json.empty())
        std::ofstream(pcie_json) << nlohmann::json{{"h2d_gbps", r.h2d}, {"d2h_gbps", r.d2h},
                                                   {"bidir_gbps", r.bidir},
                                                   {"h2d_pageable_gbps", r.h2d_pageable},
                                                   {"d2h_pageable_gbps", r.d2h_pageable},
                                                   {"bytes", pcie_mib << 20}, {"date", Today()}}
                                        .dump(2)
                                 << "\n";
      return 0;
    }
    if (*cal) {
      planner::Profile p = planner::DefaultProfile();
      p.builtin_default = false;
      p.machine = CpuName() + (gpu ? " + GPU" : " (no GPU)");
      p.date = Today();
      p.source = "tandem-bench calibrate";
      p.host.kernels.clear();
      p.gpu.kernels.clear();
      cpu::HostDriver probe(threads);
      p.host.threads = probe.threads();
      p.host.isa = cpu::IsaName(cpu::ActiveIsa());
      std::printf("calibrate: host %s, %d threads, %s\n", CpuName().c_str(), p.host.threads,
                  p.host.isa.c_str());
      const auto [copy, triad] = HostBandwidth(host_n, reps);
      p.host.copy_gbps = copy;
      p.host.triad_gbps = triad;
      std::printf("  host copy %.1f GB/s, triad %.1f GB/s\n", copy, triad);
      for (const KernelCase& c : kCases) {
        const std::string key = planner::KernelKey(c.algo, c.f, DType::kBF16);
        const double r = StepRate(c, ExecutionMode::kHost, host_n, threads, reps);
        p.host.kernels[key].gparams_per_s = r;
        std::printf("  host %-32s %7.2f Gparam/s\n", key.c_str(), r);
      }
      if (gpu) {
        cudaDeviceProp prop{};
        cudaGetDeviceProperties(&prop, 0);
        p.gpu.name = prop.name;
        p.gpu.hbm_copy_gbps = HbmCopy(size_t{2} << 30, reps);
        std::printf("  GPU %s: HBM copy %.0f GB/s\n", prop.name, p.gpu.hbm_copy_gbps);
        for (const KernelCase& c : kCases) {
          const std::string key = planner::KernelKey(c.algo, c.f, DType::kBF16);
          const double r = StepRate(c, ExecutionMode::kGpu, gpu_n, threads, reps);
          p.gpu.kernels[key].gparams_per_s = r;
          std::printf("  GPU  %-32s %7.2f Gparam/s\n", key.c_str(), r);
        }
        const PcieResult pc = MeasurePcie(size_t{512} << 20, reps);
        p.pcie.h2d_gbps = pc.h2d;
        p.pcie.d2h_gbps = pc.d2h;
        p.pcie.bidir_gbps = pc.bidir;
        std::printf("  PCIe pinned H2D %.1f, D2H %.1f, both %.1f GB/s\n", pc.h2d, pc.d2h, pc.bidir);
      } else {
        std::printf("  GPU and PCIe: skipped (no CUDA device); the profile keeps the built-in "
                    "H200 reference figures for them\n");
        p.source += " (host only; GPU/PCIe from the built-in H200 reference)";
      }
      planner::WriteProfile(p, profile_path);
      std::printf("wrote %s (use: tandem-plan --profile %s ...)\n", profile_path.c_str(),
                  profile_path.c_str());
      return 0;
    }
    if (*kern) {
      std::vector<std::string> host_args, gpu_args;
      if (quick) {
        host_args = {"--size", std::to_string(64ull << 20), "--reps", "3"};
        gpu_args = {"--elements", std::to_string(256ull << 20), "--reps", "5"};
      }
      if (!out_dir.empty()) {
        host_args.insert(host_args.end(), {"--json", out_dir + "/host_kernels.json"});
        gpu_args.insert(gpu_args.end(), {"--json", out_dir + "/gpu_kernels.json"});
      }
      int rc = RunSibling("tandem-bench-host", host_args);
      if (gpu)
        rc |= RunSibling("tandem-bench-gpu", gpu_args);
      else
        std::printf("skipped tandem-bench-gpu: no CUDA device on this machine\n");
      return rc;
    }
    if (*hyb) {
      if (!gpu) {
        std::printf("tandem-bench hybrid: skipped: the hybrid step needs a CUDA device\n");
        return 0;
      }
      return RunSibling("tandem-bench-hybrid", pass);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
