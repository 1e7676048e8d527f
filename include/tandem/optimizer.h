// HybridOptimizer: one optimizer whose step runs a chosen fraction of the parameters on
// the GPU and the rest on the host, with the copies between them hidden behind the work.
//
// Usage (C++; docs/user_guide.md has a complete example):
//
//   std::vector<tandem::TensorSpec> specs = ...;   // name, numel, dtypes, param/grad pointers
//   tandem::OptimizerConfig cfg;
//   cfg.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
//   cfg.offload_fraction = 0.5;
//   tandem::HybridOptimizer opt(specs, cfg);        // state initialised from the params
//   for (...) { backward(); opt.Step(lr, {.max_grad_norm = 1.0}); }
//
// Thread safety: one thread at a time may call the non-const methods of one optimizer
// (Step, BeginStep, GradReady, ReloadParams, SetHyperParams, Restore). The const methods
// (Snapshot, memory, last_step_times, WaitParam, WaitGradConsumed, GradConsumed and the
// accessors) may run on several threads at once, but not while a non-const method runs.
// Between BeginStep and Step the optimizer's own worker thread updates offloaded chunks
// in the background; that needs nothing from the caller.
//
// Failure: every method throws tandem::Error. A Step that rejects its arguments, or that
// finds a non-finite gradient, leaves every parameter and every state as it was before
// the call (device and host). A copy or kernel failure in the middle of a step (kCuda)
// says how many offload chunks were applied: the hot elements and those chunks keep
// their update, the step count does not advance, and the optimizer stays usable;
// restoring a Snapshot taken before the step undoes it (docs/user_guide.md, "Errors").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "tandem/compute_split.h"
#include "tandem/config.h"
#include "tandem/placement.h"
#include "tandem/resolve_placement.h"
#include "tandem/snapshot.h"
#include "tandem/types.h"

namespace tandem {

// Note [Gradient reads]: how long the engine reads tensor i's gradient of a step (the
// pointer of StepOptions::grads, GradReady or TensorSpec::grad). From GradReady(i) on (or
// from Step, without early start) until Step returns, on the host; on the device until
// the last of: the pre-pass and the GPU-resident kernel (on cuda_stream), the kernels of
// its streamed chunks (the stream executor's kernel stream; a chunk speculated during
// backward is read again at Step when the speculation is rolled back), and the downloads
// of its host-computed chunks (every one complete when Step returns). Once Step has
// returned, cuda_stream is ordered after all of them, so a gradient freed on cuda_stream
// (as torch's caching allocator frees it) is safe; WaitGradConsumed orders another stream.
// With release_grads the reads of a gradient handed to GradReady all happen at GradReady
// (Note [Gradient release]). The engine never writes a gradient.
//
// Note [Gradient release] (OptimizerConfig::release_grads): GradReady(i, grad,
// ready_stream) enqueues, in the call, every read the step will make of that gradient,
// ordered after the work queued on ready_stream so far: its exact norm partial and
// non-finite count, a device copy of its GPU-resident part into the engine's gradient
// buffer, the downloads of its host-computed chunks into the early-start buffer and of
// its streamed chunks into the pinned gradient area, and (speculative early start) the
// speculative kernels of the streamed chunks its hand-over completes, which read it in
// place instead of uploading its copy again; then records one consumed event for tensor
// i. Once GradConsumed(i) is true (or on a stream after WaitGradConsumed(i,
// stream)) the caller may free or reuse the gradient's memory: Step reads its copies
// (the partial instead of the gradient, the gradient buffer in the GPU-resident kernel,
// the early-start buffer in the host kernels, the gradient area uploaded with each
// streamed chunk's state). A speculation rolled back, a clip that triggers, a non-finite
// value on any rank: each is redone from those copies, so the bits are those of the same
// steps without release. What the caller gives up: the gradient is final at GradReady
// and handed once per step (a second GradReady throws), and whatever it does to the
// gradient afterwards (a clip of its own) is not seen.

class HybridOptimizer {
 public:
  // Validates every spec (null or mismatched pointers, dtypes, groups, duplicate names),
  // the configuration and the hyper-parameters, computes the placement, allocates the
  // state and initialises the masters from the current parameter values (moments zero).
  HybridOptimizer(std::vector<TensorSpec> tensors, OptimizerConfig config);
  ~HybridOptimizer();
  HybridOptimizer(const HybridOptimizer&) = delete;
  HybridOptimizer& operator=(const HybridOptimizer&) = delete;

