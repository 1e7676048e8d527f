// tandem-bench's in-process measurements (see measure.h).
#include "measure.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#if TANDEM_HAS_CUDA
#include <cuda_runtime.h>
#endif

#include "background_load.h"
#include "engine/grain.h"
#include "planner/step_time.h"
#include "tandem/error.h"

namespace tandem::bench {
namespace {

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

#if TANDEM_HAS_CUDA
void Cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(ErrorKind::kCuda, std::string(what) + ": " + cudaGetErrorString(e));
}
#else
[[noreturn]] void NoCuda(const char* what) {
  throw Error(ErrorKind::kUnsupported,
              std::string(what) + ": this build of Tandem has no CUDA (TANDEM_HAS_CUDA=0)");
}
#endif

}  // namespace

Spread SpreadOf(std::vector<double> values) {
  Spread s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.min = values.front();
  s.max = values.back();
  const size_t n = values.size();
  s.median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  return s;
}

const std::vector<KernelCase>& CalibrationCases() {
  static const std::vector<KernelCase> cases = {
      {Algorithm::kAdamW, {MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kF32}},
      {Algorithm::kAdamW, {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}},
      {Algorithm::kAdamW, {MasterFormat::kBF16Ecc16, MomentFormat::kQ8, MomentFormat::kQ8}},
      {Algorithm::kLion, {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kF32}},
      {Algorithm::kSGD, {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kF32}},
  };
  return cases;
}

namespace {
HyperParams CaseHyper(const KernelCase& c) {
  HyperParams h;
  if (c.algo == Algorithm::kSGD) h.momentum = 0.9;
  if (c.algo == Algorithm::kLion) h.beta2 = 0.99;
  return h;
}
}  // namespace

double CaseBytesPerElement(const KernelCase& c) {
  return planner::KernelBytesPerElement(c.algo, CaseHyper(c), c.formats, DType::kBF16,
                                        DType::kBF16);
}

namespace {
// Small positive bf16 weights and gradients of both signs, the same in every measurement.
void FillCalibration(std::vector<uint16_t>* param, std::vector<uint16_t>* grad) {
  tbb::parallel_for(uint64_t{0}, static_cast<uint64_t>(param->size()), [&](uint64_t i) {
    (*param)[i] = uint16_t(0x3C00 + i % 61);
    (*grad)[i] = uint16_t(0x3A00 + (i % 97)) | (i % 2 ? 0x8000 : 0);
  });
}

OptimizerConfig CaseConfig(const KernelCase& c, ExecutionMode mode, int threads) {
  OptimizerConfig cfg;
  cfg.algorithm = c.algo;
  cfg.formats = c.formats;
  cfg.mode = mode;
  cfg.host_threads = threads;
  const HyperParams h = CaseHyper(c);
  cfg.groups[0].momentum = h.momentum;
  cfg.groups[0].beta2 = h.beta2;
  return cfg;
}
}  // namespace

HostStepper::HostStepper(const KernelCase& c, uint64_t n, int threads, const std::vector<int>& cpus)
    : n_(n), param_(n), grad_(n) {
  FillCalibration(&param_, &grad_);
  TensorSpec s{"calibration", n, DType::kBF16, DType::kBF16, param_.data(), grad_.data(), 0, {}};
  OptimizerConfig cfg = CaseConfig(c, ExecutionMode::kHost, threads);
  cfg.host_cpus = cpus;
  opt_ = std::make_unique<HybridOptimizer>(std::vector<TensorSpec>{s}, cfg);
}

HostStepper::~HostStepper() = default;

double HostStepper::StepMs() {
  opt_->Step(1e-4);
  return opt_->last_step_times().gpu_update_ms;
}

