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
// (BeginStep, GradReady, Step, WaitParam, Restore). Const methods may run concurrently with
// each other but not with Step. Between BeginStep and Step the optimizer's own worker
// thread updates offloaded chunks in the background; that needs nothing from the caller.
//
// Failure: every method throws tandem::Error. A Step that rejects its arguments, or that
// finds a non-finite gradient, leaves every parameter and every state as it was before
// the call (device and host). A copy or kernel failure in the middle of a step (kCuda)
// says how many offload chunks were applied: the hot elements and those chunks keep
// their update, the step count does not advance, and the optimizer stays usable;
// restoring a Snapshot taken before the step undoes it (docs/user_guide.md, "Errors").
#pragma once

#include <cstddef>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tandem/compute_split.h"
#include "tandem/faults.h"
#include "tandem/placement.h"
#include "tandem/snapshot.h"
#include "tandem/types.h"

namespace tandem {

// One parameter tensor handed to the optimizer. The optimizer does not own the buffers;
// they must stay valid (and keep their size) for the optimizer's lifetime.
struct TensorSpec {
  std::string name;               // unique; used in errors and checkpoints
  uint64_t numel = 0;             // may be 0
  DType param_dtype = DType::kBF16;
  DType grad_dtype = DType::kBF16;
  void* param = nullptr;          // device pointer (GPU mode) or host pointer (host mode)
  const void* grad = nullptr;     // same memory space as param
  uint32_t group = 0;             // index into OptimizerConfig::groups
  // Original shape (row-major), kept in snapshots and checkpoints; empty means one
  // dimension of numel elements. When non-empty its product must equal numel.
  std::vector<uint64_t> shape = {};
  // This tensor's state formats, replacing OptimizerConfig::formats for it alone; unset
  // (the default): the configured formats. Checked against the algorithm and the tensor's
  // group exactly like the configured ones (a variance format for Lion or SGD, a momentum
  // format for SGD without momentum): a bad combination throws Error(kInvalidArgument)
  // naming the tensor. Typical use: f32 moments for tensors whose q8 groups of 32
  // elements a shard boundary could split, q8 for the others. The result is bit-identical,
  // tensor by tensor, to an optimizer configured with that tensor's formats globally; the
  // snapshot records each tensor's formats (TensorSnapshot::formats).
  std::optional<StateFormats> formats = std::nullopt;
  // The runs of the gradient that the norm pre-pass sums as wholes (Note [Exact sum of
  // squares] in engine/exact_sum.h): a sharded tensor must be cut only between runs, so
  // that the exact norm is the same at any sharding. 0 (default): the rows of `shape` (the
  // product of all but its first dimension) for two or more dimensions, else the whole
  // tensor. 1: each element (a 1-D tensor sharded at any element). Must divide numel.
  uint64_t norm_unit = 0;
};

enum class ExecutionMode : uint8_t {
  kAuto = 0,  // GPU mode when a CUDA device is present, otherwise host mode
  kGpu = 1,   // parameters and gradients live on the GPU; offloaded state on the host
  kHost = 2,  // everything in host memory, stepped by the host kernels (no GPU needed)
};

struct OptimizerConfig {
  Algorithm algorithm = Algorithm::kAdamW;
  // Per-group hyper-parameters; TensorSpec::group indexes this. Must not be empty.
  // One default group. (Not `groups{HyperParams{}}`: with it GCC 12 reports a false
  // -Wmaybe-uninitialized in callers that build configs inline.)
  std::vector<HyperParams> groups = std::vector<HyperParams>(1);
  // Default state formats: fp32 master and moments. A tensor may override them
  // (TensorSpec::formats).
  StateFormats formats;
  // Fraction of all elements whose state lives in (pinned) host memory, in [0, 1]; where
  // those elements are computed is offload_compute's choice. Host mode honours it too,
  // running the same paths over host memory (use 0 there for plain CPU training: no
  // copies).
  double offload_fraction = 0.0;
  PlacementPolicy placement = PlacementPolicy::kBackwardOrder;
  ExecutionMode mode = ExecutionMode::kAuto;
  // Host threads for the host kernels; 0: one per CPU of host_cpus, or all cores this
  // process may use when host_cpus is empty. At most MaxHostThreads()
  // (Error(kInvalidArgument) beyond).
  int host_threads = 0;
  // Logical CPU ids the optimizer's host threads run on: the host kernels' arena, the
  // speculation worker and its arena, host mode's copy threads, and the caller's thread
  // while it works in one of those arenas (its own affinity is restored afterwards).
  // Empty (the default): wherever the process may run. Each id must be >= 0, given once
  // and in the process's CPU affinity: Error(kInvalidArgument) naming the id otherwise.
  // Several ranks on one node each take a disjoint share (tandem/node.h, RankCpus).
  std::vector<int> host_cpus = {};
  // The most host memory the optimizer may hold, in bytes: MemoryReport::host.total()
  // (pinned memory in GPU mode, ordinary memory in host mode). 0 (the default): no limit.
  // Construction throws Error(kOutOfMemory) naming both figures, before allocating any
  // state, when the state would need more. Several ranks on one node each take a share
  // of the node's budget (tandem/node.h, PinnedBudget).
  uint64_t pinned_budget_bytes = 0;
  uint64_t chunk_elements = 1 << 21;  // offload pipeline chunk; multiple of 32, >= 32
  int pipeline_slots = 4;             // pinned gradient slots in flight, >= 2
  // Where the host-resident elements are computed (Note [Three placement classes] in
  // tandem/compute_split.h): 0 ("host") by the host kernels; 1 ("gpu") by the fused GPU
  // kernel, their state streamed up and down in chunks; a share in between splits them
  // (the first host-resident elements in registration order are streamed); or
  // kOffloadComputeAuto (the default): the share that minimises the modelled step for
  // `machine_rates` (HybridOptimizer::compute_split says what was chosen). The result is
  // bit-identical whatever the share. Host mode has no GPU: auto means 0 there, and a
  // share > 0 runs the streaming path with host memory standing in for the GPU's (tests).
  double offload_compute = kOffloadComputeAuto;
  // The rates `auto` uses (tandem-bench calibrate measures them). Unset: GPU mode measures
  // PCIe both ways at once and the host kernel at construction (a few tens of ms).
  std::optional<MachineRates> machine_rates = std::nullopt;
  // Streaming: the most bytes of host-resident state one chunk moves each way, and the
  // device slots that chunks rotate through (slots x chunk bytes of GPU memory).
  uint64_t stream_chunk_bytes = uint64_t{64} << 20;  // >= 4096
  int stream_slots = 3;                               // >= 2
  // The caller's CUDA stream (a cudaStream_t, as void*); nullptr is the legacy default
  // stream. Step orders itself after the work already queued there and queues the hot
  // kernel on it; parameters are final on it when Step returns.
  void* cuda_stream = nullptr;
  // Speculative early start (BeginStep): when true, the construction also allocates what
  // BeginStep needs, so the hot path never allocates: the early-start gradient buffer
  // (host staging, one landing place per offloaded gradient element) and a backup of the
  // offloaded state plus a parameter holding buffer (MemoryReport::Bytes::speculation).
  // BeginStep throws Error(kInvalidArgument) when this is false. Default: off.
  bool speculative_early_start = false;
  // Speculative early start of streamed elements (Note [Speculating streamed chunks] in
  // offload/stream_speculation.h): at most this many bytes of the streamed state, whole
  // chunks taken from the last registered (backward's first gradients), may be updated
  // on the GPU during backward. Each such chunk also takes its size again in pinned memory
  // (the backup) and, on the GPU, a place for its updated parameters (about 0.64 bytes per
  // state byte for bf16 parameters with bf16+ecc8/q8/q8), both counted in
  // MemoryReport::Bytes::speculation. 0: streamed chunks are updated at Step only. The
  // default is what a 1.5 Gparam model's backward covers on an H200 (beyond it, chunks
  // still in flight at Step slow the step: docs/architecture.md, "Speculative early
  // start").
  uint64_t speculative_stream_bytes = uint64_t{1} << 30;
  // Failures to inject, for tests and fault drills (tandem/faults.h); production code
  // leaves it unset (nullptr: nothing is injected). The optimizer shares the plan with the
  // caller, who may arm it at any time: every copy of the offload pipeline's transport and
  // of the streamed chunks asks it once (FaultPlan::CopyFails), and so does every state
  // allocation (FaultPlan::AllocationFails, in the constructor). An injected failure is
  // reported, and leaves the optimizer, exactly as the real one would ("Failure:" above).
  // A plan belongs to the optimizers it is handed to and affects no other.
  std::shared_ptr<FaultPlan> faults = nullptr;
};

// What a step's pre-pass finds in the gradients of its active tensors, before any update.
struct GradStats {
  // The exact sum of the squared (loss-scaled) gradient values, independent of how the
  // tensors are split into shards (Note [Exact sum of squares] in engine/exact_sum.h): a
  // 512-bit fixed-point number in units of 2^-192, sixteen 32-bit digits, least
  // significant first. Partials combine by integer addition, in any order.
  std::array<uint32_t, 16> exact{};
  double sum_squares = 0.0;  // `exact` rounded to the nearest double
  uint64_t nonfinite = 0;    // non-zero when some value is NaN or infinite
};

// Adds `part` into `whole`: `exact` as one integer, `nonfinite` as counts; `sum_squares`
// becomes the new `exact` rounded. Throws Error(kInvalidArgument) if the sum overflows 512
// bits (impossible for the partials of fewer than 2^64 finite float32 values).
void AddGradStats(GradStats& whole, const GradStats& part);

struct StepOptions {
  double max_grad_norm = 0.0;  // > 0: clip the global L2 norm to this; 0: no clipping
  double loss_scale = 1.0;     // gradients are divided by this (finite, > 0)
  // Which tensors have a gradient at this step, one entry per tensor (non-zero: yes);
  // empty means every tensor. A tensor without one is not stepped at all, as in
  // torch.optim: its parameter, master, moments and step count stay as they are, and its
  // gradient buffer is not read (it is left out of the norm and the non-finite check).
  // The span must stay valid for the call. BeginStep ignores it; Step's decides.
  std::span<const uint8_t> active = {};
  // Sharded training (one optimizer per process over its shard of the model): Step calls
  // this once, after the pre-pass over this optimizer's active gradients and before it
  // updates anything, with this optimizer's statistics, and takes the gradient norm, the
  // clip coefficient and the skip decision from the statistics it returns (the whole
  // model's): from their `exact` and `nonfinite` (sum_squares is ignored). Combine every
  // process's partials with AddGradStats (e.g. after an all-gather): the sum is exact, so
  // every process reaches the same bits, equal to an unsharded step's given the same
  // gradients. It runs on the thread that called Step; an exception it throws leaves Step
  // with nothing changed. Empty: this optimizer's statistics are the model's. BeginStep
  // ignores it; Step's decides.
  std::function<GradStats(const GradStats&)> combine_grad_stats = {};
};

struct StepResult {
  bool applied = false;     // false when skipped for a non-finite gradient
  double grad_norm = 0.0;   // global L2 norm of the unscaled gradients (NaN/Inf if skipped)
  int64_t step = 0;         // the optimizer's step count after this call
  uint64_t stepped_tensors = 0;  // tensors updated by this call (0 when not applied)
};

// Bytes held by the optimizer itself (not the caller's parameters and gradients), by
// category. docs/user_guide.md gives the closed-form formula each field follows.
struct MemoryReport {
  struct Bytes {
    uint64_t master = 0;      // fp32 masters or the bf16 part (0 where it aliases the param)
    uint64_t correction = 0;  // ecc8 / ecc16 arrays
    uint64_t momentum = 0;    // m codes or fp32 values
    uint64_t variance = 0;    // v codes or fp32 values
    uint64_t scales = 0;      // q8 group scales
    uint64_t staging = 0;     // pinned gradient slots and parameter staging slots
    uint64_t metadata = 0;    // kernel tables and reduction scratch
    // Speculative early start only (OptimizerConfig::speculative_early_start): the backup
    // of the offloaded state (to roll a speculative update back) and the buffer that
    // holds speculatively computed parameters until Step commits them.
    uint64_t speculation = 0;
    uint64_t total() const {
      return master + correction + momentum + variance + scales + staging + metadata +
             speculation;
    }
  };
  Bytes device;  // GPU memory
  Bytes host;    // pinned (GPU mode) or ordinary (host mode) host memory
  // The state arrays again, by placement class (Note [Three placement classes] in
  // tandem/compute_split.h): each class's carved state bytes, and the device slots that
  // streamed chunks go through (counted in device.staging above as well).
  struct Classes {
    uint64_t gpu_resident = 0;   // in `device` (GPU mode) or `host` (host mode)
    uint64_t streamed = 0;       // in `host`
    uint64_t stream_slots = 0;   // in `device` (host mode: `host`)
    uint64_t host_computed = 0;  // in `host`
  } classes;
  // OptimizerConfig::pinned_budget_bytes: the most `host.total()` may be (0: no limit).
  uint64_t host_budget = 0;
};

// Busy time of each stage of the last Step, in milliseconds (wall clock on the host,
// CUDA events on the GPU), and the whole step as the caller saw it.
struct StageTimes {
  double prepass_ms = 0;    // gradient norm and non-finite check
  double gpu_update_ms = 0; // fused kernel over the hot elements
  double d2h_ms = 0;        // gradient copies down (sum of copy durations)
  double host_update_ms = 0;// host kernels over the offloaded elements
  double h2d_ms = 0;        // parameter copies up
  // Streamed elements (offload_compute > 0): GPU time from the first state upload to the
  // last state download, and the chunks streamed.
  double stream_ms = 0;
  uint64_t stream_chunks = 0;
  double step_ms = 0;       // Step() call, start to return; GPU work the step queued (the
                            // hot kernel, streamed chunks: stream_ms) may still be running
  uint64_t chunks = 0;      // offload pipeline chunks run
  // Speculative early start (BeginStep): chunks updated during backward whose result this
  // Step kept, chunks it restored from their backup (non-finite gradient, clipping, or a
  // BeginStep/Step mismatch), and the host busy time of the speculative updates (backup
  // plus kernel, summed over chunks, spent before Step was called).
  uint64_t speculated_chunks = 0;
  uint64_t rolled_back_chunks = 0;
  double speculative_host_ms = 0;
  // The same for streamed chunks: updated during backward and kept by this Step (their
  // parameters copied into place, nothing streamed), and restored from their backup.
  uint64_t speculated_stream_chunks = 0;
  uint64_t rolled_back_stream_chunks = 0;
};

class HybridOptimizer {
 public:
  // Validates every spec (null or mismatched pointers, dtypes, groups, duplicate names),
  // the configuration and the hyper-parameters, computes the placement, allocates the
  // state and initialises the masters from the current parameter values (moments zero).
  HybridOptimizer(std::vector<TensorSpec> tensors, OptimizerConfig config);
  ~HybridOptimizer();
  HybridOptimizer(const HybridOptimizer&) = delete;
  HybridOptimizer& operator=(const HybridOptimizer&) = delete;

