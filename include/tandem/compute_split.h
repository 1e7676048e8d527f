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
// The model below is the one `auto` minimises and the planner and benchmarks quote. With
// s streamed and h host-computed elements:
//   stream = max(stream_bytes * s / d2h,
//                (stream_bytes + stream_grad_bytes) * s / h2d)         [the streamed state]
//   host   = max(grad_bytes * h / d2h, param_bytes * h / h2d,
//                h / host_kernel_rate + ceil(h / chunk_elements) * kHostChunkMs)
//   gpu    = (hot + s) / gpu_kernel_rate                               [the fused kernel]
//   step   = max(gpu, stream + host)
// The two host-resident classes are counted one after the other: the copy engines serve
// the stream executor's large copies and the pipeline's small ones in arrival order, so
// the pipeline's gradient downloads wait behind streamed chunks, and measured steps follow
// the sum (docs/user_guide.md, "Where offloaded elements are computed", gives the figures).
// The PCIe rates are those measured with both directions busy at once. down_ms and up_ms
// report the whole link's traffic each way.
//
// Note [The node is one machine]: the ranks of a node share its host DRAM, PCIe root
// complexes and cores. Rates measured by one rank alone overstate what each rank gets when
// all of them step at once (four ranks streaming on a 4-GPU host moved 1.77x what one rank
// moves alone, not 4x: 169 GB/s of host DRAM traffic). The rates given to this model are
// one rank's with every rank of the node busy (planner::MachineRatesFor with the node's
// rank count, from `tandem-bench calibrate --ranks N`); the model itself does not change.
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
  // The offload pipeline's chunk (OptimizerConfig::chunk_elements): the host pays
  // kHostChunkMs per chunk it computes. 0: no per-chunk cost.
  uint64_t chunk_elements = 0;
  // Per streamed element, up beside its state: its gradient, when gradient release took
  // it off the GPU during backward (it waits in pinned host memory). 0 otherwise.
  double stream_grad_bytes = 0;
};

// Host-side cost of one offload-pipeline chunk beyond its kernel time (task dispatch over
// the host threads, waiting on the copy events): 29 us, measured on a 16-core host with
// 2 Mi element chunks, the same on Llama-3 1B, 3B and 8B (docs/planner.md "Step-time
// model", Note [Host stage in the pipeline] in planner/step_time.cc).
inline constexpr double kHostChunkMs = 0.029;

// Note [Host stage in the pipeline]: a host kernel rate measured alone, slowed for the
// PCIe DMA that writes each gradient into and reads each parameter out of the same host
// DRAM the kernel streams through: kernel_gparams / (1 + (grad_bytes + param_bytes) /
// kernel_bytes), kernel_bytes being the kernel's own DRAM bytes per element. What a rate
// measured without DMA (the optimizer's probe, a profile's host.kernels) becomes before
// it enters the model. Throws Error(kInvalidArgument) unless kernel_bytes > 0.
double HostRateUnderDma(double kernel_gparams, double kernel_bytes, double grad_bytes,
                        double param_bytes);

struct ComputeSplit {
  double share = 0;  // of the host-resident elements, computed on the GPU, in [0, 1]
  // The model's terms for that share, in ms: PCIe each way (both classes), the host
  // kernels, the fused kernel; the streamed class and the host-computed class (its
  // slowest resource); and the step.
  double down_ms = 0, up_ms = 0, host_ms = 0, gpu_ms = 0;
  double stream_ms = 0, host_path_ms = 0, step_ms = 0;
  // What sets the step: "gpu", or the host-resident classes: "stream", "host" (the host
  // kernels of the host-computed class), "d2h"/"h2d" (its copies), "stream+host" (both).
  const char* bound() const;
};

// The model at a given share in [0, 1]. Throws Error(kInvalidArgument) for invalid rates
// or a share outside [0, 1].
ComputeSplit PredictSplit(const ComputeSplitInput& in, const MachineRates& rates, double share);

// The share in [0, 1] that minimises the modelled step (ties: the smaller share, which
// keeps more work on the host). The model is convex and piecewise linear in the share:
// a grid of 1/1024 steps, then the crossings near the best point, finds its minimum.
ComputeSplit ChooseSplit(const ComputeSplitInput& in, const MachineRates& rates);

// OptimizerConfig::offload_compute as text: "auto", "host", "gpu" or a share ("0.25").
// ParseOffloadCompute throws Error(kInvalidArgument) naming the text otherwise.
inline constexpr double kOffloadComputeAuto = -1.0;
double ParseOffloadCompute(const std::string& text);
std::string OffloadComputeName(double value);

}  // namespace tandem
