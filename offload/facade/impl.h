// HybridOptimizer::Impl, private to offload/: what the optimizer keeps beside its
// executors. It holds the tensors, the configuration, each tensor's formats, the
// placement, the step counts, the host threads, the pre-pass and the executors (Note
// [Executors] in offload/executors/executor.h), which own the state; a step's
// bookkeeping (the gradients handed in, what BeginStep announced) and the last step's
// times. Every phase of a step asks each executor for its part; nothing here branches on
// a placement class.
//
// The files: optimizer.cc (the public methods), construct.cc (validation, the placement,
// the executors, the initial state), rates.cc (offload_compute auto's rates), step.cc
// (Step and its arguments), early_start.cc (GradReady, BeginStep, gradient release),
// state.cc (Snapshot, Restore), reload.cc (ReloadParams). Everything of GPU mode that
// needs CUDA is behind factories (offload/gpu/gpu_side.h), so this builds without a CUDA
// toolkit.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "cpu_simd/host_kernels.h"
#include "engine/step_scalars.h"
#include "offload/executors/executor_set.h"
#include "offload/gpu/gpu_side.h"
#include "offload/gpu/grad_fences.h"
#include "offload/prepass/prepass.h"
#include "tandem/optimizer.h"

namespace tandem {

// Throws Error(kInvalidArgument) naming the first bad value: loss_scale finite and > 0,
// max_grad_norm finite and >= 0 (Step and BeginStep).
void ValidateStepArgs(const StepOptions& opt);

class HybridOptimizer::Impl {
 public:
  Impl(std::vector<TensorSpec> specs, OptimizerConfig cfg);
  ~Impl();

  // Step(group_lrs) with one_lr null, else Step(*one_lr): the learning rates are checked
  // inside, so that a bad one ends a begun step as every other failure does.
  StepResult Step(std::span<const double> group_lrs, const double* one_lr, const StepOptions& opt);
  void ReloadParams(std::span<const size_t> tensors);
  int64_t tensor_step_count(size_t i) const;
  void GradReady(size_t i, const void* grad, void* ready_stream);
  void WaitGradConsumed(size_t i, void* stream) const;
  bool GradConsumed(size_t i) const;
  void BeginStep(std::span<const double> group_lrs, const double* one_lr, const StepOptions& opt);
  bool step_begun() const { return begun_.on; }
  void DiscardStep() noexcept { EndEarlyStart(); }
  void WaitParam(size_t i, void* stream) const;
  void SetHyperParams(size_t g, const HyperParams& h);
  const HyperParams& hyper_params(size_t g) const;
  size_t group_count() const { return cfg_.groups.size(); }
  ExecutionMode mode() const { return mode_; }
  const Placement& placement() const { return placement_; }
  const ComputeSplit& compute_split() const { return split_; }
  MemoryReport memory() const;
  StageTimes last_step_times() const;
  int64_t step_count() const { return steps_.applied; }
  size_t tensor_count() const { return specs_.size(); }
  OptimizerSnapshot Snapshot() const;
  void Restore(const OptimizerSnapshot& s);

 private:
  bool gpu() const { return mode_ == ExecutionMode::kGpu; }

  // construct.cc
  void Validate() const;
  // Throws Error(kOutOfMemory) naming both figures when the host state of the resolved
  // placement would exceed OptimizerConfig::pinned_budget_bytes (before any allocation).
  void CheckHostBudget(const MemoryReport& resolved) const;
  // The executors over the placement's memory plan (ResolvedPlacement::plan), in launch
  // order (Note [Executors]), and the pre-pass.
  void BuildExecutors(const layout::MemoryPlan& plan);
  // The initial state from the parameters, every executor's regions (Note [Block-wise
  // initialisation], offload/memory/state_init.h): blocks of kInitBlockElements;
  // progress lines to info_log once the construction has run kInitQuietSeconds (since
  // `start`), at most every kInitProgressSeconds.
  void InitState(std::chrono::steady_clock::time_point start);
  static constexpr uint64_t kInitBlockElements = uint64_t{1} << 19;
  static constexpr double kInitQuietSeconds = 3.0, kInitProgressSeconds = 3.0;

  // rates.cc: the rates offload_compute auto decides with: machine_rates, else (GPU mode,
  // auto, something offloaded) the rate cache's, measured into it on the first
  // construction of this setting; none otherwise.
  std::optional<MachineRates> Rates();
  MachineRates MeasureRates(const RateCache::Key& key);
  double ProbeHostRate(const RateCache::Key& key);