  // One optimizer step with learning rate lr (finite, >= 0). Gradients must be final
  // (on cuda_stream in GPU mode). Checks the gradients of every active tensor
  // (StepOptions::active) first; on a non-finite value it changes nothing and returns
  // applied = false. Each active tensor's bias corrections use its own step count + 1
  // (tensor_step_count), as torch.optim keeps one step per parameter; the optimizer's
  // step count (step_count) counts the applied Step calls.
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

  // Replaces group g's hyper-parameters from the next Step on (learning-rate schedulers
  // that keep one lr per group set lr_scale here, or pass betas/weight decay changes).
  // Throws Error(kInvalidArgument) for a bad group index or value, or for a change of
  // whether an SGD group keeps a momentum buffer (its state layout is fixed at
  // construction); nothing changes then.
  void SetHyperParams(size_t group, const HyperParams& h);
  const HyperParams& hyper_params(size_t group) const;
  size_t group_count() const;

  // Early start: tells the optimizer that tensor i's gradient is final on cuda_stream
  // (in backward order), so its offloaded part can start copying down before Step.
  // Step must follow after all gradients are ready. Calling it is optional. Between
  // BeginStep and Step it also queues the tensor's offloaded chunks for a speculative
  // host update (below). A second call for the same tensor in one step says its gradient
  // changed since the first (gradient accumulation): the early work done for it is
  // discarded (its speculated chunks rolled back, its downloads made again after the new
  // gradient), so the step gives the same bits as without early start; that costs a wait
  // for the speculation worker. Throws Error(kInvalidArgument) for a bad index.
  void GradReady(size_t tensor_index);

