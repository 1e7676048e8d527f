// HybridOptimizer::Impl, private to offload/: the optimizer's state and its parts.
//
// Both modes run one code path. Each tensor is cut into a GPU-resident prefix, whose
// state lives next to the parameters ("device" memory) and is stepped there, and a
// host-resident suffix; that suffix is cut again into a streamed part, whose chunk-major
// state the fused kernel steps in device slots, and a host-computed ("cold") part, stepped
// by the host kernels, its gradients and parameters travelling through the offload
// pipeline (Note [Three placement classes] in tandem/compute_split.h). One executor per
// class runs a step's updates (Note [Executors], offload/executor.h). In GPU mode
// "device" is the GPU (fused CUDA kernels, CUDA streams); in host mode it is ordinary host
// memory (host kernels, HostTransport, host slots), which is what lets CI test every
// path.
//
// The implementation is split by concern: optimizer.cc (construction, validation,
// layout, PredictMemory), optimizer_step.cc (Step, the host-offload executor and their
// companions), optimizer_stream.cc (offload_compute and the executors' set-up),
// optimizer_state.cc (initialisation, Snapshot, Restore), optimizer_early.cc (GradReady,
// BeginStep and the speculation's bookkeeping; the worker itself is offload/speculation.h),
// optimizer_reload.cc (ReloadParams). Everything of GPU mode that needs CUDA is behind
// offload::GpuSide (offload/gpu_side.h), so this builds without a CUDA toolkit.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cpu_simd/host_kernels.h"
#include "engine/step_scalars.h"
#include "offload/executor.h"
#include "offload/gpu_side.h"
#include "offload/memory.h"
#include "offload/pipeline.h"
#include "offload/speculation.h"
#include "offload/stream_speculation.h"
#include "engine/layout/state_layout.h"
#include "engine/layout/stream_layout.h"
#include "offload/transport.h"
#include "tandem/optimizer.h"

namespace tandem {

// Throws Error(kInvalidArgument) naming the first bad value: loss_scale finite and > 0,
// max_grad_norm finite and >= 0 (Step and BeginStep).
void ValidateStepArgs(const StepOptions& opt);

class HybridOptimizer::Impl {
 public:
  Impl(std::vector<TensorSpec> specs, OptimizerConfig cfg);
  ~Impl();

  // Each group's learning rate of a step, checked (one per group, finite, >= 0): as
  // handed (Step(group_lrs)) or lr * lr_scale (Step(lr)).
  std::vector<double> GroupLrs(std::span<const double> group_lrs) const;
  std::vector<double> OneLr(double lr) const;
  // Step(group_lrs) with one_lr null, else Step(*one_lr): the learning rates are checked
  // inside, so that a bad one ends a begun step as every other failure does.
  StepResult Step(std::span<const double> group_lrs, const double* one_lr,
                  const StepOptions& opt);
  void ReloadParams(std::span<const size_t> tensors);
  int64_t tensor_step_count(size_t i) const;
  void GradReady(size_t i, const void* grad);
  void WaitGradConsumed(size_t i, void* stream) const;
  void BeginStep(std::span<const double> group_lrs, const double* one_lr,
                 const StepOptions& opt);
  bool step_begun() const { return begun_; }
  void WaitParam(size_t i, void* stream) const;
  void SetHyperParams(size_t g, const HyperParams& h);
  const HyperParams& hyper_params(size_t g) const;
  size_t group_count() const { return cfg_.groups.size(); }
  ExecutionMode mode() const { return mode_; }
  const Placement& placement() const { return placement_; }
  const ComputeSplit& compute_split() const { return split_; }
  MemoryReport memory() const { return report_; }
  StageTimes last_step_times();
  int64_t step_count() const { return step_; }
  size_t tensor_count() const { return specs_.size(); }
  OptimizerSnapshot Snapshot() const;
  void Restore(const OptimizerSnapshot& s);

