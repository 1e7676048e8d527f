// The planner's picture of a machine: the calibration profile ("tandem-profile/1") and
// the sizes and counts its inputs are written in (tandem/planner.h; docs/planner.md
// "Profile schema").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/compute_split.h"
#include "tandem/types.h"

namespace tandem::planner {

// ---------------------------------------------------------------------------------------
// Calibration profile ("tandem-profile/1"; docs/planner.md "Profile schema")

inline constexpr const char* kProfileSchema = "tandem-profile/1";

// The gradient pre-pass's cost per element when a profile has no measured rate
// (Profile::Gpu::prepass_gparams_per_s): as many bytes at the HBM copy bandwidth as this.
// Its exact 512-bit sum of squares (Note [Exact sum of squares] in engine/exact_sum.h)
// makes it compute-bound at about twice a bf16 gradient's read: 8.49 ms over Llama-3 8B's
// 8.03e9 bf16 gradients on the H200 (946 Gelem/s), against 3797 GB/s / 4 B = 949 there
// (bench/results/compute_split_h200.json; 4.35 ms before the exact sum).
inline constexpr double kDefaultPrepassBytesPerElement = 4.0;

struct KernelRate {
  double gparams_per_s = 0;  // measured optimizer-step throughput, 1e9 elements per second
};

struct Profile {
  std::string machine, date, source;
  struct Gpu {
    std::string name;
    double hbm_copy_gbps = 0;                   // device copy, read+write bytes per second / 1e9
    std::map<std::string, KernelRate> kernels;  // by KernelKey
    // The gradient pre-pass (exact sum of squares and non-finite check, one read of every
    // gradient) over bf16 gradients, 1e9 elements per second. Optional
    // ("prepass_gparams_per_s"; 0: not measured, absent in profiles written before it):
    // the step-time model then takes kDefaultPrepassBytesPerElement at hbm_copy_gbps
    // (docs/planner.md "Step time").
    double prepass_gparams_per_s = 0;
    // Training throughput (docs/planner.md "Iteration"): a training forward + backward on
    // this GPU in 10^12 FLOP/s of hardware work (TrainingFlops: recomputation counted as
    // work), measured with the model's shapes (tandem.calibrate_training). Optional
    // ("train_tflops"; 0: not measured): the iteration model then takes
    // kDefaultTrainTflops and says so.
    double train_tflops = 0;
    // The GPU's dense bf16 peak in 10^12 FLOP/s, for the MFU the plan reports. Optional
    // ("peak_tflops"; 0: kDefaultPeakTflops, said so).
    double peak_tflops = 0;
  } gpu;
  struct Host {
    int threads = 0;
    std::string isa;
    double copy_gbps = 0;
    double triad_gbps = 0;  // STREAM triad over all threads, bytes per second / 1e9
    std::map<std::string, KernelRate> kernels;
    // The host kernels measured while pinned PCIe copies run both ways at once ("under
    // DMA load": the DMA engines read and write host DRAM too), by KernelKey. Optional
    // ("kernels_under_dma"; absent in profiles written before it): the step-time model
    // then derives the rate from `kernels` (docs/planner.md "Step time").
    std::map<std::string, KernelRate> kernels_under_dma;
    // The host DRAM throughput (bytes read + written per second / 1e9) that the PCIe DMA of
    // every rank of the node shares (Note [The node is one machine] in
    // tandem/compute_split.h): the PCIe traffic of all the node's GPUs streaming both ways
    // at once (tandem-bench calibrate --ranks N with N GPUs). Optional ("dram_gbps"; 0: not
    // measured): triad_gbps stands for it.
    double dram_gbps = 0;
  } host;
  struct Pcie {
    double h2d_gbps = 0, d2h_gbps = 0, bidir_gbps = 0;  // pinned copies; bidir = sum of both
    // Each direction while the other is busy at once (GB/s). Optional (0: not measured;
    // absent in older profiles): the model then splits bidir_gbps in proportion to the
    // bytes each way, never above the direction alone.
    double h2d_concurrent_gbps = 0, d2h_concurrent_gbps = 0;
  } pcie;
  // Note [Fixed step cost]: what one step costs beyond its bytes and elements, as
  // per_step_ms + per_tensor_us x tensors, measured over tiny tensors with every element
  // streamed (offload_compute gpu, the path auto takes on a machine like the H200):
  //   engine   HybridOptimizer::Step plus a device synchronisation: the pre-pass's wait
  //            for its result, the scalars, the hot and streamed plans' launches, the
  //            first upload's and last download's latencies (tandem-bench calibrate);
  //   binding  tandem.torch's step() less the engine's Step: per-tensor gradient
  //            checks, version counters, stream ordering (tandem.calibrate_binding, in
  //            Python; bench/planner_accuracy.py runs it when the profile lacks it).
  // Each part is optional ("step_overhead": {"engine": {...}, "binding": {...}}; absent
  // in profiles written before it): a missing part counts as 0 and the plan says so.
  struct Overhead {
    bool measured = false;
    double per_step_ms = 0, per_tensor_us = 0;  // >= 0
    double ms(uint64_t tensors) const {
      return per_step_ms + per_tensor_us * 1e-3 * static_cast<double>(tensors);
    }
  };
  struct StepOverhead {
    Overhead engine, binding;
  } step_overhead;
  // Note [The node is one machine]: one rank's figures measured while `ranks` ranks of the
  // node ran the same measurement at once, each on its own share of the host's CPUs
  // (tandem::RankCpus) and, with `gpus` == ranks, its own GPU (tandem-bench calibrate
  // --ranks N; each figure the slowest rank's). Optional ("node"; ranks 0: absent): a plan
  // for G GPUs per node uses them when ranks == G and derives them otherwise
  // (MachineRatesFor).
  struct Node {
    int ranks = 0;          // >= 1 when present
    int gpus = 0;           // ranks that drove their own GPU at once (0: host only)
    int cpus_per_rank = 0;  // the fewest host CPUs a rank had (informational)
    std::map<std::string, KernelRate> host_kernels;            // per rank, by KernelKey
    std::map<std::string, KernelRate> host_kernels_under_dma;  // per rank, every GPU busy
    double h2d_concurrent_gbps = 0, d2h_concurrent_gbps = 0;   // per rank; 0: not measured
  } node;
  bool builtin_default = false;  // true only for DefaultProfile(); not written to JSON
};

// One part of the fixed step cost (Note [Fixed step cost]) from the median step times
// over `few` and `many` tiny tensors: the line through both (per_tensor_us from the
// slope, per_step_ms the rest of the `few` step), each part clamped to >= 0; measured.
// Throws Error(kInvalidArgument) unless 0 < few < many and both times are finite and >= 0.
Profile::Overhead FitStepOverhead(uint64_t few, double few_ms, uint64_t many, double many_ms);

// Built-in figures where a profile has none, each said so in the plan:
// The training throughput: Llama-3-8B shapes, FSDP2 over 4 H200s, seq 2048, full
// activation checkpointing: 683 ms per iteration of which the step took 296 ms after
// backward, so 387 ms of forward and backward for 131.7 TFLOP of hardware work per GPU
// (docs/planner.md "Iteration").
inline constexpr double kDefaultTrainTflops = 340.0;
// The same on one GPU without FSDP2 (a plain loop): transformers' Llama-3-8B and
// Qwen2.5-7B shapes on one H200, gradient checkpointing, batch 1, seq 2048 and 4096 with
// nearly nothing offloaded: 479 to 546 TFLOP/s of hardware work (bench/fit_matrix.py,
// 2026-11-29; docs/planner.md "Iteration").
inline constexpr double kDefaultTrainTflopsOneGpu = 510.0;
// Dense bf16 peak of an H100 or H200 SXM.
inline constexpr double kDefaultPeakTflops = 989.0;
// Host DRAM under every GPU's DMA: four ranks streaming on a 4 x H200 host with 64 cores
// moved 27 G elements/s of bf16+ecc8/q8/q8 state together (6.25 bytes each), 169 GB/s.
inline constexpr double kDefaultNodeDramGbps = 169.0;

// The H200 reference figures of the design brief (HBM copy 4260 GB/s; PCIe 55.6 H2D,
// 55.5 D2H, 101.7 both; host triad 146 GB/s, 16 threads; no kernel keys), with host DRAM
// under DMA kDefaultNodeDramGbps.
Profile DefaultProfile();
// An NVIDIA GH200 Grace Hopper Superchip node, from NVIDIA's published figures, none
// measured by Tandem (`machine` and `source` say so; builtin_default false): one Hopper GPU
// with 144 GB HBM3e at 4900 GB/s (the peak, where DefaultProfile's 4260 is a measured
// copy); NVLink-C2C in `pcie`: 450 GB/s each way, 900 both; one Grace CPU: 72 Neoverse V2
// cores (threads 72, isa "sve"), LPDDR5X at 512 GB/s (host copy and triad; no DRAM-under-
// DMA figure, so the triad stands for it). No kernel rates: the rooflines stand for them.
// `tandem-bench calibrate` on a Grace host measures what can be measured over it.
Profile GraceHopperProfile();
// The built-in profiles by name: "h200" (DefaultProfile) and "grace-hopper"
// (GraceHopperProfile); std::nullopt for any other name.
std::optional<Profile> BuiltinProfile(std::string_view name);
// The built-in profile named `name_or_path`, else the profile file at that path
// (ReadProfile, and its errors).
Profile ProfileByNameOrPath(const std::string& name_or_path);
// Parses / reads a profile; Error(kInvalidArgument) naming `where` (or the file) and the
// missing or bad field, or a wrong schema; Error(kIO) if the file cannot be read.
Profile ParseProfile(std::string_view json, std::string_view where);
Profile ReadProfile(const std::string& path);
// Serialises (2-space indented JSON) / writes a profile, atomically and durably (path.tmp,
// fsync, rename, as SaveCheckpoint); Error(kIO) if the file cannot be written, `path`
// then untouched.
std::string ProfileToJson(const Profile& p);
void WriteProfile(const Profile& p, const std::string& path);

// "<algo>/<master>/<m>/<v>/<grad dtype>", e.g. "adamw/bf16+ecc8/q8/q8/bf16".
std::string KernelKey(Algorithm algo, const StateFormats& f, DType grad_dtype);

// The rates of the compute-split model (tandem/compute_split.h) for these formats on the
// profiled machine, for one rank of `ranks` (>= 1) stepping at once on one node (Note
// [The node is one machine] in tandem/compute_split.h): what OptimizerConfig::machine_rates
// takes. Each is measured where the profile has it, else derived as the step-time model
// does (docs/planner.md "Step time"):
//   h2d_gbps, d2h_gbps  node.pcie.*_concurrent_gbps when node.ranks == ranks > 1; else
//                       pcie.*_concurrent_gbps, else bidir_gbps split in proportion to
//                       the parameter and gradient bytes (never above one direction
//                       alone), and with ranks > 1 each capped at host DRAM under DMA
//                       (host.dram_gbps, else host.triad_gbps) / (2 x ranks)
//   host_gparams        node.host.kernels_under_dma[key] when node.ranks == ranks > 1;
//                       else host.kernels_under_dma[key] / ranks, else the host kernel
//                       (node.host.kernels[key] with ranks at once, else host.kernels[key]
//                       or the triad roofline, / ranks) slowed by the DMA's share of DRAM
//                       traffic (tandem::HostRateUnderDma)
//   gpu_gparams         gpu.kernels[key], else the HBM roofline
// key = KernelKey(algo, formats, grad_dtype); SGD is taken with momentum (0.9). Throws
// Error(kInvalidArgument) if a profile bandwidth is not > 0 or ranks is 0.
MachineRates MachineRatesFor(const Profile& profile, Algorithm algo, const StateFormats& formats,
                             DType grad_dtype, DType param_dtype = DType::kBF16,
                             uint32_t ranks = 1);

// ---------------------------------------------------------------------------------------
// Sizes

// "80GiB", "80 GB", "512MiB", "1.5TiB", "4096B" -> bytes. Units: B, KB, MB, GB, TB
// (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024); case-insensitive. The unit is
// required: a bare number ("80") throws, suggesting "80GiB" and "80GB".
// Throws Error(kInvalidArgument) naming the text.
uint64_t ParseBytes(std::string_view text);
// "8e9", "8.03e9", "8B", "7.5B", "125M", "1T", "1000" -> a count (K, M, B/G, T suffixes).
// Without a suffix the number must be whole ("8.5" throws); with one it is rounded to the
// nearest integer. Throws Error(kInvalidArgument) naming the text.
uint64_t ParseCount(std::string_view text);
double ToGiB(uint64_t bytes);

}  // namespace tandem::planner