  // Speculative early start: announces the coming Step(lr, options), before backward (or
  // at least before the first GradReady of the step). Until that Step, each offloaded
  // chunk whose gradients have all landed (GradReady) is updated on the host by the
  // optimizer's worker thread, assuming no clipping, after a backup of its state; the
  // parameters on the device are not touched before Step (backward may still read
  // them). Step then checks all gradients as always and keeps the speculative results
  // when they are finite and clipping does not trigger; otherwise it restores every
  // speculated chunk from its backup (and, for clipping, runs the normal update). The
  // result is bit-identical to a Step without BeginStep in every case.
  // Requires OptimizerConfig::speculative_early_start. Throws Error(kInvalidArgument) when
  // that is off, when a step is already begun, or for a bad lr or options (nothing
  // changes then). The matching Step must pass the same lr and options: any other Step
  // throws Error(kInvalidArgument) after undoing the speculation (the optimizer is then
  // as before BeginStep; call Step again). SetHyperParams, Snapshot and Restore throw
  // Error(kInvalidArgument) while a step is begun, changing nothing.
  void BeginStep(double lr, const StepOptions& options = {});
  bool step_begun() const;  // between BeginStep and the Step that ends it

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
  // Writes the restored master weights to the parameters.
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

// The memory a HybridOptimizer built from `tensors` and `config` in `mode` (kGpu or kHost)
// would report, computed without allocating anything; the tensors' pointers are ignored.
// Equal to HybridOptimizer::memory() by construction (both use one layout function).
MemoryReport PredictMemory(const std::vector<TensorSpec>& tensors, const OptimizerConfig& config,
                           ExecutionMode mode);

}  // namespace tandem
