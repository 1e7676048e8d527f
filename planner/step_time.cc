// Kernel rates (measured or roofline) and the step-time model of docs/planner.md.
#include "planner/step_time.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "engine/layout/state_layout.h"
#include "engine/layout/stream_layout.h"
#include "tandem/error.h"

namespace tandem::planner {
namespace {

using layout::StateBytesPerElement;

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

double KernelBytesPerElement(Algorithm algo, const HyperParams& hyper, const StateFormats& f,
                             DType param_dtype, DType grad_dtype) {
  // The gradient read, the state read and written, the parameter written (unless the
  // master is the parameter).
  double b = static_cast<double>(DTypeSize(grad_dtype)) +
             2 * StateBytesPerElement(algo, hyper, f, /*alias_master=*/false);
  if (!layout::MasterAliases(f.master, param_dtype)) b += static_cast<double>(DTypeSize(param_dtype));
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

namespace {

// Note [PCIe under concurrent traffic]: with gradients going down and parameters (or
// streamed state) going up at once, each direction gets less than it gets alone. A
// profile that measured each direction while the other ran says how much; an older one
// has only the sum of both at once, which the model splits in proportion to the bytes
// each way (the host-computed elements': gradient down, parameter up), never more than
// each direction alone.
void PcieRates(const Profile& p, DType grad_dtype, DType param_dtype, MachineRates* m,
               std::string* source) {
  const double down = static_cast<double>(DTypeSize(grad_dtype));
  const double up = static_cast<double>(DTypeSize(param_dtype));
  m->d2h_gbps = p.pcie.d2h_concurrent_gbps > 0
                    ? p.pcie.d2h_concurrent_gbps
                    : std::min(p.pcie.d2h_gbps, p.pcie.bidir_gbps * down / (down + up));
  m->h2d_gbps = p.pcie.h2d_concurrent_gbps > 0
                    ? p.pcie.h2d_concurrent_gbps
                    : std::min(p.pcie.h2d_gbps, p.pcie.bidir_gbps * up / (down + up));
  char buf[200];
  std::snprintf(buf, sizeof buf, "H2D %.1f, D2H %.1f GB/s with both busy (%s)", m->h2d_gbps,
                m->d2h_gbps,
                p.pcie.d2h_concurrent_gbps > 0 && p.pcie.h2d_concurrent_gbps > 0
                    ? "measured"
                    : "both-at-once figure split by bytes each way");
  *source = buf;
}

}  // namespace

Rates ResolveRates(const PlanInputs& in) {
  Rates r;
  const std::string key = KernelKey(in.algorithm, in.formats, in.grad_dtype);
  const double bytes =
      KernelBytesPerElement(in.algorithm, in.hyper, in.formats, in.param_dtype, in.grad_dtype);
  r.gpu_bytes_per_element = r.host_bytes_per_element = bytes;
  r.gpu_gparams_per_s =
      SideRate(in.profile.gpu.kernels, key, bytes, in.profile.gpu.hbm_copy_gbps, &r.gpu_source);
  // Note [The node is one machine]: the host's DRAM and cores are shared by the ranks of
  // one node. A profile that measured this many ranks at once says what each gets; else
  // each rank takes its share of the whole host's figures.
  const uint32_t ranks = std::max<uint32_t>(in.gpus_per_node, 1);
  const Profile::Node& node = in.profile.node;
  const bool at_once = ranks > 1 && node.ranks == static_cast<int>(ranks);
  const std::string n_ranks = std::to_string(ranks) + " ranks";
  const std::string shared = ranks > 1 ? ", shared by " + n_ranks : "";
  const auto node_kernel = node.host_kernels.find(key);
  if (at_once && node_kernel != node.host_kernels.end()) {
    r.host_gparams_per_s = node_kernel->second.gparams_per_s;
    r.host_source = "measured " + key + " with " + n_ranks + " at once";
  } else {
    r.host_gparams_per_s =
        SideRate(in.profile.host.kernels, key, bytes, in.profile.host.triad_gbps, &r.host_source) /
        ranks;
    r.host_source += shared;
  }
  // The compute-split model's rates (MachineRatesFor).
  r.machine.gpu_gparams = r.gpu_gparams_per_s;
  PcieRates(in.profile, in.grad_dtype, in.param_dtype, &r.machine, &r.pcie_source);
  r.dram_gbps = in.profile.host.dram_gbps > 0 ? in.profile.host.dram_gbps
                                              : in.profile.host.triad_gbps;
  r.dram_source = in.profile.host.dram_gbps > 0 ? (in.profile.builtin_default
                                                       ? "built-in: 4 x H200 host, 4 ranks"
                                                       : "measured, every GPU streaming")
                                                : "not in the profile: the host triad";
  char buf[320];
  if (at_once && node.h2d_concurrent_gbps > 0 && node.d2h_concurrent_gbps > 0) {
    r.machine.h2d_gbps = node.h2d_concurrent_gbps;
    r.machine.d2h_gbps = node.d2h_concurrent_gbps;
    std::snprintf(buf, sizeof buf, "H2D %.1f, D2H %.1f GB/s with both busy on every GPU (measured, %s at once)",
                  r.machine.h2d_gbps, r.machine.d2h_gbps, n_ranks.c_str());
    r.pcie_source = buf;
  } else if (ranks > 1) {
    // Every rank's DMA reads and writes the one host DRAM: each direction of each rank
    // gets at most 1 / (2 x ranks) of what the node's DMA moves.
    const double cap = r.dram_gbps / (2.0 * ranks);
    if (cap < r.machine.h2d_gbps || cap < r.machine.d2h_gbps) {
      r.machine.h2d_gbps = std::min(r.machine.h2d_gbps, cap);
      r.machine.d2h_gbps = std::min(r.machine.d2h_gbps, cap);
      std::snprintf(buf, sizeof buf,
                    "; each direction capped at its share of host DRAM under DMA, %.0f GB/s / "
                    "(2 x %u ranks) = %.1f GB/s",
                    r.dram_gbps, ranks, cap);
      r.pcie_source += buf;
    }
  }
  const double g = static_cast<double>(DTypeSize(in.grad_dtype));
  const double p = static_cast<double>(DTypeSize(in.param_dtype));
  const auto node_dma = node.host_kernels_under_dma.find(key);
  const auto dma = in.profile.host.kernels_under_dma.find(key);
  if (at_once && node_dma != node.host_kernels_under_dma.end()) {
    r.machine.host_gparams = node_dma->second.gparams_per_s;
    r.host_dma_source = "measured under DMA load " + key + " with " + n_ranks + " at once";
  } else if (dma != in.profile.host.kernels_under_dma.end()) {
    r.machine.host_gparams = dma->second.gparams_per_s / ranks;
    r.host_dma_source = "measured under DMA load " + key + shared;
  } else {
    // Note [Host stage in the pipeline]: the host kernels share DRAM with the PCIe DMA,
    // which writes each gradient into and reads each parameter out of host memory: the
    // stage moves (kernel bytes + DMA bytes) per element at the bandwidth the calibrated
    // rate implies. Fitted on the H200 machine's 16-core host on 2026-11-21
    // (bench/results/planner_accuracy_h200.json).
    r.machine.host_gparams = HostRateUnderDma(r.host_gparams_per_s, bytes, g, p);
    std::snprintf(buf, sizeof buf, "host kernel / %.3f for the DMA's DRAM traffic",
                  1.0 + (g + p) / bytes);
    r.host_dma_source = buf;
  }
  r.stream_bytes_per_element =
      layout::StreamBytesPerElement(in.algorithm, in.hyper, in.formats, in.param_dtype);
  // The pre-pass: measured, else kDefaultPrepassBytesPerElement at the HBM copy rate.
  if (in.profile.gpu.prepass_gparams_per_s > 0) {
    r.prepass_gparams_per_s = in.profile.gpu.prepass_gparams_per_s;
    r.prepass_source = "measured";
  } else {
    r.prepass_gparams_per_s = in.profile.gpu.hbm_copy_gbps / kDefaultPrepassBytesPerElement;
    std::snprintf(buf, sizeof buf, "not in the profile: %.0f B/elem at the HBM copy rate",
                  kDefaultPrepassBytesPerElement);
    r.prepass_source = buf;
  }
  // Note [Fixed step cost].
  auto overhead_source = [&](const Profile::Overhead& o, const char* measurer) {
    if (!o.measured) return std::string("not in the profile: counted as 0; ") + measurer;
    std::snprintf(buf, sizeof buf, "measured: %.3f ms + %.2f us x tensors", o.per_step_ms,
                  o.per_tensor_us);
    return std::string(buf);
  };
  r.engine_overhead_source =
      overhead_source(in.profile.step_overhead.engine, "tandem-bench calibrate measures it");
  r.binding_overhead_source =
      overhead_source(in.profile.step_overhead.binding, "tandem.calibrate_binding measures it");
  return r;
}

MachineRates MachineRatesFor(const Profile& profile, Algorithm algo, const StateFormats& formats,
                             DType grad_dtype, DType param_dtype, uint32_t ranks) {
  if (ranks == 0)
    throw Error(ErrorKind::kInvalidArgument, "machine rates: ranks per node must be >= 1");
  if (!(profile.gpu.hbm_copy_gbps > 0 && profile.host.triad_gbps > 0 && profile.pcie.h2d_gbps > 0 &&
        profile.pcie.d2h_gbps > 0 && profile.pcie.bidir_gbps > 0))
    throw Error(ErrorKind::kInvalidArgument,
                "machine rates: the profile '" + profile.machine +
                    "' needs every bandwidth > 0 (gpu.hbm_copy_gbps, host.triad_gbps, "
                    "pcie.h2d_gbps, pcie.d2h_gbps, pcie.bidir_gbps)");
  PlanInputs in;
  in.profile = profile;
  in.algorithm = algo;
  in.formats = formats;
  in.grad_dtype = grad_dtype;
  in.param_dtype = param_dtype;
  in.hyper.momentum = algo == Algorithm::kSGD ? 0.9 : 0.0;
  in.gpus_per_node = ranks;
  return ResolveRates(in).machine;
}

ComputeSplitInput SplitInputFor(const PlanInputs& in, const Rates& rates, uint64_t hot,
                                uint64_t cold, bool release) {
  ComputeSplitInput si;
  si.hot = hot;
  si.offloaded = cold;
  si.stream_bytes = rates.stream_bytes_per_element;
  si.grad_bytes = static_cast<double>(DTypeSize(in.grad_dtype));
  si.param_bytes = static_cast<double>(DTypeSize(in.param_dtype));
  // The host pays tandem::kHostChunkMs per pipeline chunk (Note [Host stage in the
  // pipeline]). It was fitted before the model had a per-step term, on host-computed
  // steps of hundreds of chunks, so a per-step cost of a few ms (Note [Fixed step cost] in
  // tandem/planner/profile.h) is a few us of it per chunk: within the fit's scatter, and kept as
  // fitted.
  si.chunk_elements = std::max<uint64_t>(in.chunk_elements, 1);
  if (release) si.stream_grad_bytes = si.grad_bytes;
  return si;
}

StepTime PredictStepTime(const PlanInputs& in, const Rates& rates, uint64_t hot, uint64_t cold,
                         uint64_t shard_elements, uint64_t streamed, bool release) {
  if (streamed > cold)
    throw Error(ErrorKind::kInvalidArgument, "step time: " + std::to_string(streamed) +
                                                 " streamed elements exceed the " +
                                                 std::to_string(cold) + " host-resident ones");
  const double ms = 1e3;
  const double g_bytes = static_cast<double>(DTypeSize(in.grad_dtype));
  StepTime t;
  // Pre-pass: the exact sum of squares and non-finite check read every gradient once on
  // the GPU, at its own rate (kDefaultPrepassBytesPerElement), never faster than the read.
  const double elements = static_cast<double>(shard_elements);
  t.prepass_ms = std::max(
      ms * elements * g_bytes / (in.profile.gpu.hbm_copy_gbps * 1e9),
      rates.prepass_gparams_per_s > 0 ? ms * elements / (rates.prepass_gparams_per_s * 1e9) : 0.0);
  // Note [Fixed step cost]: the engine's and the binding's per-step and per-tensor cost.
  const uint64_t tensors = in.model.tensors.size();
  t.engine_overhead_ms = in.profile.step_overhead.engine.ms(tensors);
  t.binding_overhead_ms = in.profile.step_overhead.binding.ms(tensors);
  const double fixed = t.engine_overhead_ms + t.binding_overhead_ms;
  // The four resources of Note [Three placement classes], one formula for every share.
  const ComputeSplitInput si = SplitInputFor(in, rates, hot, cold, release);
  t.streamed = streamed;
  t.split =
      PredictSplit(si, rates.machine,
                   cold > 0 ? static_cast<double>(streamed) / static_cast<double>(cold) : 0.0);
  t.gpu_ms = t.split.gpu_ms;
  if (cold == 0) {
    t.step_ms = t.prepass_ms + t.gpu_ms + fixed;
    return t;
  }
  t.d2h_ms = t.split.down_ms;
  t.h2d_ms = t.split.up_ms;
  // The host's kernels and its fixed dispatch/synchronisation cost per chunk it computes
  // (both in the split's host term).
  const uint64_t computed = cold - streamed;
  const uint64_t chunk_elements = si.chunk_elements;
  t.host_ms = t.split.host_ms;
  // Note [Fill at both ends]: a chain of stages run chunk by chunk takes the slowest
  // stage's whole time plus one chunk of every other stage: those before the slowest
  // delay its first chunk (fill), those after it follow its last chunk (drain), whatever
  // the order. The host pipeline's chain is d2h (gradient down), host kernel, h2d
  // (parameter up); the stream's is h2d (state up), the chunk's kernel, d2h (state down):
  // when its upload is the slowest, the drain is the last chunk's kernel and download;
  // when its download is, the fill is the first chunk's upload and kernel. With both
  // classes, the two chains run one after the other (Note [Three placement classes] in
  // tandem/compute_split.h).
  struct Chain {
    double time = 0, fill = 0, slowest = -1;
    Stage stage = Stage::kGpu;
  };
  auto chain = [](const double (&stage)[3], const Stage (&names)[3], double chunk_share) {
    Chain c;
    const int slowest = static_cast<int>(std::max_element(stage, stage + 3) - stage);
    for (int i = 0; i < 3; ++i)
      if (i != slowest) c.fill += chunk_share * stage[i];
    c.slowest = stage[slowest];
    c.stage = names[slowest];
    c.time = stage[slowest] + c.fill;
    return c;
  };
  const double g = si.grad_bytes, p = si.param_bytes;
  const double d2h = rates.machine.d2h_gbps * 1e6, h2d = rates.machine.h2d_gbps * 1e6;  // B/ms
  Chain stream, host;
  if (streamed > 0) {
    const double n = static_cast<double>(streamed);
    uint64_t chunk = streamed;
    if (rates.stream_bytes_per_element > 0)
      chunk = std::min<uint64_t>(
          streamed,
          std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(in.stream_chunk_bytes) /
                                                      rates.stream_bytes_per_element)));
    const double stage[3] = {si.stream_bytes * n / d2h, n / (rates.machine.gpu_gparams * 1e6),
                             (si.stream_bytes + si.stream_grad_bytes) * n / h2d};
    stream = chain(stage, {Stage::kD2H, Stage::kGpu, Stage::kH2D},
                   static_cast<double>(chunk) / n);
  }
  if (computed > 0) {
    const double n = static_cast<double>(computed);
    const double stage[3] = {g * n / d2h, t.host_ms, p * n / h2d};
    host = chain(stage, {Stage::kD2H, Stage::kHost, Stage::kH2D},
                 static_cast<double>(std::min(chunk_elements, computed)) / n);
  }
  t.fill_ms = stream.fill + host.fill;
  const double pipeline = stream.time + host.time;
  if (pipeline > t.gpu_ms) t.bottleneck = host.slowest >= stream.slowest ? host.stage : stream.stage;
  t.pipeline_ms = pipeline;
  t.step_ms = t.prepass_ms + std::max(t.gpu_ms, pipeline) + fixed;
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