  // step.cc
  // Each group's learning rate of a step, checked (one per group, finite, >= 0): as
  // handed (Step(group_lrs)) or lr * lr_scale (Step(lr)).
  std::vector<double> GroupLrs(std::span<const double> group_lrs) const;
  std::vector<double> OneLr(double lr) const;
  // The hyper-parameters of a step: StepOptions::group_hyper, checked, or the current ones.
  std::vector<HyperParams> StepHyper(const StepOptions& opt) const;
  // The step's scalars (Note [Scalar index]): one StepScalars per distinct (group, tensor
  // step) of the tensors in `active` (empty: all), from each group's lr and
  // hyper-parameters; scalar_index[t] = its entry or kSkipScalarIndex.
  void AssignScalars(const std::vector<uint8_t>& active, const std::vector<double>& lrs,
                     const std::vector<HyperParams>& hyper, double grad_mul,
                     std::vector<StepScalars>* scalars, std::vector<uint32_t>* scalar_index) const;
  // The gradient each tensor's update reads at this step (StepOptions::grads, GradReady's,
  // TensorSpec::grad), each new pointer of an active tensor checked; throws
  // Error(kInvalidArgument) naming the tensor, nothing changed.
  std::vector<const void*> StepGrads(const StepOptions& opt,
                                     const std::vector<uint8_t>& active) const;
  void CheckGrad(size_t t, const void* grad, const char* where) const;
  // Points every reader of tensor t's gradient (the pre-pass, the executors) at `grad`,
  // where it changed.
  void UseGrad(size_t t, const void* grad);

  // early_start.cc: ends the early start of a step (every executor's; Note [Speculate,
  // then commit or roll back]). Never throws.
  void EndEarlyStart() noexcept;
  // Stops the speculation of a begun step once the partials known so far exceed its
  // max_grad_norm or hold a non-finite value (Step will clip or skip: partials only grow).
  void StopIfClipOrSkip();
  void RequireNoBegunStep(const char* what) const;

  // state.cc
  // Waits for everything in flight and (GPU mode) the caller's stream.
  void Quiesce(const char* why) const;
  // Between a part's arrays (device memory, or host) and host memory.
  void CopyOut(void* dst, const void* src, size_t bytes, bool on_device) const;
  void CopyIn(void* dst, const void* src, size_t bytes, bool on_device) const;
  void WriteParamsFromMasters(size_t t, const TensorSnapshot& ts);
  // Tensor t's whole state (every executor's parts) as a snapshot entry, and back; with
  // masters_only, the master's arrays alone are copied (the others keep their sizes and
  // hold zeros in a snapshot read so).
  TensorSnapshot ReadTensorState(size_t t, bool masters_only = false) const;
  void WriteTensorState(size_t t, const TensorSnapshot& ts, bool masters_only = false);

  std::vector<TensorSpec> specs_;
  OptimizerConfig cfg_;
  // Per tensor: its effective state formats (engine/layout/tensor_rules.h), fixed at
  // construction; every layout, kernel, snapshot and restore of tensor t uses formats_[t].
  std::vector<StateFormats> formats_;
  ExecutionMode mode_;
  Placement placement_;
  ComputeSplit split_;  // the modelled split (zeros without rates)
  struct StepCounts {
    int64_t applied = 0;
    std::vector<int64_t> tensor;  // per tensor: updates received (torch's per-param step)
  } steps_;
  cpu::HostDriver driver_;
  std::unique_ptr<offload::GpuSide> gpu_;  // GPU mode only
  std::unique_ptr<offload::Prepass> prepass_;
  // Note [Executors], with their roles (Note [Executor roles]); they use driver_, gpu_ and
  // specs_, declared before them.
  offload::ExecutorSet executors_;
  // GPU mode: the ordering of the gradients handed to GradReady (offload/gpu/
  // grad_fences.h): their ready marks, the work stream, the consumed events.
  std::unique_ptr<offload::GradFences> fences_;
  // Per tensor (Note [Gradient reads] in tandem/optimizer.h): GradReady seen in this step,
  // the gradient of this step (GradReady's, else the last step's), the one every reader
  // points at now, and the last one checked.
  struct StepGradients {
    std::vector<uint8_t> ready;
    std::vector<const void*> current, used, checked;
    double handover_ms = 0;  // in GradReady and BeginStep since the last step (StageTimes)
  } grads_;
  // What BeginStep announced (Step must hand the same): each group's lr and
  // hyper-parameters, the clip norm, the loss scale, and the scalars the speculation
  // steps with; whether the speculation stopped taking chunks (StopIfClipOrSkip).
  struct Announced {
    bool on = false, stopped = false;
    std::vector<double> lrs;
    std::vector<HyperParams> hyper;
    double clip = 0, loss_scale = 1;
    std::vector<StepScalars> scalars;
    std::vector<uint32_t> scalar_index;
  } begun_;
  // The last step's stage times; last_step_times (const, callable from several threads)
  // completes them from the executors' device timings under the lock.
  mutable struct Times {
    std::mutex mu;
    StageTimes last;
  } times_;
};

}  // namespace tandem
