// tandem-bench's in-process measurements: host copy/triad bandwidth, step rates through
// the engine, and (with CUDA) PCIe and HBM copy bandwidths. Host clocks time the host,
// CUDA events or synchronised host clocks the GPU; every figure is the median of `reps`
// timed repetitions after one untimed warm-up. Not thread-safe: one measurement at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/optimizer.h"

// Set by the build for every target; builds from before CUDA became optional always had it.
#ifndef TANDEM_HAS_CUDA
#define TANDEM_HAS_CUDA 1
#endif

namespace tandem::bench {

// min / median / max of repeated measurements of one figure.
struct Spread {
  double min = 0, median = 0, max = 0;
  // (max - min) / median; 0 for fewer than two values or a zero median.
  double relative() const { return median > 0 ? (max - min) / median : 0; }
};
// The spread of `values` (empty: all zero).
Spread SpreadOf(std::vector<double> values);

// The optimizer step cases that calibrate measures (the planner's kernel keys).
struct KernelCase {
  Algorithm algo;
  StateFormats formats;
};
const std::vector<KernelCase>& CalibrationCases();
// Bytes one element of `c` moves at the least (bf16 parameters and gradients), the
// roofline's numerator: AdamW bf16+ecc8/q8/q8 12.25, all-fp32 AdamW 28.
double CaseBytesPerElement(const KernelCase& c);

struct HostBandwidth {
  double copy_gbps = 0, triad_gbps = 0;  // bytes read + written per second, all threads
};
// STREAM-like copy and triad over `n` floats on the TBB pool.
HostBandwidth MeasureHostBandwidth(uint64_t n, int reps);

// Gparam/s of HybridOptimizer::Step over one tensor of `n` bf16 elements, from the
// engine's own timer of the update. kGpu needs a CUDA build and device (throws otherwise).
double MeasureStepRate(const KernelCase& c, ExecutionMode mode, uint64_t n, int threads, int reps);

// The gradient pre-pass (exact sum of squares and non-finite check) over one bf16
// gradient of `n` elements, 1e9 elements per second, from the engine's own CUDA events
// (StageTimes::prepass_ms) in GPU mode. Needs CUDA and a device.
double MeasurePrepassRate(uint64_t n, int reps);

// Note [Fixed step cost] (tandem/planner/profile.h), the engine's part: the median wall time (ms)
// of HybridOptimizer::Step plus a device synchronisation over `tensors` tiny bf16 tensors
// (256 elements each, AdamW bf16+ecc8/q8/q8) with every element offloaded and streamed
// (offload_fraction 1, offload_compute 1): what a step costs beyond its bytes. kGpu needs
// CUDA and a device; kHost runs the same paths over host memory. planner::FitStepOverhead
// turns two tensor counts' figures into per step + per tensor.
double MeasureStepOverheadMs(ExecutionMode mode, size_t tensors, int threads, int reps);

struct PcieResult {
  double h2d = 0, d2h = 0, bidir = 0, h2d_pageable = 0, d2h_pageable = 0;  // GB/s
};
// Needs CUDA and a device; throws Error(kCuda) on a CUDA failure, Error(kUnsupported) in a
// build without CUDA. Calls `on_done` with each figure's name once it is measured (five).
inline constexpr int kPcieFigures = 5;
PcieResult MeasurePcie(size_t bytes, int reps,
                       const std::function<void(const char*)>& on_done = {});
// One direction of pinned copies while the other direction is busy at once (Note [PCIe
// under concurrent traffic] in planner/step_time.cc): the timed copy of `bytes` (CUDA
// events on its own stream) starts after copies of 3 x `bytes` the other way were queued
// on a second stream, so the other direction is busy for the whole timed copy. Median of
// `reps`, GB/s. Needs CUDA and a device, as MeasurePcie.
enum class PcieDirection { kH2D, kD2H };
double MeasurePcieUnderLoad(PcieDirection timed, size_t bytes, int reps);

// The host step rate of `c` (as MeasureStepRate in kHost mode) while pinned copies of
// `dma_bytes` run both ways at once, round after round, on a background thread ("under DMA
// load": the DMA engines read and write host DRAM beside the kernel). `dma_gbps`, if not
// null, gets the PCIe traffic the load kept up during the measurement (both directions,
// GB/s). Needs CUDA and a device.
double MeasureStepRateUnderDmaLoad(const KernelCase& c, uint64_t n, int threads, int reps,
                                   size_t dma_bytes, double* dma_gbps = nullptr);

// Device-to-device copy, GB/s read + written.
double MeasureHbmCopy(size_t bytes, int reps);
// The first device's name ("" without CUDA or device).
std::string GpuName();
// CUDA devices this process sees (0 without CUDA or device).
int CudaDeviceCount();
// Device `device`'s PCI bus id ("0000:17:00.0"; "" when unknown).
std::string GpuBusId(int device);

// Pinned copies both ways between the host and device `device` (`bytes` each way), for
// loads and timings that several threads run at once, each on its own device. Every
// member makes `device` current on the calling thread first. Needs CUDA and the device:
// the constructor throws Error(kUnsupported) in a build without CUDA, Error(kCuda) on a
// CUDA failure. Not thread-safe: one thread at a time per object.
class PcieLoad {
 public:
  PcieLoad(int device, size_t bytes);
  ~PcieLoad();
  PcieLoad(const PcieLoad&) = delete;
  PcieLoad& operator=(const PcieLoad&) = delete;
  // One copy each way at once, waited for (sleeping): one round of a load.
  void Round();
  // One copy in direction `timed` (GB/s, CUDA events on its stream) while copies three
  // times as long run the other way (Note [PCIe under concurrent traffic]).
  double TimedGbps(PcieDirection timed);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A host-mode optimizer over one tensor of `n` bf16 elements of case `c`, its threads on
// `cpus` (OptimizerConfig::host_cpus; empty: anywhere, `threads` of them, 0: all): the
// host step rate that MeasureStepRate times, one step at a time.
class HostStepper {
 public:
  HostStepper(const KernelCase& c, uint64_t n, int threads, const std::vector<int>& cpus);
  ~HostStepper();
  HostStepper(const HostStepper&) = delete;
  HostStepper& operator=(const HostStepper&) = delete;
  // One step; the engine's own time of the update, ms.
  double StepMs();
  uint64_t elements() const { return n_; }

 private:
  uint64_t n_;
  std::vector<uint16_t> param_, grad_;
  std::unique_ptr<HybridOptimizer> opt_;
};

}  // namespace tandem::bench
