// tandem-bench calibrate: this machine's host (and GPU) figures -> a tandem-plan profile,
// and a report of each figure's spread over repeated measurements.
//
// Each figure is measured `repeats` times (each time the median of `reps` timed
// repetitions); the profile takes the median, the report keeps min / median / max and the
// relative spread (max - min) / median, and a spread above `max_spread` is warned about:
// such a figure says more about the machine's other load than about Tandem.
//
// With a GPU it also measures what the compute-split model takes (tandem::MachineRates,
// planner::MachineRatesFor): each PCIe direction while the other is busy at once
// (pcie.*_concurrent_gbps), the host kernels while pinned copies run both ways
// (host.kernels_under_dma), and the fused GPU kernel (gpu.kernels); and what the step-time
// model takes beyond them: the gradient pre-pass (gpu.prepass_gparams_per_s) and the
// engine's fixed step cost (step_overhead.engine, Note [Fixed step cost]).
//
// With --ranks N (N > 1) it then measures N ranks of the node at once (node_calibrate.h):
// the profile's "node" figures, each the slowest rank's, and host.dram_gbps, the host DRAM
// traffic of every GPU's DMA together.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "commands.h"
#include "cpu_simd/cpu_pinning.h"
#include "cpu_simd/host_kernels.h"
#include "measure.h"
#include "node_calibrate.h"
#include "output_file.h"
#include "progress.h"
#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tandem/planner.h"
#include "tandem/version.h"

namespace tandem::bench {
namespace {

// PCIe copies: 512 MiB each (seconds at tens of GB/s: launch costs vanish). The DMA load
// beside the host kernels moves 256 MiB each way per round.
constexpr size_t kPcieBytes = size_t{512} << 20;
constexpr size_t kDmaLoadBytes = size_t{256} << 20;
// The fixed step cost's two tensor counts (Llama-3 1B has 146 tensors, 8B 291) and the
// steps timed for each (milliseconds each: many, for a stable median).
constexpr size_t kFewTensors = 16, kManyTensors = 512;
constexpr int kOverheadReps = 50;

// "41% of host copy at 12.25 B/param": the step's fewest bytes moved per second against
// the copy bandwidth measured in the same run.
std::string PercentOf(double gparams, double bytes, double limit_gbps, const char* limit_name) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.0f%% of %s at %.4g B/param", 100 * gparams * bytes / limit_gbps,
                limit_name, bytes);
  return buf;
}

// A step rate's roofline: the copy bandwidth measured in the same run.
struct Roofline {
  double bytes_per_param = 0;  // 0: the figure is not a step rate
  double limit_gbps = 0;
  std::string limit_name;
};

struct Figure {
  std::string name, unit;
  Spread spread;
  Roofline roofline;
  std::string roofline_text;  // "41% of host copy at 12.25 B/param"; empty for bandwidths
};

class Report {
 public:
  Report(const CalibrateOptions& o, tools::Progress& bar) : o_(o), bar_(bar) {}

  // Measures `fn` o_.repeats times; prints and records the figure; returns its median.
  Spread Measure(const std::string& name, const std::string& unit,
                 const std::function<double()>& fn, const Roofline& roofline = {}) {
    bar_.Note(name);
    std::vector<double> values;
    for (int i = 0; i < o_.repeats; ++i) {
      values.push_back(fn());
      bar_.Advance();
    }
    Figure f{name, unit, SpreadOf(values), roofline, ""};
    if (roofline.bytes_per_param > 0)
      f.roofline_text = PercentOf(f.spread.median, roofline.bytes_per_param, roofline.limit_gbps,
                                  roofline.limit_name.c_str());
    bar_.Print("  %-36s %8.2f %-8s spread %4.1f%% (min %.2f, max %.2f)%s%s\n", name.c_str(),
               f.spread.median, unit.c_str(), 100 * f.spread.relative(), f.spread.min, f.spread.max,
               f.roofline_text.empty() ? "" : "  = ", f.roofline_text.c_str());
    if (o_.repeats > 1 && f.spread.relative() > o_.max_spread) {
      bar_.Print(
          "  warning: %s varies by %.0f%% (> %.0f%%) over %d repeats: too wide to "
          "trust; rerun on a quiet machine or with larger sizes\n",
          name.c_str(), 100 * f.spread.relative(), 100 * o_.max_spread, o_.repeats);
      wide_.push_back(name);
    }
    figures_.push_back(f);
    return f.spread;
  }

