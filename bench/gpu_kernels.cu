// tandem-bench-gpu: throughput of the fused CUDA optimizer kernels against the device's
// own copy bandwidth, measured in the same run.
//
// For each kernel: the fewest bytes per element it must move (each input read once, each
// output written once) over the bandwidth of a large device-to-device copy (bytes read +
// written) is its roofline; the table reports the achieved fraction. Layouts: one flat
// span of --elements elements, and the tensor list of a Llama-3 model (one span per
// tensor, 256-byte aligned like a caching allocator), plus a flat span of the same total
// element count so that the two compare directly. Timing: CUDA events around each launch,
// --warmup launches first, the median of --reps. Inputs are random, never zeros.
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/model_shapes.h"
#include "cuda/gpu_step.h"
#include "engine/fp_bits.h"
#include "engine/step_scalars.h"
#include "tandem/error.h"
#include "tandem/version.h"

namespace tandem::bench {
namespace {

#define BENCH_CUDA(call)                                                 \
  do {                                                                   \
    const cudaError_t bench_err_ = (call);                               \
    if (bench_err_ != cudaSuccess) {                                     \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(bench_err_));                      \
      std::exit(2);                                                      \
    }                                                                    \
  } while (0)

// ---- Random fill kernels (a hash of the index: deterministic, no zeros). ----

__device__ __forceinline__ uint32_t Hash(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<uint32_t>(x >> 16);
}

// Uniform in [-1, 1) without zero.
__device__ __forceinline__ float Uniform(uint64_t i, uint32_t seed) {
  const float u = static_cast<float>(Hash(i, seed) >> 8) * (1.0f / 8388608.0f) - 1.0f;
  return u == 0.0f ? 0.5f : u;
}

__global__ void FillF32(float* p, uint64_t n, uint32_t seed, float scale, bool nonneg) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float u = Uniform(i, seed);
    p[i] = (nonneg ? (u < 0 ? -u : u) : u) * scale;
  }
}

__global__ void FillBf16(uint16_t* p, uint64_t n, uint32_t seed, float scale) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x)
    p[i] = num::F32ToBf16(Uniform(i, seed) * scale);
}

__global__ void FillBytes(uint8_t* p, uint64_t n, uint32_t seed, uint32_t lo, uint32_t span) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<uint8_t>(lo + Hash(i, seed) % span);
}

// Clears the sign bit of bf16 values (group scales are positive).
__global__ void ClearSign(uint16_t* p, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x)
    p[i] &= 0x7FFFu;
}

constexpr unsigned kFillGrid = 132 * 16, kFillBlock = 256;

// ---- Kernels under test. ----

struct KernelCase {
  std::string name;
  Algorithm algo;
  StateFormats formats;
  DType grad_dtype;
  bool param_bf16_separate;   // write a separate bf16 parameter (f32 master only)
  double bytes_per_elem;      // the fewest bytes moved per element
  double footprint_per_elem;  // device bytes held per element (state, grad, param)
};

std::vector<KernelCase> Cases() {
  using MF = MasterFormat;
  using Q = MomentFormat;
  // Bytes: grad read; master/m/v read + written; q8 scales 2 bytes per 32 elements read +
  // written; a separate bf16 parameter written. bf16-master cases write the parameter
  // through the master's own bf16 (param aliases master.bf16).
  const double scale_rw = 2.0 * 2.0 / 32.0;
  return {
      {"adamw_f32_bf16grad",
       Algorithm::kAdamW,
       {MF::kF32, Q::kF32, Q::kF32},
       DType::kBF16,
       true,
       2 + 3 * 8 + 2,
       16},
      {"adamw_ecc8_q8_q8",
       Algorithm::kAdamW,
       {MF::kBF16Ecc8, Q::kQ8, Q::kQ8},
       DType::kBF16,
       false,
       2 + 2 * 3 + 2 + 2 + 2 * scale_rw,
       7.125},
      {"adamw_ecc16_q8_q8",
       Algorithm::kAdamW,
       {MF::kBF16Ecc16, Q::kQ8, Q::kQ8},
       DType::kBF16,
       false,
       2 + 2 * 4 + 2 + 2 + 2 * scale_rw,
       8.125},
      {"lion_ecc8_q8",
       Algorithm::kLion,
       {MF::kBF16Ecc8, Q::kQ8, Q::kF32},
       DType::kBF16,
       false,
       2 + 2 * 3 + 2 + scale_rw,
       6.0625},
      {"sgd_ecc8_q8",
       Algorithm::kSGD,
       {MF::kBF16Ecc8, Q::kQ8, Q::kF32},
       DType::kBF16,
       false,
       2 + 2 * 3 + 2 + scale_rw,
       6.0625},
  };
}