HostBandwidth MeasureHostBandwidth(uint64_t n, int reps) {
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  auto par = [&](auto body) {
    tbb::parallel_for(tbb::blocked_range<uint64_t>(0, n, kGrainElements),
                      [&](const tbb::blocked_range<uint64_t>& r) {
                        for (uint64_t i = r.begin(); i < r.end(); ++i) body(i);
                      });
  };
  const double copy_ms = MedianMs(reps, [&] { par([&](uint64_t i) { c[i] = a[i]; }); });
  const double triad_ms =
      MedianMs(reps, [&] { par([&](uint64_t i) { c[i] = a[i] + 3.0f * b[i]; }); });
  return {8.0 * double(n) / (copy_ms * 1e6), 12.0 * double(n) / (triad_ms * 1e6)};
}

double MeasureStepRate(const KernelCase& c, ExecutionMode mode, uint64_t n, int threads, int reps) {
  const bool gpu = mode == ExecutionMode::kGpu;
#if !TANDEM_HAS_CUDA
  if (gpu) NoCuda("GPU step rate");
#endif
  if (!gpu) {
    HostStepper stepper(c, n, threads, {});
    std::vector<double> ms;
    for (int i = 0; i < reps + 1; ++i) {
      const double t = stepper.StepMs();
      if (i > 0) ms.push_back(t);
    }
    return double(n) / (Median(ms) * 1e6);
  }
  std::vector<uint16_t> hp(n), hg(n);
  FillCalibration(&hp, &hg);
  void* param = hp.data();
  void* grad = hg.data();
#if TANDEM_HAS_CUDA
  if (gpu) {
    Cuda(cudaMalloc(&param, n * 2), "cudaMalloc");
    Cuda(cudaMalloc(&grad, n * 2), "cudaMalloc");
    Cuda(cudaMemcpy(param, hp.data(), n * 2, cudaMemcpyHostToDevice), "upload");
    Cuda(cudaMemcpy(grad, hg.data(), n * 2, cudaMemcpyHostToDevice), "upload");
  }
#endif
  TensorSpec s{"calibration", n, DType::kBF16, DType::kBF16, param, grad, 0, {}};
  const OptimizerConfig cfg = CaseConfig(c, mode, threads);
  std::vector<double> ms;
  {
    HybridOptimizer opt({s}, cfg);
    for (int i = 0; i < reps + 1; ++i) {
      opt.Step(1e-4);
#if TANDEM_HAS_CUDA
      if (gpu) Cuda(cudaDeviceSynchronize(), "step");
#endif
      if (i > 0) ms.push_back(opt.last_step_times().gpu_update_ms);
    }
  }
#if TANDEM_HAS_CUDA
  if (gpu) {
    cudaFree(param);
    cudaFree(grad);
  }
#endif
  return double(n) / (Median(ms) * 1e6);
}

double MeasurePrepassRate(uint64_t n, int reps) {
#if !TANDEM_HAS_CUDA
  (void)n;
  (void)reps;
  NoCuda("pre-pass rate");
#else
  std::vector<uint16_t> hg(n);
  tbb::parallel_for(uint64_t{0}, n, [&](uint64_t i) {
    hg[i] = uint16_t(0x3A00 + (i % 97)) | (i % 2 ? 0x8000 : 0);
  });
  void *param = nullptr, *grad = nullptr;
  Cuda(cudaMalloc(&param, n * 2), "cudaMalloc");
  Cuda(cudaMalloc(&grad, n * 2), "cudaMalloc");
  Cuda(cudaMemcpy(param, hg.data(), n * 2, cudaMemcpyHostToDevice), "upload");
  Cuda(cudaMemcpy(grad, hg.data(), n * 2, cudaMemcpyHostToDevice), "upload");
  std::vector<double> ms;
  try {
    // The pre-pass reads the gradients only: the optimizer's formats do not change it.
    TensorSpec s{"prepass", n, DType::kBF16, DType::kBF16, param, grad, 0, {}};
    OptimizerConfig cfg;
    cfg.algorithm = Algorithm::kAdamW;
    cfg.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
    cfg.mode = ExecutionMode::kGpu;
    HybridOptimizer opt({s}, cfg);
    for (int i = 0; i < reps + 1; ++i) {
      opt.Step(1e-6);
      Cuda(cudaDeviceSynchronize(), "step");
      if (i > 0) ms.push_back(opt.last_step_times().prepass_ms);
    }
  } catch (...) {
    cudaFree(param);
    cudaFree(grad);
    throw;
  }
  cudaFree(param);
  cudaFree(grad);
  return double(n) / (Median(ms) * 1e6);
#endif
}