  // One optimizer step; group g's tensors step with learning rate group_lrs[g] (one entry
  // per group, each finite and >= 0; HyperParams::lr_scale is not applied), as torch.optim
  // and Megatron hand a group's lr at every step, with the hyper-parameters of
  // StepOptions::group_hyper (or the current ones) and the gradients of StepOptions::grads
  // (or GradReady's, or TensorSpec::grad). Gradients must be final (on cuda_stream in GPU
  // mode). Checks the gradients of every active tensor (StepOptions::active) first; on a
  // non-finite value it changes no state and returns applied = false. Each active
  // tensor's bias corrections use its own step count + 1 (tensor_step_count), as
  // torch.optim keeps one step per parameter; the optimizer's step count (step_count)
  // counts the applied Step calls. The step's scalars are computed on the host from the
  // values handed in and passed to the kernels by value: learning rates and
  // hyper-parameters that move differently per group at every step cost no device
  // synchronisation. Error(kInvalidArgument) for a wrong entry count or a bad value
  // (naming the group or tensor), nothing changed.
  StepResult Step(std::span<const double> group_lrs, const StepOptions& options = {});
  // Every group with one learning rate: group g steps with lr * groups[g].lr_scale
  // (lr_scale is 1 unless set: then every group steps with lr).
  StepResult Step(double lr, const StepOptions& options = {});

  // The parameter is the source of truth: re-derives tensor i's master from its
  // parameter (for each i in `tensors`) after the caller wrote the parameter between
  // steps (loaded weights, re-initialised a layer, swapped in an EMA copy). Every element
  // whose parameter no longer equals the value its master gives (converted to the
  // parameter's dtype) gets its master re-encoded from the parameter: an fp32 master
  // takes the parameter's value; a bf16+ecc master takes it with the correction reset
  // (exact for bf16 and fp32 parameters). Where the master's bf16 array *is* the
  // parameter (bf16 parameters, bf16-based master) the engine cannot tell which elements
  // changed and resets the correction of every element of the tensor. Moments and step
  // counts stay. GPU mode: waits for cuda_stream first (the writes must be queued there
  // or done). Throws Error(kInvalidArgument) for a bad index (nothing changed) or while a
  // step is begun.
  void ReloadParams(std::span<const size_t> tensors);

  // Tensor i's own step count: the updates it has received.
  int64_t tensor_step_count(size_t i) const;

  // Replaces group g's hyper-parameters from the next Step on (StepOptions::group_hyper
  // does the same per step, for every group at once).
  // Throws Error(kInvalidArgument) for a bad group index or value, or for a change of
  // whether an SGD group keeps a momentum buffer (its state layout is fixed at
  // construction); nothing changes then.
  void SetHyperParams(size_t group, const HyperParams& h);
  const HyperParams& hyper_params(size_t group) const;
  size_t group_count() const;

  // Early start: tells the optimizer that tensor i's gradient is final (in backward
  // order), so its offloaded part can start copying down before Step. `ready_stream` (a
  // cudaStream_t as void*; nullptr: OptimizerConfig::cuda_stream) is the stream the
  // gradient was produced on: every read of it the engine makes comes after the work
  // queued there before the call (GPU mode; ignored in host mode). Step must follow after
  // all gradients are ready. Calling it is optional. `grad` (may be null: the pointer
  // StepOptions::grads will hand, else TensorSpec::grad) is the gradient this step reads
  // for tensor i, checked as StepOptions::grads checks it; Step must not hand another.
  // The gradient's norm partial and non-finite count are computed at once (Step adds the
  // partials exactly, in any order: the same bits as its own pre-pass). Between BeginStep
  // and Step it also queues the tensor's offloaded chunks for a speculative update
  // (below); once the partials seen so far exceed BeginStep's max_grad_norm or hold a
  // non-finite value, no further chunk is queued (StageTimes::speculation_stopped): the
  // step will clip or skip. With release_grads it takes all the step needs of the
  // gradient (Note [Gradient release]), and a second call for the same tensor in one step
  // throws Error(kInvalidArgument), nothing changed. Without it, a second call says the
  // gradient changed since the first (gradient accumulation): the early work done for it
  // is discarded (its partial computed again, its speculated chunks rolled back, its
  // downloads made again after the new gradient), so the step gives the same bits as
  // without early start; that costs a wait for the speculation worker. Throws
  // Error(kInvalidArgument) for a bad index or gradient (nothing changed then).
  void GradReady(size_t tensor_index, const void* grad = nullptr, void* ready_stream = nullptr);

  // Makes `stream` (a cudaStream_t as void*, nullptr = legacy default) wait, without
  // blocking the host, until the engine no longer reads tensor i's gradient (Note
  // [Gradient reads]): the gradient of the last Step, called after that Step returned and
  // before the next step's GradReady(i) or BeginStep; with release_grads also between
  // GradReady(i) and Step (the reads GradReady enqueued). A no-op in host mode, except
  // there with release_grads between GradReady(i) and Step, where it blocks until those
  // reads completed. Error(kInvalidArgument) for a bad index, and when a step is under
  // way (BeginStep or GradReady since the last Step) and the coming Step's pre-pass still
  // reads the gradient (no release_grads, or no GradReady(i) in this step).
  void WaitGradConsumed(size_t tensor_index, void* stream) const;

