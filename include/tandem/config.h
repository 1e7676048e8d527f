// The optimizer's value types: the tensors handed to it, its configuration, a step's
// options and result, its memory report and stage times (include/tandem/optimizer.h has
// the optimizer itself). Plain value types, safe to copy between threads; the pointers
// they hold are the caller's and stay valid as each field says. Layout code and the
// planner use these without the optimizer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tandem/compute_split.h"
#include "tandem/device_allocator.h"
#include "tandem/faults.h"
#include "tandem/logger.h"
#include "tandem/placement.h"
#include "tandem/rate_cache.h"
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
  // The gradient a step reads unless the step hands another (StepOptions::grads,
  // GradReady): numel elements of grad_dtype, in the same memory space as param.
  const void* grad = nullptr;
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
  // The rates `auto` uses (tandem-bench calibrate measures them). Unset: GPU mode takes
  // them from rate_cache, measuring them there on the first construction of a setting
  // (PCIe both ways at once and the host kernel: a few tens of ms; tandem/rate_cache.h).
  std::optional<MachineRates> machine_rates = std::nullopt;
  // Where measured rates are kept (tandem/rate_cache.h); nullptr (the default): the
  // process's DefaultRateCache(). Ignored when machine_rates is set or nothing is auto.
  std::shared_ptr<RateCache> rate_cache = nullptr;
  // Streaming: the most bytes of host-resident state one chunk moves each way, and the
  // device slots that chunks rotate through (slots x chunk bytes of GPU memory).
  uint64_t stream_chunk_bytes = uint64_t{32} << 20;  // >= 4096
  int stream_slots = 3;                               // >= 2
  // Where every device buffer the optimizer owns comes from (Note [One GPU memory pool] in
  // tandem/device_allocator.h): shared with the caller, who keeps it usable for the
  // optimizer's lifetime. nullptr (the default): cudaMalloc and cudaFree. Host mode
  // allocates no device memory and ignores it.
  std::shared_ptr<DeviceAllocator> device_allocator = nullptr;
  // The caller's CUDA stream (a cudaStream_t, as void*); nullptr is the legacy default
  // stream. Step orders itself after the work already queued there and queues the hot
  // kernel on it; parameters are final on it when Step returns.
  void* cuda_stream = nullptr;
  // Speculative early start (BeginStep): when true, the construction also allocates what
  // BeginStep needs, so the hot path never allocates: the early-start gradient buffer
  // (host staging, one landing place per host-computed gradient element) and a backup of
  // the host-computed state (within speculative_host_bytes) plus a parameter holding
  // buffer (MemoryReport::Bytes::speculation).
  // BeginStep throws Error(kInvalidArgument) when this is false. Default: off.
  bool speculative_early_start = false;
  // Speculative early start of streamed elements (Note [Speculating streamed chunks] in
  // offload/speculation/stream_speculation.h): at most this many bytes of the streamed
  // state, whole chunks taken from the last registered (backward's first gradients), may
  // be updated on the GPU during backward. Each such chunk also takes its size again in
  // pinned memory (its spare, where the speculative update comes down) and, on the GPU, a
  // place for its updated parameters (about 0.64 bytes per state byte for bf16 parameters
  // with bf16+ecc8/q8/q8), both counted in MemoryReport::Bytes::speculation. 0: streamed
  // chunks are updated at Step only. A speculated chunk moves what it moves at Step, so
  // the budget trades memory, not time: the default bounds the memory; pass as much as
  // the host holds (docs/benchmarks.md, "Speculating streamed chunks with spares").
  uint64_t speculative_stream_bytes = uint64_t{1} << 30;
  // Speculative early start of host-computed chunks: at most this many bytes of them are
  // backed up for a speculative update during backward, whole chunks taken in the order
  // their gradients arrive (the last registered tensors first), each counting its state's
  // bytes plus its parameters' bytes where they are held (MemoryReport::Bytes::
  // speculation); the other chunks are updated at Step, from their gradients already on
  // the host. 0 (the default): every host-computed chunk (a backup of the whole offloaded
  // state). A node whose host memory cannot hold the offloaded state twice (state,
  // backup) sets the budget it can spare.
  uint64_t speculative_host_bytes = 0;
  // Gradient release (Note [Gradient release] in tandem/optimizer.h): GradReady(i, grad,
  // ready_stream) takes everything the step needs of tensor i's gradient, so that the
  // caller may give the gradient's memory back during backward, once GradConsumed(i) is
  // true (or after WaitGradConsumed(i, stream)):
  //   * its norm partial (and non-finite count), computed at once;
  //   * its GPU-resident part, copied into an engine-owned gradient buffer (device memory in
  //     GPU mode: hot elements x grad bytes, MemoryReport::Bytes::grads);
  //   * its host-computed chunks, downloaded into the early-start buffer (pinned,
  //     MemoryReport::Bytes::staging; allocated at construction);
  //   * its streamed chunks, downloaded into a pinned gradient area laid out like the
  //     stream chunks (MemoryReport::Bytes::grads, host); at Step each chunk's gradients go
  //     up again with its state (the device slots hold a chunk's gradients too), unless the
  //     chunk was updated speculatively during backward and kept.
  // Bit-identical to the same steps without release, with clipping, loss scaling and the
  // non-finite skip: what an update or a redo needs is kept, nothing is recomputed. A
  // second GradReady of a tensor in one step throws Error(kInvalidArgument) (the first
  // gradient is gone: accumulate into it before handing it over). Tensors not handed to
  // GradReady in a step are read at Step as without release. Default: off.
  bool release_grads = false;
  // Gradient release with speculative early start: the most bytes of handed-over
  // gradients the GPU keeps at once so that the speculative kernels of the streamed
  // chunks their hand-over completes read them in place, instead of uploading the copies
  // downloaded at GradReady again (Note [Reading the handed gradient in place] in
  // offload/executors/gpu_stream.h). Such a gradient is consumed once those kernels have
  // run, not once it is downloaded: a link that is behind backward keeps it longer. Trades
  // GPU memory (at most this much) for link time (2 bytes per bf16 element up); never
  // changes a bit. 0 (the default): none, every released gradient is consumed once
  // downloaded.
  uint64_t in_place_grad_bytes = 0;
  // Failures to inject, for tests and fault drills (tandem/faults.h); production code
  // leaves it unset (nullptr: nothing is injected). The optimizer shares the plan with the
  // caller, who may arm it at any time: every copy of the offload pipeline's device and
  // of the streamed chunks asks it once (FaultPlan::CopyFails), and so does every state
  // allocation (FaultPlan::AllocationFails, in the constructor). An injected failure is
  // reported, and leaves the optimizer, exactly as the real one would ("Failure:" above).
  // A plan belongs to the optimizers it is handed to and affects no other.
  std::shared_ptr<FaultPlan> faults = nullptr;
  // Where the optimizer's progress lines go (tandem/logger.h): a construction that runs
  // past 3 s reports its progress. nullptr (the default): stderr (StderrLogger()).
  std::shared_ptr<Logger> info_log = nullptr;
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
  // Each group's hyper-parameters for this step, one entry per group (OptimizerConfig::
  // groups), as torch.optim and Megatron hand a group's values at every step; empty (the
  // default): the optimizer's current ones. Checked like the configured ones (ValidateHyper
  // Params; an SGD group cannot switch between keeping a momentum buffer and not: its state
  // layout is fixed), before anything changes. A Step that returns (applied or skipped)
  // keeps them in force (hyper_params, Snapshot); a Step that throws keeps the previous
  // ones. Each group's learning rate is not here: Step takes it (lr_scale is ignored by
  // the per-group form). Costs nothing when the values move: no device synchronisation.
  // The span must stay valid for the call.
  std::span<const HyperParams> group_hyper = {};
  // The gradient each tensor's update reads at this step, one entry per tensor; empty, or
  // a null entry: the pointer GradReady(i, grad) was given in this step, else
  // TensorSpec::grad. Each must hold numel elements of the tensor's grad_dtype in the
  // parameters' memory space (GPU mode: device memory, checked as at construction);
  // Error(kInvalidArgument) naming the tensor otherwise, and for an entry that differs
  // from the pointer GradReady was given in this step; nothing changes then. How long the
  // engine reads a gradient: Note [Gradient reads] in tandem/optimizer.h. The span must
  // stay valid for the call. BeginStep ignores it (GradReady hands pointers early).
  std::span<const void* const> grads = {};
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
    // The pipeline's gradient and parameter staging slots, the early-start gradient
    // buffer (host), the device slots streamed chunks go through (device).
    uint64_t staging = 0;
    uint64_t metadata = 0;    // kernel tables and reduction scratch
    // Speculative early start only (OptimizerConfig::speculative_early_start): the backup
    // of the offloaded state (to roll a speculative update back) and the buffer that
    // holds speculatively computed parameters until Step commits them.
    uint64_t speculation = 0;
    // Gradient release only (OptimizerConfig::release_grads): the engine's copies of the
    // gradients handed to GradReady: in `device` (host mode: `host`) the GPU-resident
    // part's, hot elements x grad bytes; in `host` the streamed chunks' pinned gradient
    // area, streamed elements x grad bytes. (The host-computed chunks' gradients land in
    // the early-start buffer, counted in `staging`.)
    uint64_t grads = 0;
    uint64_t total() const {
      return master + correction + momentum + variance + scales + staging + metadata +
             speculation + grads;
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
  // parameters copied into place, nothing streamed), and dropped (their spares).
  uint64_t speculated_stream_chunks = 0;
  uint64_t rolled_back_stream_chunks = 0;
  // Gradient release: bytes of released gradients uploaded again with streamed chunks,
  // during backward (speculated chunks) and at Step. A speculated chunk reads the
  // gradient of the tensor whose GradReady completed it in place, uploading only the
  // others' (Note [Gradient release] in tandem/optimizer.h).
  uint64_t released_grad_up_bytes = 0;
  // Host time spent inside GradReady and BeginStep for this step, on the calling thread:
  // under autograd's hooks, the thread that launches backward's kernels, so what the
  // hand-over took from backward's launches (queueing copies and kernels; never a wait
  // for the device).
  double handover_ms = 0;
  // The speculation stopped taking chunks during backward: the partials of the gradients
  // handed to GradReady so far already exceeded max_grad_norm (clipping will trigger) or
  // held a non-finite value (the step will be skipped).
  bool speculation_stopped = false;
};

}  // namespace tandem