 private:
  bool gpu() const { return mode_ == ExecutionMode::kGpu; }
  void Validate();
  // Throws Error(kOutOfMemory) naming both figures when the host state of the resolved
  // placement would exceed OptimizerConfig::pinned_budget_bytes (before BuildLayout).
  void CheckHostBudget(const MemoryReport& resolved) const;
  void BuildLayout();
  // The initial state from the parameters (Note [Block-wise initialisation],
  // offload/state_init.h): blocks of kInitBlockElements; progress lines on stderr once the
  // construction has run kInitQuietSeconds, at most every kInitProgressSeconds.
  void InitState();
  static constexpr uint64_t kInitBlockElements = uint64_t{1} << 19;
  static constexpr double kInitQuietSeconds = 3.0, kInitProgressSeconds = 3.0;
  void BuildChunks();
  // The rates offload_compute auto decides with: machine_rates, else (GPU mode, auto,
  // something offloaded) the rate cache's, measured into it on the first construction of
  // this setting (MeasureRates); none otherwise.
  std::optional<MachineRates> Rates();
  MachineRates MeasureRates(const RateCache::Key& key);
  double ProbeHostRate(const RateCache::Key& key);
  // The executors (Note [Executors], offload/executor.h), in launch order: GPU-resident
  // (over `hot`, the hot spans), GPU-stream (its chunks handed to the GpuSide, or to host
  // mode's stand-in) and host-offload (RunOffload).
  void BuildExecutors(std::vector<StepSpan> hot);
  void RunOffload(const offload::StepWork& w);
  void CopyToDeviceSide(void* dst, const void* src, size_t bytes) const;
  void CopyFromDeviceSide(void* dst, const void* src, size_t bytes) const;
  // Waits for the copies in flight and (GPU mode) the caller's stream.
  void Quiesce(const char* why) const;
  void WriteParamsFromMasters(size_t t, const TensorSnapshot& ts);
  // Tensor t's whole state (hot and offloaded parts) as a snapshot entry, and back; with
  // masters_only, the master's arrays alone are copied (the others keep their sizes and
  // hold zeros in a snapshot read so).
  TensorSnapshot ReadTensorState(size_t t, bool masters_only = false) const;
  void WriteTensorState(size_t t, TensorSnapshot& ts, bool masters_only = false);
  // The step's scalars (Note [Scalar index]): one StepScalars per distinct (group, tensor
  // step) of the tensors in `active` (empty: all), from each group's lr and
  // hyper-parameters; scalar_index[t] = its entry or kSkipScalarIndex.
  void AssignScalars(const std::vector<uint8_t>& active, const std::vector<double>& lrs,
                     const std::vector<HyperParams>& hyper, double grad_mul,
                     std::vector<StepScalars>* scalars, std::vector<uint32_t>* scalar_index) const;
  // The hyper-parameters of a step: StepOptions::group_hyper, checked, or the current ones.
  std::vector<HyperParams> StepHyper(const StepOptions& opt) const;
  // The gradient each tensor's update reads at this step (StepOptions::grads, GradReady's,
  // TensorSpec::grad), each new pointer of an active tensor checked; throws
  // Error(kInvalidArgument) naming the tensor, nothing changed.
  std::vector<const void*> StepGrads(const StepOptions& opt,
                                     const std::vector<uint8_t>& active) const;
  void CheckGrad(size_t t, const void* grad, const char* where) const;
  // Points every reader of tensor t's gradient (pre-pass, kernels, pipeline chunks) at
  // `grad`, where it changed.
  void UseGrad(size_t t, const void* grad);
  void BuildSpeculation();
  void AllocateEarlyBuffer();
  const void* EarlyGrad(size_t chunk) const;
  // Ends the early start of a step: a speculation not committed is rolled back (after
  // cancelling what is queued), tickets and marks are cleared. Never throws.
  void EndEarlyStart() noexcept;
  void RequireNoBegunStep(const char* what) const;

  // When construction began: InitState's progress lines count from it.
  const std::chrono::steady_clock::time_point construct_start_ = std::chrono::steady_clock::now();
  std::vector<TensorSpec> specs_;
  OptimizerConfig cfg_;
  // Per tensor: its effective state formats (offload/tensor_formats.h), fixed at
  // construction; every layout, kernel, snapshot and restore of tensor t uses formats_[t].
  std::vector<StateFormats> formats_;
  ExecutionMode mode_;
  Placement placement_;
  ComputeSplit split_;  // the modelled split (zeros without rates)
  int64_t step_ = 0;
  std::vector<int64_t> tensor_step_;  // per tensor: updates received (torch's per-param step)