  // Gradient release (OptimizerConfig::release_grads): whether every read of tensor i's
  // gradient that GradReady(i) enqueued has completed (never blocks); true when GradReady(i)
  // was not called since construction. Once true for a gradient handed in this step, its
  // memory may be freed or reused (Note [Gradient release]). Error(kInvalidArgument) for a
  // bad index or without release_grads.
  bool GradConsumed(size_t tensor_index) const;

  // Speculative early start: announces the coming Step(group_lrs, options), before
  // backward (or at least before the first GradReady of the step). Until that Step, each
  // offloaded chunk whose gradients have all landed (GradReady) is updated by the
  // optimizer's worker thread (host-computed chunks) or on the GPU (streamed chunks),
  // assuming no clipping, after a backup of its state; the parameters are not touched
  // before Step (backward may still read them). Step then checks all gradients as always
  // and keeps the speculative results when they are finite and clipping does not
  // trigger; otherwise it restores every speculated chunk from its backup (and, for
  // clipping, runs the normal update). The result is bit-identical to a Step without
  // BeginStep in every case.
  // Requires OptimizerConfig::speculative_early_start. Throws Error(kInvalidArgument) when
  // that is off, when a step is already begun, or for a bad lr or options (nothing
  // changes then). The matching Step must pass the same learning rates (group by group,
  // whichever form), max_grad_norm, loss_scale and hyper-parameters (StepOptions::
  // group_hyper, or the current ones at both): any other Step throws
  // Error(kInvalidArgument) after undoing the speculation (the optimizer is then as
  // before BeginStep; call Step again). SetHyperParams, Snapshot and Restore throw
  // Error(kInvalidArgument) while a step is begun, changing nothing.
  void BeginStep(std::span<const double> group_lrs, const StepOptions& options = {});
  void BeginStep(double lr, const StepOptions& options = {});  // every group: lr * lr_scale
  bool step_begun() const;  // between BeginStep and the Step that ends it

  // Ends the step under way (BeginStep, GradReady since the last Step) without applying
  // it: speculated chunks are rolled back from their backups and the gradients handed to
  // GradReady are forgotten (with release_grads their copies too), as when a Step throws
  // for a bad argument. The masters, moments, step counts and parameters are those of
  // the last Step. For a front end whose user dropped the step's gradients (zero_grad
  // after backward, a refused step). A no-op when no step is under way; never throws
  // (it waits for the speculation worker).
  void DiscardStep();

  // Makes `stream` (a cudaStream_t as void*, nullptr = legacy default) wait until tensor
  // i's parameter of the last Step is final on the GPU; a no-op in host mode.
  void WaitParam(size_t tensor_index, void* stream) const;

  ExecutionMode mode() const;  // kGpu or kHost
  // Placement::stream_share is the share of host-resident elements computed on the GPU;
  // compute_split() gives it with the modelled step for it (all zeros when there were no
  // rates: a share given explicitly, or host mode).
  const Placement& placement() const;
  const ComputeSplit& compute_split() const;
  MemoryReport memory() const;
  StageTimes last_step_times() const;
  int64_t step_count() const;
  size_t tensor_count() const;

  // The whole state, placement-independent (for checkpoints: tandem/checkpoint.h).
  OptimizerSnapshot Snapshot() const;
  // Replaces the state with `s` after checking it (ValidateRestorable: a state a run can
  // go on from) and that it matches this optimizer's tensors, formats and algorithm
  // (Error(kInvalidArgument) naming the problem; nothing changed).
  // Formats are compared tensor by tensor (TensorSnapshot::formats against the tensor's
  // effective formats; the message names the tensor and both); s.formats, the configured
  // default, need not match.
  // Writes the restored master weights to the parameters. Gradients handed to GradReady
  // since the last Step are forgotten, except with release_grads, where they stay handed
  // and the next Step steps the restored state with them (a checkpoint loaded between
  // backward and Step).
  void Restore(const OptimizerSnapshot& s);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Whether this process can use a CUDA device (never throws). False in a build without
// CUDA (TANDEM_HAS_CUDA == 0), where GPU mode throws Error(kUnsupported).
bool CudaDeviceAvailable();

// The largest OptimizerConfig::host_threads accepted: 4 x the cores this process may run
// on (its CPU affinity), at least 16.
int MaxHostThreads();

}  // namespace tandem