  const std::vector<std::string>& wide() const { return wide_; }

  // `gpu_name` empty: the GPU was not measured (the profile then holds reference figures).
  nlohmann::json ToJson(const planner::Profile& p, const std::string& gpu_name) const {
    nlohmann::json figs = nlohmann::json::array();
    for (const Figure& f : figures_) {
      nlohmann::json j{
          {"name", f.name},      {"unit", f.unit},      {"median", f.spread.median},
          {"min", f.spread.min}, {"max", f.spread.max}, {"spread", f.spread.relative()}};
      if (f.roofline.bytes_per_param > 0) {
        j["roofline"] = f.roofline_text;
        j["bytes_per_param"] = f.roofline.bytes_per_param;
        j["limit"] = f.roofline.limit_name;
        j["limit_gbps"] = f.roofline.limit_gbps;
        j["fraction_of_limit"] =
            f.spread.median * f.roofline.bytes_per_param / f.roofline.limit_gbps;
      }
      figs.push_back(j);
    }
    nlohmann::json out = {{"benchmark", "tandem-bench calibrate"},
            {"command", o_.command},
            {"version", kVersion},
            {"date", p.date},
            {"machine",
             {{"cpu", CpuName()},
              {"host_threads", p.host.threads},
              {"isa", p.host.isa},
              {"gpu", gpu_name}}},
            {"repeats", o_.repeats},
            {"reps", o_.reps},
            {"host_elements", o_.host_elements},
            {"gpu_elements", gpu_name.empty() ? 0 : o_.gpu_elements},
            {"max_spread", o_.max_spread},
            {"too_wide", wide_},
            {"figures", figs},
            {"profile", o_.profile_path}};
    if (node_) {
      nlohmann::json ranks = nlohmann::json::array();
      for (const RankFigures& f : node_->figures)
        ranks.push_back({{"name", f.name},
                         {"unit", f.unit},
                         {"per_rank", f.per_rank},
                         {"slowest", f.slowest()},
                         {"sum", f.sum()}});
      out["node"] = {{"ranks", node_->node.ranks},
                     {"gpus", node_->node.gpus},
                     {"cpus", node_->cpus},
                     {"dma_gbps", node_->dma_gbps},
                     {"no_gpu_reason", node_->no_gpu_reason},
                     {"figures", ranks}};
    }
    return out;
  }

  void SetNode(const NodeMeasurement* node) { node_ = node; }

 private:
  const CalibrateOptions& o_;
  tools::Progress& bar_;
  std::vector<Figure> figures_;
  std::vector<std::string> wide_;
  const NodeMeasurement* node_ = nullptr;
};

// "1.52, 1.55, 1.60" for a rank figure's values.
std::string PerRank(const RankFigures& f) {
  std::string s;
  for (double v : f.per_rank) {
    char b[32];
    std::snprintf(b, sizeof b, "%s%.2f", s.empty() ? "" : ", ", v);
    s += b;
  }
  return s;
}

}  // namespace