  // Per-tensor state of the GPU-resident part and of the host-resident part the host
  // computes, and the chunk-major state of the streamed part (Note [Three placement
  // classes] in tandem/compute_split.h).
  layout::StateLayout hot_, cold_;
  layout::StreamLayout stream_;
  offload::Slab hot_slab_, cold_slab_, staging_slab_, early_slab_;
  offload::Slab stream_slab_, stream_slots_;  // the streamed state; its device slots
  std::vector<std::vector<size_t>> stream_pieces_;  // per tensor: its streamed pieces
  // Speculating streamed chunks (offload/stream_speculation.h): backups (pinned) and
  // parameter holding places (device), per stream chunk at these offsets (all ones: none).
  offload::Slab stream_backup_slab_, stream_hold_slab_;
  std::vector<uint64_t> stream_backup_off_, stream_hold_off_;
  MemoryReport report_;

  cpu::HostDriver driver_;
  std::unique_ptr<offload::Transport> transport_;
  std::unique_ptr<offload::Pipeline> pipeline_;
  std::unique_ptr<offload::GpuSide> gpu_;  // GPU mode only
  std::vector<size_t> hot_tensor_;         // per hot span (GPU plan / host work): its tensor
  std::vector<offload::OffloadChunk> chunks_;
  std::vector<offload::Ticket> last_upload_;
  // Early start. chunks_[chunk_begin_[t] .. chunk_end_[t]) are tensor t's chunks;
  // chunk_part_off_[c] is chunk c's first element within its tensor's offloaded part.
  std::vector<size_t> chunk_begin_, chunk_end_;
  std::vector<uint64_t> chunk_part_off_;
  std::vector<offload::Ticket> chunk_ticket_;  // per chunk: early download (0: none)
  std::vector<uint8_t> grad_ready_;            // per tensor: GradReady seen this step
  // Per tensor: the gradient of this step (GradReady's, else the last step's), the one
  // every reader points at now, and the last one checked (Note [Gradient reads]).
  std::vector<const void*> grad_, used_grad_, checked_grad_;
  std::vector<uint64_t> early_offset_;         // per tensor: byte offset in early_slab_
  uint64_t early_bytes_ = 0;
  bool early_allocated_ = false;
  // Speculative early start (offload/speculation.h): per tensor, the byte offset of its
  // parameters in hold_slab_ (all ones where the chunk uploads from its own state).
  std::vector<uint64_t> hold_offset_;
  layout::StateLayout backup_;
  offload::Slab backup_slab_, hold_slab_;
  bool begun_ = false, spec_commit_ = false;
  // What BeginStep announced: each group's lr and hyper-parameters, the clip norm and the
  // loss scale (Step must hand the same).
  std::vector<double> begun_lrs_;
  std::vector<HyperParams> begun_hyper_;
  double begun_clip_ = 0, begun_loss_scale_ = 1;
  std::vector<StepScalars> spec_scalars_;
  std::vector<uint32_t> spec_index_;     // per tensor: its scalar index in spec_scalars_
  std::vector<StepScalars> scalars_;
  std::vector<uint32_t> scalar_index_;   // per tensor: its scalar index in scalars_ this step
  std::vector<uint8_t> active_;          // per tensor: stepped this step
  std::vector<std::unique_ptr<offload::Executor>> executors_;
  offload::StreamExecutor* stream_exec_ = nullptr;  // the GPU-stream executor, if any
  std::unique_ptr<offload::StreamSpeculation> stream_spec_;  // with speculative chunks only
  bool stream_commit_ = false;  // this Step keeps the streamed speculation

  StageTimes times_;

  // Last: destroyed first, so its worker is joined before the chunks, slabs and the
  // transport it uses go away.
  std::unique_ptr<offload::Speculator> speculator_;
};

}  // namespace tandem