double MeasureStepOverheadMs(ExecutionMode mode, size_t tensors, int threads, int reps) {
  const bool gpu = mode == ExecutionMode::kGpu;
#if !TANDEM_HAS_CUDA
  if (gpu) NoCuda("step overhead");
#endif
  constexpr uint64_t kNumel = 256;
  const uint64_t n = kNumel * tensors;
  std::vector<uint16_t> hp(n), hg(n);
  for (uint64_t i = 0; i < n; ++i) {
    hp[i] = uint16_t(0x3C00 + i % 61);
    hg[i] = uint16_t(0x3A00 + (i % 97)) | (i % 2 ? 0x8000 : 0);
  }
  uint8_t* param = reinterpret_cast<uint8_t*>(hp.data());
  uint8_t* grad = reinterpret_cast<uint8_t*>(hg.data());
#if TANDEM_HAS_CUDA
  if (gpu) {
    void *p = nullptr, *g = nullptr;
    Cuda(cudaMalloc(&p, n * 2), "cudaMalloc");
    Cuda(cudaMalloc(&g, n * 2), "cudaMalloc");
    param = static_cast<uint8_t*>(p);
    grad = static_cast<uint8_t*>(g);
    Cuda(cudaMemcpy(param, hp.data(), n * 2, cudaMemcpyHostToDevice), "upload");
    Cuda(cudaMemcpy(grad, hg.data(), n * 2, cudaMemcpyHostToDevice), "upload");
  }
#endif
  std::vector<TensorSpec> specs;
  for (size_t t = 0; t < tensors; ++t) {
    // (snprintf: GCC 12 warns falsely about "t" + std::to_string(t) under -O3.)
    char name[32];
    std::snprintf(name, sizeof name, "t%zu", t);
    specs.push_back(TensorSpec{name,
                               kNumel,
                               DType::kBF16,
                               DType::kBF16,
                               param + t * kNumel * 2,
                               grad + t * kNumel * 2,
                               0,
                               {}});
  }
  OptimizerConfig cfg;
  cfg.algorithm = Algorithm::kAdamW;
  cfg.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  cfg.mode = mode;
  cfg.host_threads = threads;
  cfg.offload_fraction = 1.0;
  cfg.offload_compute = 1.0;
  double median = 0;
  auto free_device = [&] {
#if TANDEM_HAS_CUDA
    if (gpu) {
      cudaFree(param);
      cudaFree(grad);
    }
#endif
  };
  try {
    HybridOptimizer opt(specs, cfg);
    median = MedianMs(reps, [&] {
      opt.Step(1e-6);
#if TANDEM_HAS_CUDA
      if (gpu) Cuda(cudaDeviceSynchronize(), "step");
#endif
    });
  } catch (...) {
    free_device();
    throw;
  }
  free_device();
  return median;
}

#if TANDEM_HAS_CUDA

PcieResult MeasurePcie(size_t bytes, int reps, const std::function<void(const char*)>& on_done) {
  auto done = [&](const char* what) {
    if (on_done) on_done(what);
  };
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
    return gb / (MedianMs(reps,
                          [&] {
                            Cuda(cudaMemcpyAsync(dst, src, bytes, k, s1), "copy");
                            Cuda(cudaStreamSynchronize(s1), "sync");
                          }) /
                 1e3);
  };
  r.h2d = copy(dev_a, pin_a, cudaMemcpyHostToDevice);
  done("pinned H2D");
  r.d2h = copy(pin_b, dev_b, cudaMemcpyDeviceToHost);
  done("pinned D2H");
  r.h2d_pageable = copy(dev_a, page_a.data(), cudaMemcpyHostToDevice);
  done("pageable H2D");
  r.d2h_pageable = copy(page_b.data(), dev_b, cudaMemcpyDeviceToHost);
  done("pageable D2H");
  r.bidir =
      2 * gb /
      (MedianMs(reps,
                [&] {
                  Cuda(cudaMemcpyAsync(dev_a, pin_a, bytes, cudaMemcpyHostToDevice, s1), "h2d");
                  Cuda(cudaMemcpyAsync(pin_b, dev_b, bytes, cudaMemcpyDeviceToHost, s2), "d2h");
                  Cuda(cudaStreamSynchronize(s1), "sync");
                  Cuda(cudaStreamSynchronize(s2), "sync");
                }) /
       1e3);
  done("pinned both at once");
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  cudaFree(dev_a);
  cudaFree(dev_b);
  cudaFreeHost(pin_a);
  cudaFreeHost(pin_b);
  return r;
}