void CheckCalibrateOptions(const CalibrateOptions& o) {
  auto bad = [](const std::string& m) { throw Error(ErrorKind::kInvalidArgument, m); };
  if (!o.base.empty() && !planner::BuiltinProfile(o.base))
    bad("--base must be h200 or grace-hopper, got '" + o.base + "'");
  if (o.repeats < 1) bad("--repeats must be an integer >= 1, got " + std::to_string(o.repeats));
  if (o.reps < 1) bad("--reps must be an integer >= 1, got " + std::to_string(o.reps));
  // Each rank measures on its own share of this process's CPUs (tandem::RankCpus).
  const int cpus = static_cast<int>(cpu::ProcessCpus().size());
  if (o.ranks < 1 || o.ranks > cpus)
    bad("--ranks must be an integer in [1, " + std::to_string(cpus) +
        "] (one CPU of this process per rank at least), got " + std::to_string(o.ranks));
  if (o.host_elements < 1)
    bad("--host-elements must be an integer >= 1, got " + std::to_string(o.host_elements));
  if (o.gpu_elements < 1)
    bad("--gpu-elements must be an integer >= 1, got " + std::to_string(o.gpu_elements));
  // The limit HybridOptimizer applies to OptimizerConfig::host_threads, in the words of
  // tandem.torch's host_threads check.
  const int limit = MaxHostThreads();
  if (o.threads < 0 || o.threads > limit)
    bad("--threads must be an integer in [0, " + std::to_string(limit) + "] (0: all cores), got " +
        std::to_string(o.threads));
  if (!(o.max_spread >= 0) || !std::isfinite(o.max_spread))
    bad("--max-spread must be a finite number >= 0, got " + std::to_string(o.max_spread));
  // The fp32-state step holds bf16 parameters and gradients and three fp32 arrays.
  CheckFitsHostMemory("--host-elements", o.host_elements, 16.0,
                      "16 bytes per element for the fp32-state step");
  tools::CheckOutputFile("-o/--out", o.profile_path);
  if (!o.json_path.empty())
    tools::CheckOutputFile("--json", o.json_path, {{"-o/--out", o.profile_path}});
}

std::string DefaultCalibrationBase() {
#if defined(__aarch64__)
  return "grace-hopper";
#else
  return "h200";
#endif
}

