// Kernel rates (measured or roofline) and the step-time model of docs/planner.md.
#include "planner/step_time.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tandem/error.h"

namespace tandem::planner {
namespace {

double MasterBytes(MasterFormat m) {
  switch (m) {
    case MasterFormat::kF32:
      return 4;
    case MasterFormat::kBF16:
      return 2;
    case MasterFormat::kBF16Ecc8:
      return 3;
    case MasterFormat::kBF16Ecc16:
      return 4;
  }
  return 4;
}

double MomentBytes(MomentFormat m) {
  return m == MomentFormat::kQ8 ? 1.0 + 2.0 / kQuantGroup : 4.0;
}

// Rate of the kernel for `bytes` per element on a side with bandwidth `gbps`: measured if
// the profile has `key`, else the roofline at the efficiency of the measured kernel whose
// bytes per element are closest (kDefaultKernelEfficiency without any).
double SideRate(const std::map<std::string, KernelRate>& kernels, const std::string& key,
                double bytes, double gbps, std::string* source) {
  auto it = kernels.find(key);
  if (it != kernels.end()) {
    *source = "measured " + key;
    return it->second.gparams_per_s;
  }
  double efficiency = kDefaultKernelEfficiency;
  std::string from = "default";
  double best = INFINITY;
  for (const auto& [k, rate] : kernels) {
    Algorithm a;
    StateFormats f;
    DType g;
    if (!ParseKernelKey(k, &a, &f, &g)) continue;
    HyperParams h;
    h.momentum = 0.9;
    const double b = KernelBytesPerElement(
        a, h, f, f.master == MasterFormat::kF32 ? DType::kF32 : DType::kBF16, g);
    if (std::fabs(b - bytes) < best) {
      best = std::fabs(b - bytes);
      efficiency = rate.gparams_per_s * b / gbps;
      from = "as measured " + k;
    }
  }
  char buf[200];
  std::snprintf(buf, sizeof buf, "roofline %.2f B/elem at %.0f GB/s, %.0f%% efficiency (%s)", bytes,
                gbps, 100 * efficiency, from.c_str());
  *source = buf;
  return gbps * efficiency / bytes;
}

}  // namespace

bool MasterAliasesParam(MasterFormat master, DType param_dtype) {
  return (master == MasterFormat::kF32 && param_dtype == DType::kF32) ||
         (master != MasterFormat::kF32 && param_dtype == DType::kBF16);
}

double KernelBytesPerElement(Algorithm algo, const HyperParams& hyper, const StateFormats& f,
                             DType param_dtype, DType grad_dtype) {
  double b = static_cast<double>(DTypeSize(grad_dtype)) + 2 * MasterBytes(f.master);
  if (!MasterAliasesParam(f.master, param_dtype)) b += static_cast<double>(DTypeSize(param_dtype));
  if (HasMomentum(algo, hyper)) b += 2 * MomentBytes(f.momentum);
  if (HasVariance(algo)) b += 2 * MomentBytes(f.variance);
  return b;
}

bool ParseKernelKey(const std::string& key, Algorithm* algo, StateFormats* f, DType* grad) {
  std::vector<std::string> parts;
  std::stringstream in(key);
  for (std::string p; std::getline(in, p, '/');) parts.push_back(p);
  if (parts.size() != 5) return false;
  try {
    *algo = ParseAlgorithm(parts[0]);
    f->master = ParseMasterFormat(parts[1]);
    f->momentum = ParseMomentFormat(parts[2]);
    f->variance = ParseMomentFormat(parts[3]);
    *grad = ParseDType(parts[4]);
  } catch (const Error&) {
    return false;
  }
  return true;
}

// Host-side cost of one pipeline chunk beyond its kernel time (task dispatch over the
// host threads, waiting on the copy events): 29 us measured on a 16-core host with 2 Mi
// element chunks, the same on Llama-3 1B, 3B and 8B (Note [Host stage in the pipeline]).
constexpr double kChunkOverheadMs = 0.029;

Rates ResolveRates(const PlanInputs& in) {
  Rates r;
  const std::string key = KernelKey(in.algorithm, in.formats, in.grad_dtype);
  const double bytes =
      KernelBytesPerElement(in.algorithm, in.hyper, in.formats, in.param_dtype, in.grad_dtype);
  r.gpu_bytes_per_element = r.host_bytes_per_element = bytes;
  r.gpu_gparams_per_s =
      SideRate(in.profile.gpu.kernels, key, bytes, in.profile.gpu.hbm_copy_gbps, &r.gpu_source);
  // The host's DRAM and cores are shared by the ranks of one node.
  const double node_rate =
      SideRate(in.profile.host.kernels, key, bytes, in.profile.host.triad_gbps, &r.host_source);
  r.host_gparams_per_s = node_rate / std::max<uint32_t>(in.gpus_per_node, 1);
  if (in.gpus_per_node > 1)
    r.host_source += ", shared by " + std::to_string(in.gpus_per_node) + " ranks";
  return r;
}

StepTime PredictStepTime(const PlanInputs& in, const Rates& rates, uint64_t hot, uint64_t cold,
                         uint64_t shard_elements) {
  const double ms = 1e3;
  const double g_bytes = static_cast<double>(DTypeSize(in.grad_dtype));
  const double p_bytes = static_cast<double>(DTypeSize(in.param_dtype));
  StepTime t;
  // Pre-pass: global norm and non-finite check read every gradient once on the GPU.
  t.prepass_ms =
      ms * static_cast<double>(shard_elements) * g_bytes / (in.profile.gpu.hbm_copy_gbps * 1e9);
  t.gpu_ms = ms * static_cast<double>(hot) / (rates.gpu_gparams_per_s * 1e9);
  if (cold > 0) {
    const double n = static_cast<double>(cold);
    const double down = n * g_bytes, up = n * p_bytes;
    // Both directions busy at once: they share the measured bidirectional bandwidth in
    // proportion to their bytes, never more than each direction alone.
    const double d2h_bw =
        std::min(in.profile.pcie.d2h_gbps, in.profile.pcie.bidir_gbps * down / (down + up));
    const double h2d_bw =
        std::min(in.profile.pcie.h2d_gbps, in.profile.pcie.bidir_gbps * up / (down + up));
    t.d2h_ms = ms * down / (d2h_bw * 1e9);
    t.h2d_ms = ms * up / (h2d_bw * 1e9);
    // Note [Host stage in the pipeline]: the host kernels share DRAM with the PCIe DMA,
    // which writes each gradient into and reads each parameter out of host memory: the
    // stage moves (kernel bytes + DMA bytes) per element at the bandwidth the calibrated
    // rate implies. Each chunk also costs a fixed dispatch/synchronisation overhead
    // (kChunkOverheadMs). Both were fitted on the H200 machine's 16-core host on
    // 2026-11-21 (bench/results/planner_accuracy_h200.json).
    const double dma_factor = 1.0 + (g_bytes + p_bytes) / rates.host_bytes_per_element;
    const double chunks =
        std::ceil(n / static_cast<double>(std::max<uint64_t>(in.chunk_elements, 1)));
    t.host_ms = ms * n / (rates.host_gparams_per_s * 1e9) * dma_factor + chunks * kChunkOverheadMs;
    // Fill: the first chunk passes the two stages before the slowest one and the last
    // chunk the one after it; one chunk's time in each of the other two stages.
    const double chunk = static_cast<double>(std::min<uint64_t>(in.chunk_elements, cold)) / n;
    const double stage[3] = {t.d2h_ms, t.host_ms, t.h2d_ms};
    const Stage names[3] = {Stage::kD2H, Stage::kHost, Stage::kH2D};
    const int slowest = static_cast<int>(std::max_element(stage, stage + 3) - stage);
    for (int i = 0; i < 3; ++i)
      if (i != slowest) t.fill_ms += chunk * stage[i];
    const double pipeline = stage[slowest] + t.fill_ms;
    if (pipeline > t.gpu_ms) t.bottleneck = names[slowest];
    t.step_ms = t.prepass_ms + std::max(t.gpu_ms, pipeline);
  } else {
    t.step_ms = t.prepass_ms + t.gpu_ms;
  }
  return t;
}

const char* Name(Stage s) noexcept {
  switch (s) {
    case Stage::kGpu:
      return "gpu";
    case Stage::kD2H:
      return "d2h";
    case Stage::kHost:
      return "host";
    case Stage::kH2D:
      return "h2d";
  }
  return "?";
}

}  // namespace tandem::planner