HyperParams HyperFor(Algorithm algo) {
  HyperParams h;
  if (algo == Algorithm::kAdamW) h.weight_decay = 0.01;
  if (algo == Algorithm::kLion) h.beta2 = 0.99, h.weight_decay = 0.1;
  if (algo == Algorithm::kSGD) h.momentum = 0.9;
  return h;
}

// Device arrays of one kernel case over a list of tensors, carved from one allocation
// per array kind with each tensor's start rounded up to 256 bytes.
class StateArrays {
 public:
  StateArrays(const KernelCase& kc, const std::vector<size_t>& sizes) {
    const StateFormats& f = kc.formats;
    const bool m_q8 = f.momentum == MomentFormat::kQ8, v_q8 = f.variance == MomentFormat::kQ8;
    const bool adam = kc.algo == Algorithm::kAdamW || kc.algo == Algorithm::kAdam;
    grad_ = Array(sizes, DTypeSize(kc.grad_dtype));
    if (f.master == MasterFormat::kF32) {
      master_ = Array(sizes, 4);
      if (kc.param_bf16_separate) param_ = Array(sizes, 2);
    } else {
      master_ = Array(sizes, 2);
      if (f.master != MasterFormat::kBF16)
        ecc_ = Array(sizes, f.master == MasterFormat::kBF16Ecc8 ? 1 : 2);
    }
    m_ = Array(sizes, m_q8 ? 1 : 4);
    if (m_q8) m_scales_ = Array(sizes, 2, true);
    if (adam) {
      v_ = Array(sizes, v_q8 ? 1 : 4);
      if (v_q8) v_scales_ = Array(sizes, 2, true);
    }
    Fill(kc);
    uint64_t ge = 0, gg = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      StepSpan sp;
      sp.n = sizes[i];
      sp.formats = f;
      sp.grad = At(grad_, ge, DTypeSize(kc.grad_dtype));
      sp.grad_dtype = kc.grad_dtype;
      if (f.master == MasterFormat::kF32) {
        sp.master.f32 = static_cast<float*>(At(master_, ge, 4));
        if (kc.param_bf16_separate) {
          sp.param = At(param_, ge, 2);
          sp.param_dtype = DType::kBF16;
        }
      } else {
        sp.master.bf16 = static_cast<uint16_t*>(At(master_, ge, 2));
        sp.param = sp.master.bf16;  // the model's bf16 weight is the master's bf16
        sp.param_dtype = DType::kBF16;
        if (f.master == MasterFormat::kBF16Ecc8)
          sp.master.ecc8 = static_cast<int8_t*>(At(ecc_, ge, 1));
        if (f.master == MasterFormat::kBF16Ecc16)
          sp.master.ecc16 = static_cast<int16_t*>(At(ecc_, ge, 2));
      }
      if (m_q8) {
        sp.m.codes = static_cast<uint8_t*>(At(m_, ge, 1));
        sp.m.scales = static_cast<uint16_t*>(At(m_scales_, gg, 2));
      } else {
        sp.m.f32 = static_cast<float*>(At(m_, ge, 4));
      }
      if (adam) {
        if (v_q8) {
          sp.v.codes = static_cast<uint8_t*>(At(v_, ge, 1));
          sp.v.scales = static_cast<uint16_t*>(At(v_scales_, gg, 2));
        } else {
          sp.v.f32 = static_cast<float*>(At(v_, ge, 4));
        }
      }
      spans_.push_back(sp);
      ge += RoundUp(sizes[i]);
      gg += RoundUp((sizes[i] + kQuantGroup - 1) / kQuantGroup);
    }
  }
  ~StateArrays() {
    for (void* p : {grad_.p, param_.p, master_.p, ecc_.p, m_.p, m_scales_.p, v_.p, v_scales_.p})
      if (p != nullptr) cudaFree(p);
  }
  const std::vector<StepSpan>& spans() const { return spans_; }

 private:
  struct Buf {
    void* p = nullptr;
    uint64_t count = 0;  // elements, with padding
    size_t elem = 0;
  };
  static uint64_t RoundUp(uint64_t n) { return (n + 127) / 128 * 128; }  // 256 B of 2-byte
  static Buf Array(const std::vector<size_t>& sizes, size_t elem, bool per_group = false) {
    Buf b;
    b.elem = elem;
    for (size_t n : sizes) b.count += RoundUp(per_group ? (n + kQuantGroup - 1) / kQuantGroup : n);
    BENCH_CUDA(cudaMalloc(&b.p, std::max<uint64_t>(b.count * elem, 256)));
    return b;
  }
  static void* At(const Buf& b, uint64_t index, size_t elem) {
    return static_cast<uint8_t*>(b.p) + index * elem;
  }
  void Fill(const KernelCase& kc) {
    auto f32 = [](Buf& b, uint32_t seed, float scale, bool nonneg) {
      if (b.p)
        FillF32<<<kFillGrid, kFillBlock>>>(static_cast<float*>(b.p), b.count, seed, scale, nonneg);
    };
    auto bf16 = [](Buf& b, uint32_t seed, float scale) {
      if (b.p)
        FillBf16<<<kFillGrid, kFillBlock>>>(static_cast<uint16_t*>(b.p), b.count, seed, scale);
    };
    auto bytes = [](Buf& b, uint32_t seed, uint32_t lo, uint32_t span) {
      if (b.p)
        FillBytes<<<kFillGrid, kFillBlock>>>(static_cast<uint8_t*>(b.p), b.count * b.elem, seed, lo,
                                             span);
    };
    if (kc.grad_dtype == DType::kF32)
      f32(grad_, 1, 1e-2f, false);
    else
      bf16(grad_, 1, 1e-2f);
    if (kc.formats.master == MasterFormat::kF32)
      f32(master_, 2, 0.05f, false);
    else
      bf16(master_, 2, 0.05f);
    if (param_.p) bf16(param_, 3, 1.0f);
    bytes(ecc_, 4, 0, 256);
    if (kc.formats.momentum == MomentFormat::kQ8) {
      bytes(m_, 5, 0, 256);
      bf16(m_scales_, 6, 1e-3f);  // made positive below
    } else {
      f32(m_, 5, 1e-3f, false);
    }
    if (v_.p) {
      if (kc.formats.variance == MomentFormat::kQ8) {
        bytes(v_, 7, 1, 255);
        bf16(v_scales_, 8, 1e-2f);
      } else {
        f32(v_, 7, 1e-4f, true);
      }
    }
    // Scales must be positive: clear the sign bit of the bf16 scales.
    for (Buf* b : {&m_scales_, &v_scales_})
      if (b->p) ClearSign<<<kFillGrid, kFillBlock>>>(static_cast<uint16_t*>(b->p), b->count);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaDeviceSynchronize());
  }
  Buf grad_, param_, master_, ecc_, m_, m_scales_, v_, v_scales_;
  std::vector<StepSpan> spans_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