int Calibrate(const CalibrateOptions& o) {
  CheckCalibrateOptions(o);
  const bool gpu = TANDEM_HAS_CUDA && !o.host_only && CudaDeviceAvailable();
  const auto& cases = CalibrationCases();
  // --ranks N: the node's figures. With one GPU per rank, PCIe and host kernels under DMA
  // too; with fewer, the host kernels alone, saying why.
  const int devices = gpu ? CudaDeviceCount() : 0;
  const bool node_gpus = o.ranks > 1 && devices >= o.ranks;
  std::string no_gpu_reason;
  if (o.ranks > 1 && !node_gpus) {
    const std::string why = !TANDEM_HAS_CUDA ? "built without CUDA"
                            : o.host_only    ? "--host-only"
                            : !gpu           ? "no CUDA device"
                                             : std::to_string(devices) + " CUDA device(s) for " +
                                       std::to_string(o.ranks) + " ranks";
    no_gpu_reason = "PCIe and the host kernels under every rank's DMA need a GPU per rank (" +
                    why + "): the profile has the host kernels of " + std::to_string(o.ranks) +
                    " ranks at once, and tandem-plan derives the rest";
  }
  const uint64_t node_units =
      o.ranks > 1 ? cases.size() + (node_gpus ? 1 + cases.size() : 0) : 0;
  const uint64_t host_units = uint64_t(o.repeats) * (1 + cases.size()) + node_units;
  // GPU: HBM copy, its kernels, PCIe alone, each direction under load, host kernels under
  // DMA load.
  // Then the pre-pass and the two step-overhead figures.
  const uint64_t gpu_units = gpu ? uint64_t(o.repeats) * (7 + 2 * cases.size()) : 0;
  tools::Progress bar("calibrate", host_units + gpu_units);
  Report report(o, bar);

  const std::string base = o.base.empty() ? DefaultCalibrationBase() : o.base;
  planner::Profile p = *planner::BuiltinProfile(base);
  p.builtin_default = false;
  p.date = UtcNow();
  p.source = "tandem-bench calibrate";
  p.host.kernels.clear();
  p.gpu.kernels.clear();
  cpu::HostDriver probe(o.threads);
  p.host.threads = probe.threads();
  p.host.isa = cpu::IsaName(*probe.options().isa);
  bar.Print("calibrate: host %s, %d threads, %s; each figure the median of %d repeats; "
            "what is not measured from the built-in profile %s\n",
            CpuName().c_str(), p.host.threads, p.host.isa.c_str(), o.repeats, base.c_str());

  double triad = 0;
  const Spread copy = report.Measure("host copy", "GB/s", [&] {
    const HostBandwidth b = MeasureHostBandwidth(o.host_elements, o.reps);
    triad = std::max(triad, b.triad_gbps);
    return b.copy_gbps;
  });
  p.host.copy_gbps = copy.median;
  p.host.triad_gbps = triad;
  // Every calibration kernel in `mode`, against the copy bandwidth `roof` of this run.
  auto measure_kernels = [&](ExecutionMode mode, uint64_t elements, const char* label,
                             const Spread& roof, const char* roof_name,
                             std::map<std::string, planner::KernelRate>* into) {
    for (const KernelCase& c : cases) {
      const std::string key = planner::KernelKey(c.algo, c.formats, DType::kBF16);
      (*into)[key].gparams_per_s =
          report
              .Measure(
                  label + key, "Gparam/s",
                  [&] { return MeasureStepRate(c, mode, elements, o.threads, o.reps); },
                  Roofline{CaseBytesPerElement(c), roof.median, roof_name})
              .median;
    }
  };
  measure_kernels(ExecutionMode::kHost, o.host_elements, "host ", copy, "host copy",
                  &p.host.kernels);

  if (gpu) {
    p.gpu.name = GpuName();
    bar.Print("  GPU %s\n", p.gpu.name.c_str());
    const Spread hbm = report.Measure("GPU HBM copy", "GB/s",
                                      [&] { return MeasureHbmCopy(size_t{2} << 30, o.reps); });
    p.gpu.hbm_copy_gbps = hbm.median;
    measure_kernels(ExecutionMode::kGpu, o.gpu_elements, "GPU  ", hbm, "HBM copy", &p.gpu.kernels);
    // The step-time model's pre-pass (bf16 gradients), against reading them at the copy
    // bandwidth (2 bytes each).
    p.gpu.prepass_gparams_per_s =
        report
            .Measure(
                "GPU gradient pre-pass", "Gelem/s",
                [&] { return MeasurePrepassRate(o.gpu_elements, o.reps); },
                Roofline{2.0, hbm.median, "HBM copy"})
            .median;
    // Note [Fixed step cost], the engine's part: a step over few and over many tiny
    // tensors, every element streamed; the line through the two medians.
    auto step_ms = [&](size_t tensors) {
      return report
          .Measure("step over " + std::to_string(tensors) + " tiny tensors", "ms",
                   [&] {
                     return MeasureStepOverheadMs(ExecutionMode::kGpu, tensors, o.threads,
                                                  kOverheadReps);
                   })
          .median;
    };
    const double few_ms = step_ms(kFewTensors);
    const double many_ms = step_ms(kManyTensors);
    p.step_overhead.engine = planner::FitStepOverhead(kFewTensors, few_ms, kManyTensors, many_ms);
    bar.Print("  step overhead (engine): %.3f ms + %.2f us x tensors\n",
              p.step_overhead.engine.per_step_ms, p.step_overhead.engine.per_tensor_us);
    PcieResult pc;
    p.pcie.h2d_gbps = report
                          .Measure("PCIe pinned H2D", "GB/s",
                                   [&] {
                                     pc = MeasurePcie(kPcieBytes, o.reps);
                                     return pc.h2d;
                                   })
                          .median;
    // D2H and both-at-once come from the last repeat; H2D carries the spread.
    p.pcie.d2h_gbps = pc.d2h;
    p.pcie.bidir_gbps = pc.bidir;
    bar.Print("  PCIe pinned D2H %.1f GB/s, both at once %.1f GB/s\n", pc.d2h, pc.bidir);
    // What the compute-split model takes (tandem::MachineRates): each direction with the
    // other busy, and the host kernels while the DMA engines move data both ways.
    p.pcie.h2d_concurrent_gbps =
        report
            .Measure("PCIe pinned H2D, D2H busy", "GB/s",
                     [&] { return MeasurePcieUnderLoad(PcieDirection::kH2D, kPcieBytes, o.reps); })
            .median;
    p.pcie.d2h_concurrent_gbps =
        report
            .Measure("PCIe pinned D2H, H2D busy", "GB/s",
                     [&] { return MeasurePcieUnderLoad(PcieDirection::kD2H, kPcieBytes, o.reps); })
            .median;
    for (const KernelCase& c : cases) {
      const std::string key = planner::KernelKey(c.algo, c.formats, DType::kBF16);
      double dma_gbps = 0;
      p.host.kernels_under_dma[key].gparams_per_s =
          report
              .Measure(
                  "host under DMA load " + key, "Gparam/s",
                  [&] {
                    return MeasureStepRateUnderDmaLoad(c, o.host_elements, o.threads, o.reps,
                                                       kDmaLoadBytes, &dma_gbps);
                  },
                  Roofline{CaseBytesPerElement(c), copy.median, "host copy"})
              .median;
      bar.Print("    (DMA load kept %.1f GB/s of PCIe traffic)\n", dma_gbps);
    }
  } else {
    const char* why = !TANDEM_HAS_CUDA ? "built without CUDA"
                      : o.host_only    ? "--host-only"
                                       : "no CUDA device";
    bar.Print(
        "  GPU and PCIe: skipped (%s); the profile keeps the built-in H200 reference "
        "figures for them, and has no PCIe figures under concurrent traffic, no host "
        "kernels under DMA load and no pre-pass rate (tandem-plan derives them), and no "
        "step overhead (counted as 0)\n",
        why);
    p.source += " (host only; GPU/PCIe from the built-in H200 reference)";
  }
  NodeMeasurement node;
  if (o.ranks > 1) {
    NodeOptions no;
    no.ranks = o.ranks;
    no.gpus = node_gpus ? devices : 0;
    no.no_gpu_reason = no_gpu_reason;
    no.host_elements = o.host_elements;
    no.reps = o.reps;
    bar.Print("calibrate: %d ranks of this node at once, each on its own CPUs%s\n", o.ranks,
              node_gpus ? " and GPU" : "");
    bool first = true;
    node = MeasureNode(no, [&](const std::string& name) {
      if (!first) bar.Advance();
      first = false;
      bar.Note(name);
    });
    bar.Advance();
    for (size_t r = 0; r < node.cpus.size(); ++r)
      bar.Print("  rank %zu: %zu host CPUs\n", r, node.cpus[r].size());
    for (const RankFigures& f : node.figures)
      bar.Print("  %-52s %8.2f %-8s slowest rank (ranks: %s; together %.2f)\n", f.name.c_str(),
                f.slowest(), f.unit.c_str(), PerRank(f).c_str(), f.sum());
    if (!node.no_gpu_reason.empty()) bar.Print("  note: %s\n", node.no_gpu_reason.c_str());
    if (node.dma_gbps > 0) {
      p.host.dram_gbps = node.dma_gbps;
      bar.Print("  host DRAM under every GPU's DMA: %.1f GB/s (host.dram_gbps)\n", node.dma_gbps);
    }
    p.node = node.node;
    report.SetNode(&node);
  }
  p.machine = CpuName() + (gpu ? " + " + p.gpu.name : std::string(" (no GPU)"));
  bar.Finish();

  planner::WriteProfile(p, o.profile_path);
  std::printf("wrote %s (use: tandem-plan --profile %s ...)\n", o.profile_path.c_str(),
              o.profile_path.c_str());
  if (!o.json_path.empty()) {
    tools::WriteFileAtomically(o.json_path, report.ToJson(p, gpu ? p.gpu.name : "").dump(2) + "\n");
    std::printf("wrote %s (every figure with its min / median / max)\n", o.json_path.c_str());
  }
  if (!report.wide().empty())
    std::printf(
        "warning: %zu figure(s) varied by more than %.0f%% between repeats; the "
        "profile holds their medians\n",
        report.wide().size(), 100 * o.max_spread);
  return 0;
}

}  // namespace tandem::bench
