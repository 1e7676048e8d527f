// Where host-resident optimizer state is computed: the host kernels, the GPU kernel (the
// state streamed up and down in chunks), or both, split so that they finish together.
//
// Note [Three placement classes]: every element is GPU-resident (state in device memory,
// stepped by the fused kernel), host-resident and computed on the host (gradient down,
// host kernel, parameter up), or host-resident and computed on the GPU (state up, the
// fused kernel, state down; the gradient and parameter never leave the GPU). The offload
// fraction decides how much is host-resident; the compute share decides how much of that
// is streamed. Every class gives the same bits (docs/numerics.md).
//
// The model below is the one `auto` minimises and the planner and benchmarks quote: the
// slowest of four resources sets the step, all running at once.
//   down  = (stream_bytes * s + grad_bytes * h) / d2h     [PCIe, device to host]
//   up    = (stream_bytes * s + param_bytes * h) / h2d    [PCIe, host to device]
//   host  = h / host_kernel_rate                          [host cores and DRAM]
//   gpu   = (hot + s) / gpu_kernel_rate                   [the fused kernel]
// where s and h are the streamed and host-computed element counts. The PCIe rates are
// those measured with both directions busy at once.
#pragma once

#include <cstdint>
#include <string>

namespace tandem {

// Rates measured on the machine (tandem-bench calibrate, or the optimizer's own probe).
struct MachineRates {
  double h2d_gbps = 0;          // pinned host to device, GB/s, with D2H copies running too
  double d2h_gbps = 0;          // pinned device to host, GB/s, with H2D copies running too
  double host_gparams = 0;      // host kernel (these formats), 1e9 elements/s, under DMA load
  double gpu_gparams = 0;       // fused GPU kernel (these formats), 1e9 elements/s
  // All four finite and > 0.
  bool valid() const;
};

// Bytes per element of the two host-resident classes and the element counts.
struct ComputeSplitInput {
  uint64_t hot = 0;          // GPU-resident elements
  uint64_t offloaded = 0;    // host-resident elements
  double stream_bytes = 0;   // per streamed element, each way (its host-resident state)
  double grad_bytes = 0;     // per host-computed element, down (the gradient)
  double param_bytes = 0;    // per host-computed element, up (the parameter)
};

struct ComputeSplit {
  double share = 0;  // of the host-resident elements, computed on the GPU, in [0, 1]
  // The model's terms for that share, in ms, and the step (the largest).
  double down_ms = 0, up_ms = 0, host_ms = 0, gpu_ms = 0, step_ms = 0;
  const char* bound() const;  // "d2h", "h2d", "host" or "gpu": the largest term
};

// The model at a given share in [0, 1]. Throws Error(kInvalidArgument) for invalid rates
// or a share outside [0, 1].
ComputeSplit PredictSplit(const ComputeSplitInput& in, const MachineRates& rates, double share);

// The share in [0, 1] that minimises the modelled step (ties: the smaller share, which
// keeps more work on the host). Exact for the piecewise-linear model: the optimum lies at
// 0, 1 or where two terms cross, and every crossing is tried.
ComputeSplit ChooseSplit(const ComputeSplitInput& in, const MachineRates& rates);

// OptimizerConfig::offload_compute as text: "auto", "host", "gpu" or a share ("0.25").
// ParseOffloadCompute throws Error(kInvalidArgument) naming the text otherwise.
inline constexpr double kOffloadComputeAuto = -1.0;
double ParseOffloadCompute(const std::string& text);
std::string OffloadComputeName(double value);

}  // namespace tandem