namespace {

// Pinned host and device buffers for copies both ways, and a stream per direction.
class CopyPair {
 public:
  explicit CopyPair(size_t bytes) : bytes_(bytes) {
    Cuda(cudaMalloc(&dev_up_, bytes), "cudaMalloc");
    Cuda(cudaMalloc(&dev_down_, bytes), "cudaMalloc");
    Cuda(cudaHostAlloc(&pin_up_, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    Cuda(cudaHostAlloc(&pin_down_, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    std::memset(pin_up_, 3, bytes);
    Cuda(cudaMemset(dev_down_, 5, bytes), "cudaMemset");
    Cuda(cudaStreamCreateWithFlags(&up_, cudaStreamNonBlocking), "stream");
    Cuda(cudaStreamCreateWithFlags(&down_, cudaStreamNonBlocking), "stream");
    // Blocking-sync events: a waiting thread sleeps instead of spinning on a host core
    // that the kernel under measurement needs.
    Cuda(cudaEventCreateWithFlags(&done_up_, cudaEventBlockingSync | cudaEventDisableTiming),
         "event");
    Cuda(cudaEventCreateWithFlags(&done_down_, cudaEventBlockingSync | cudaEventDisableTiming),
         "event");
  }
  ~CopyPair() {
    cudaStreamSynchronize(up_);
    cudaStreamSynchronize(down_);
    cudaEventDestroy(done_up_);
    cudaEventDestroy(done_down_);
    cudaStreamDestroy(up_);
    cudaStreamDestroy(down_);
    cudaFree(dev_up_);
    cudaFree(dev_down_);
    cudaFreeHost(pin_up_);
    cudaFreeHost(pin_down_);
  }
  CopyPair(const CopyPair&) = delete;
  CopyPair& operator=(const CopyPair&) = delete;

  void Up(int times = 1) {
    for (int i = 0; i < times; ++i)
      Cuda(cudaMemcpyAsync(dev_up_, pin_up_, bytes_, cudaMemcpyHostToDevice, up_), "h2d");
  }
  void Down(int times = 1) {
    for (int i = 0; i < times; ++i)
      Cuda(cudaMemcpyAsync(pin_down_, dev_down_, bytes_, cudaMemcpyDeviceToHost, down_), "d2h");
  }
  // Waits (sleeping) for everything queued both ways.
  void Wait() {
    Cuda(cudaEventRecord(done_up_, up_), "record");
    Cuda(cudaEventRecord(done_down_, down_), "record");
    Cuda(cudaEventSynchronize(done_up_), "sync");
    Cuda(cudaEventSynchronize(done_down_), "sync");
  }
  cudaStream_t up() const { return up_; }
  cudaStream_t down() const { return down_; }

 private:
  size_t bytes_;
  void *dev_up_ = nullptr, *dev_down_ = nullptr, *pin_up_ = nullptr, *pin_down_ = nullptr;
  cudaStream_t up_ = nullptr, down_ = nullptr;
  cudaEvent_t done_up_ = nullptr, done_down_ = nullptr;
};

}  // namespace

struct PcieLoad::Impl {
  int device;
  size_t bytes;
  CopyPair pair;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  Impl(int d, size_t b) : device(d), bytes(b), pair((Current(d), b)) {
    Cuda(cudaEventCreate(&e0), "event");
    Cuda(cudaEventCreate(&e1), "event");
  }
  ~Impl() {
    cudaSetDevice(device);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
  static void Current(int d) { Cuda(cudaSetDevice(d), "cudaSetDevice"); }
};

PcieLoad::PcieLoad(int device, size_t bytes) : impl_(std::make_unique<Impl>(device, bytes)) {}
PcieLoad::~PcieLoad() = default;

void PcieLoad::Round() {
  Impl::Current(impl_->device);
  impl_->pair.Up();
  impl_->pair.Down();
  impl_->pair.Wait();
}

double PcieLoad::TimedGbps(PcieDirection timed) {
  Impl::Current(impl_->device);
  CopyPair& pair = impl_->pair;
  const bool up = timed == PcieDirection::kH2D;
  cudaStream_t s = up ? pair.up() : pair.down();
  // The other direction first, three times as long as the timed copy.
  up ? pair.Down(3) : pair.Up(3);
  Cuda(cudaEventRecord(impl_->e0, s), "record");
  up ? pair.Up() : pair.Down();
  Cuda(cudaEventRecord(impl_->e1, s), "record");
  pair.Wait();
  float t = 0;
  Cuda(cudaEventElapsedTime(&t, impl_->e0, impl_->e1), "elapsed");
  return double(impl_->bytes) / (double(t) * 1e6);
}

double MeasurePcieUnderLoad(PcieDirection timed, size_t bytes, int reps) {
  PcieLoad load(0, bytes);
  std::vector<double> gbps;
  for (int i = 0; i < reps + 1; ++i) {  // the first is a warm-up
    const double g = load.TimedGbps(timed);
    if (i > 0) gbps.push_back(g);
  }
  return Median(gbps);
}

double MeasureStepRateUnderDmaLoad(const KernelCase& c, uint64_t n, int threads, int reps,
                                   size_t dma_bytes, double* dma_gbps) {
  PcieLoad pcie(0, dma_bytes);
  tools::BackgroundLoad load([&] { pcie.Round(); });
  load.WaitForRounds(1);  // the load runs (or has failed: Stop says so)
  const uint64_t first = load.rounds();
  const auto t0 = Clock::now();
  double rate = 0;
  try {
    rate = MeasureStepRate(c, ExecutionMode::kHost, n, threads, reps);
  } catch (...) {
    load.Stop();
    throw;
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  const uint64_t rounds = load.Stop() - first;
  if (dma_gbps) *dma_gbps = 2.0 * double(dma_bytes) * double(rounds) / (s * 1e9);
  return rate;
}

double MeasureHbmCopy(size_t bytes, int reps) {
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
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * double(bytes) / (Median(t) * 1e6);
}

std::string GpuName() {
  if (!CudaDeviceAvailable()) return "";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "";
  return prop.name;
}

int CudaDeviceCount() {
  if (!CudaDeviceAvailable()) return 0;
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::string GpuBusId(int device) {
  char id[32] = "";
  if (cudaDeviceGetPCIBusId(id, sizeof id, device) != cudaSuccess) return "";
  return id;
}

#else  // !TANDEM_HAS_CUDA

PcieResult MeasurePcie(size_t, int, const std::function<void(const char*)>&) {
  NoCuda("PCIe bandwidth");
}
double MeasurePcieUnderLoad(PcieDirection, size_t, int) { NoCuda("PCIe bandwidth under load"); }
double MeasureStepRateUnderDmaLoad(const KernelCase&, uint64_t, int, int, size_t, double*) {
  NoCuda("host step rate under DMA load");
}
double MeasureHbmCopy(size_t, int) { NoCuda("HBM copy bandwidth"); }
std::string GpuName() { return ""; }
int CudaDeviceCount() { return 0; }
std::string GpuBusId(int) { return ""; }

struct PcieLoad::Impl {};
PcieLoad::PcieLoad(int, size_t) { NoCuda("PCIe load"); }
PcieLoad::~PcieLoad() = default;
void PcieLoad::Round() { NoCuda("PCIe load"); }
double PcieLoad::TimedGbps(PcieDirection) { NoCuda("PCIe load"); }

#endif

}  // namespace tandem::bench