// Median milliseconds of `reps` timed calls of fn (after `warmup` untimed ones).
template <typename Fn>
double TimeMs(Fn&& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  BENCH_CUDA(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    BENCH_CUDA(cudaEventRecord(a));
    fn();
    BENCH_CUDA(cudaEventRecord(b));
    BENCH_CUDA(cudaEventSynchronize(b));
    float t = 0;
    BENCH_CUDA(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  return Median(ms);
}

// Copy bandwidth in bytes/s (read + written) of a device-to-device copy of `bytes`.
double CopyBandwidth(size_t bytes, int warmup, int reps) {
  void *src = nullptr, *dst = nullptr;
  BENCH_CUDA(cudaMalloc(&src, bytes));
  BENCH_CUDA(cudaMalloc(&dst, bytes));
  FillBytes<<<kFillGrid, kFillBlock>>>(static_cast<uint8_t*>(src), bytes, 11, 0, 256);
  BENCH_CUDA(cudaGetLastError());
  const double ms =
      TimeMs([&] { BENCH_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); },
             warmup, reps);
  BENCH_CUDA(cudaFree(src));
  BENCH_CUDA(cudaFree(dst));
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3);
}

struct Row {
  std::string kernel, layout;
  size_t elements = 0, tensors = 0;
  double bytes_per_elem = 0, ms = 0, gbps = 0, roofline_fraction = 0, gparams = 0;
  size_t launches_per_step = 1;
};

