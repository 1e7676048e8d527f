// The executors of Note [Executors] (offload/executor.h) that stand on their own: the
// GPU-resident and GPU-stream classes in GPU mode (through GpuSide) and their host-mode
// stand-ins (through the host kernels). The host-offload executor shares its state with
// early start and lives in the optimizer (offload/optimizer_step.cc).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "cpu_simd/host_kernels.h"
#include "offload/executor.h"
#include "offload/gpu_side.h"
#include "tandem/faults.h"

namespace tandem::offload {

// GPU-resident class, GPU mode: the fused launches of the hot plans (GpuSide::LaunchHot).
// hot_tensor[i]: the tensor of hot span i; tensors: the tensor count.
std::unique_ptr<Executor> MakeGpuResident(GpuSide* gpu, std::vector<size_t> hot_tensor,
                                          size_t tensors);
// GPU-resident class, host mode: the host kernels over the hot spans (`hot`, one per
// entry of hot_tensor; their scalars are set at each step).
std::unique_ptr<Executor> MakeHostResident(cpu::HostDriver* driver, std::vector<StepSpan> hot,
                                           std::vector<size_t> hot_tensor);
// GPU-stream class, GPU mode (GpuSide::LaunchStream; the stream plans are built already).
// streamed[t]: whether tensor t has streamed elements.
std::unique_ptr<StreamExecutor> MakeGpuStream(GpuSide* gpu, std::vector<uint8_t> streamed);
// GPU-stream class, host mode: each chunk copied into its host slot, stepped there by the
// host kernels and copied back: the streaming data path with host memory standing in for
// the device's, so that CI checks its layout and bits. `faults` (may be null) is asked once
// per chunk copy (tandem/faults.h): a failed one throws Error(kCuda) naming the chunk and
// the chunks applied before it; a failed download leaves that chunk's parameters updated
// but its state not, as a lost device slot would.
std::unique_ptr<StreamExecutor> MakeHostStream(cpu::HostDriver* driver,
                                         std::vector<GpuSide::StreamChunkSpans> chunks,
                                         std::shared_ptr<FaultPlan> faults);

// An executor made of functions (the host-offload executor, whose state the optimizer
// shares with early start). Unset functions do nothing.
struct ExecutorFns {
  const char* name = "";
  std::function<void(const StepWork&)> launch;
  std::function<void(size_t, void*)> wait_param;
};
std::unique_ptr<Executor> MakeExecutor(ExecutorFns fns);

}  // namespace tandem::offload