Row RunCase(const KernelCase& kc, const std::string& layout, const std::vector<size_t>& sizes,
            double copy_bw, int warmup, int reps) {
  StateArrays arrays(kc, sizes);
  gpu::StepPlan plan(kc.algo, kc.formats, arrays.spans(),
                     std::vector<uint32_t>(arrays.spans().size(), 0));
  const StepScalars s = ComputeStepScalars(kc.algo, HyperFor(kc.algo), 1e-4, 10, 1.0);
  const double ms = TimeMs([&] { plan.Launch(&s, 1, nullptr); }, warmup, reps);
  BENCH_CUDA(cudaGetLastError());
  Row r;
  r.kernel = kc.name;
  r.layout = layout;
  r.tensors = sizes.size();
  for (size_t n : sizes) r.elements += n;
  r.bytes_per_elem = kc.bytes_per_elem;
  r.ms = ms;
  r.gbps = kc.bytes_per_elem * static_cast<double>(r.elements) / (ms * 1e-3) / 1e9;
  r.roofline_fraction = r.gbps * 1e9 / copy_bw;
  r.gparams = static_cast<double>(r.elements) / (ms * 1e-3) / 1e9;
  return r;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  using namespace tandem;
  using namespace tandem::bench;
  CLI::App app{"tandem-bench-gpu: fused CUDA optimizer kernels against the copy roofline"};
  app.set_version_flag("--version", std::string("tandem-bench-gpu ") + tandem::kVersion);
  size_t elements = size_t{1} << 30;
  std::string model = "llama3-8b", json_path, only;
  int warmup = 3, reps = 15;
  size_t copy_bytes = size_t{4} << 30;
  app.add_option("--elements", elements, "elements of the flat buffer (default 2^30)");
  app.add_option("--model", model, "tensor list: llama3-1b|3b|8b|70b, or none");
  app.add_option("--warmup", warmup, "untimed launches before timing");
  app.add_option("--reps", reps, "timed launches (median reported)");
  app.add_option("--copy-bytes", copy_bytes, "bytes of the reference device copy");
  app.add_option("--kernels", only, "comma-separated subset of kernel names");
  app.add_option("--json", json_path, "write results as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  if (!gpu::DeviceAvailable()) {
    std::fprintf(stderr, "tandem-bench-gpu: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  try {
    const double copy_bw = CopyBandwidth(copy_bytes, warmup, reps);
    std::printf("device %s, %d SMs; device-to-device copy of %.2f GB: %.1f GB/s (read+write)\n",
                prop.name, prop.multiProcessorCount, copy_bytes / 1e9, copy_bw / 1e9);
    std::vector<TensorShape> shapes;
    if (model != "none") shapes = LlamaShapes(model);
    std::vector<size_t> model_sizes;
    for (const auto& s : shapes) model_sizes.push_back(s.numel);
    const size_t model_total = TotalElements(shapes);

    // Every flat case first, then the model-sized ones: a flat 2^30 case measured right
    // after another kernel's ~100 GB of model-sized buffers were freed read 3-10 points of
    // copy lower than the same case in a fresh process (H200; docs/gpu_kernels.md,
    // "Benchmark"); in this order it runs in a fresh heap.
    std::vector<KernelCase> cases;
    for (const KernelCase& kc : Cases())
      if (only.empty() || ("," + only + ",").find("," + kc.name + ",") != std::string::npos)
        cases.push_back(kc);
    std::vector<std::vector<Row>> per_case(cases.size());
    for (size_t c = 0; c < cases.size(); ++c) {
      per_case[c].push_back(RunCase(cases[c], "flat", {elements}, copy_bw, warmup, reps));
      std::fprintf(stderr, "  %s flat: %.3f ms\n", cases[c].name.c_str(), per_case[c].back().ms);
    }
    for (size_t c = 0; c < cases.size() && model_total != 0; ++c) {
      const KernelCase& kc = cases[c];
      size_t free_b = 0, total_b = 0;
      BENCH_CUDA(cudaMemGetInfo(&free_b, &total_b));
      const double footprint = kc.footprint_per_elem * static_cast<double>(model_total);
      if (footprint * 1.05 + 1e9 > static_cast<double>(free_b)) {
        std::fprintf(stderr, "  %s: %s needs %.1f GB, %.1f GB free: skipped\n", kc.name.c_str(),
                     model.c_str(), footprint / 1e9, free_b / 1e9);
        continue;
      }
      per_case[c].push_back(RunCase(kc, model, model_sizes, copy_bw, warmup, reps));
      per_case[c].push_back(RunCase(kc, "flat-same-count", {model_total}, copy_bw, warmup, reps));
    }
    std::vector<Row> rows;
    for (const auto& rs : per_case) rows.insert(rows.end(), rs.begin(), rs.end());

    nlohmann::json j;
    j["device"] = prop.name;
    j["sm_count"] = prop.multiProcessorCount;
    j["copy_bytes"] = copy_bytes;
    j["copy_bandwidth_GBps"] = copy_bw / 1e9;
    j["warmup"] = warmup;
    j["reps"] = reps;
    j["model"] = model;
    j["model_elements"] = model_total;
    std::ostringstream cmd;
    for (int i = 0; i < argc; ++i) cmd << (i ? " " : "") << argv[i];
    j["command"] = cmd.str();
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    j["date"] = date;
    for (const Row& r : rows)
      j["results"].push_back({{"kernel", r.kernel},
                              {"layout", r.layout},
                              {"elements", r.elements},
                              {"tensors", r.tensors},
                              {"launches_per_step", r.launches_per_step},
                              {"bytes_per_element", r.bytes_per_elem},
                              {"median_ms", r.ms},
                              {"GBps", r.gbps},
                              {"roofline_fraction", r.roofline_fraction},
                              {"Gparams_per_s", r.gparams}});
    if (!json_path.empty()) {
      std::ofstream(json_path) << j.dump(2) << "\n";
    }
    std::printf("\nroofline: copy %.1f GB/s; fraction = (bytes/elem * elems / time) / copy\n",
                copy_bw / 1e9);
    std::printf("%-20s %-16s %12s %7s %10s %9s %8s %9s\n", "kernel", "layout", "elements", "B/elem",
                "median_ms", "GB/s", "of_copy", "Gparam/s");
    for (const Row& r : rows)
      std::printf("%-20s %-16s %12zu %7.3f %10.3f %9.1f %7.1f%% %9.1f\n", r.kernel.c_str(),
                  r.layout.c_str(), r.elements, r.bytes_per_elem, r.ms, r.gbps,
                  100.0 * r.roofline_fraction, r.gparams);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem-bench-gpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
