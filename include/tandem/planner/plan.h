// The plan: what the planner is given (PlanInputs), what it answers (PlanResult, a
// FractionPoint per offload fraction, the memory and the times), and the largest model
// that fits (tandem/planner.h; docs/planner.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/compute_split.h"
#include "tandem/placement.h"
#include "tandem/planner/model.h"
#include "tandem/planner/profile.h"
#include "tandem/types.h"

namespace tandem::planner {

// ---------------------------------------------------------------------------------------
// The plan

// Where the memory goes, in bytes, for one GPU or one rank's share of the host.
struct MemoryBreakdown {
  uint64_t weights = 0;     // model parameters: all of them, or rank 0's FSDP2 shards
  uint64_t master = 0;      // master copies that do not alias the weights
  uint64_t correction = 0;  // ecc8 / ecc16 arrays
  uint64_t moments = 0;     // first and second moments (codes or fp32)
  uint64_t scales = 0;      // q8 group scales
  // All gradients (rank 0's shards under FSDP2), or the largest layer's with gradient
  // release.
  uint64_t gradients = 0;
  // FSDP2 only: the all-gathered parameters and unsharded gradients of the units in
  // flight during forward and backward (Fsdp2UnshardedBytes; docs/planner.md "FSDP2").
  uint64_t unsharded = 0;
  // Host: pinned pipeline slots of the host-computed elements. GPU: the streaming slots
  // when any element is streamed (stream_slots x the largest chunk, at most
  // stream_chunk_bytes each).
  uint64_t staging = 0;
  uint64_t activations = 0;  // kept for backward
  uint64_t metadata = 0;     // kernel tables, reduction scratch
  uint64_t speculation = 0;  // backup of the offloaded state (speculative early start)
  // GPU: what the process holds beyond its tensors, as the driver counts it: the CUDA
  // context and the caching allocator's rounding and fragmentation (RuntimeBytes).
  uint64_t runtime = 0;
  uint64_t total() const;
};

// The GPU memory a training process holds beyond the tensors the plan counts
// (MemoryBreakdown::runtime), so that the plan's GPU figure is what the driver reports at
// the peak, measured on an H200 with torch 2.11 and transformers 5 (bench/fit_matrix.py:
// the driver's used memory less torch's reserved peak, and torch's reserved less its
// allocated peak; docs/planner.md "Runtime"):
// the CUDA context with cuBLAS's workspaces and the loaded kernels, per GPU (1.48 to
// 1.57 GiB measured);
inline constexpr uint64_t kCudaContextBytes = uint64_t{1600} << 20;  // 1.56 GiB
// each tensor the caching allocator hands out rounded up to its 512-byte blocks (the
// weights and gradients: their tensor count);
inline constexpr uint64_t kAllocatorRoundBytes = 512;
// and the blocks cached but not reusable at the peak: a share of the activations, whose
// sizes change through the iteration while the weights and optimizer state stay put
// (reserved less allocated at the peak: 0.90 GiB beside 3.5 GiB of activations at seq
// 2048, 1.62 beside 6.9 at 4096: Llama-3-8B shapes, fraction 1, gradient release).
inline constexpr double kAllocatorFragmentation = 0.25;

// The planner's choice between two settings: kOff, kOn, or kAuto (the plan picks, point by
// point, what fits and runs faster).
enum class Choice : uint8_t { kOff = 0, kOn = 1, kAuto = 2 };
const char* Name(Choice c) noexcept;        // "off", "on", "auto"
Choice ParseChoice(std::string_view s);     // throws Error(kInvalidArgument)

// A speculation budget the plan chooses (PlanInputs::speculative_host_bytes, ...).
inline constexpr uint64_t kAutoBytes = ~uint64_t{0};

enum class Stage : uint8_t { kGpu = 0, kD2H = 1, kHost = 2, kH2D = 3 };
const char* Name(Stage s) noexcept;  // "gpu", "d2h", "host", "h2d"

// Predicted optimizer step of one rank (docs/planner.md "Step time").
struct StepTime {
  // gpu: the fused kernel over the GPU-resident and streamed elements; d2h, h2d: PCIe
  // (gradients down and parameters up of the host-computed elements, state both ways of
  // the streamed ones); host: the host kernels with their per-chunk overhead.
  double prepass_ms = 0, gpu_ms = 0, d2h_ms = 0, host_ms = 0, h2d_ms = 0, fill_ms = 0;
  // The fixed per-step cost of the profile (Note [Fixed step cost]) at this rank's tensor
  // count: the engine's and the binding's parts (0 where the profile lacks one).
  double engine_overhead_ms = 0, binding_overhead_ms = 0;
  // The host-resident classes: the streamed chunks' chain (state up, kernel, state down)
  // and then the host pipeline's (gradient down, host kernel, parameter up), each its
  // slowest stage plus one chunk of the others (its fill).
  double pipeline_ms = 0;
  // prepass + max(gpu, pipeline) + engine_overhead + binding_overhead
  double step_ms = 0;
  Stage bottleneck = Stage::kGpu;
  // The compute split (Note [Three placement classes] in tandem/compute_split.h): of the
  // host-resident elements, `streamed` are computed on the GPU; split.share is their
  // share and split's terms are tandem::PredictSplit's at it (no prepass, fill or chunk
  // overhead). All zero without host-resident elements.
  uint64_t streamed = 0;
  ComputeSplit split;
};

// One training iteration of one rank (docs/planner.md "Iteration"): forward and backward
// from the profile's training throughput, then what of the optimizer step is exposed
// after backward (Note [What backward hides] in planner/overlap.cc).
struct IterationTime {
  bool modelled = false;  // the model has a transformer shape and --seq was given
  double forward_ms = 0, backward_ms = 0;
  // Offload work handed to the engine during backward (speculated chunks, gradient
  // downloads), the part of it still running when backward ends, and the work Step does.
  double during_backward_ms = 0, backlog_ms = 0, at_step_ms = 0;
  // After backward until the parameters are final: when speculation commits (or none is
  // planned), and when it is rolled back (clipping triggers, a non-finite gradient):
  // everything at Step, plus restoring the backups.
  double exposed_ms = 0, exposed_abort_ms = 0;
  double iteration_ms = 0, iteration_abort_ms = 0;  // forward + backward + exposed
  double tokens_per_s = 0;  // per GPU, when speculation commits
  double mfu = 0;           // model FLOPs / (iteration x peak), when speculation commits
};

struct PlanInputs {
  ModelDescription model;
  uint64_t gpu_budget = 0;   // bytes per GPU, > 0
  uint64_t host_budget = 0;  // bytes of host memory per node, > 0
  // GPU memory kept free for what the plan does not count (NCCL's buffers, other
  // processes, the estimates' error; the CUDA context and the caching allocator are
  // MemoryBreakdown::runtime): the plan fits into
  // gpu_budget * (1 - gpu_headroom_fraction) - gpu_headroom_bytes (UsableGpuBytes).
  // Default 5% (the runtime is counted apart, as measured); fraction in [0, 1).
  double gpu_headroom_fraction = 0.05;
  uint64_t gpu_headroom_bytes = 0;
  // Activations per GPU: given in bytes when activation_bytes_given, else estimated from
  // `activation_shape` (its hidden/layers/heads/vocab default to the model's when 0) if
  // activation_shape.seq_len > 0, else 0, with `activation_model` (kAuto: transformers'
  // for a model read from a transformers config, Megatron's otherwise).
  bool activation_bytes_given = false;
  uint64_t activation_bytes = 0;
  ActivationShape activation_shape;
  Recompute recompute = Recompute::kNone;
  ActivationModel activation_model = ActivationModel::kAuto;
  // The GPU's runtime bytes (MemoryBreakdown::runtime): the CUDA context's, the
  // allocator's rounding of each tensor and its share of the activations. Defaults: the
  // estimates above; all 0 leaves the runtime out.
  uint64_t cuda_context_bytes = kCudaContextBytes;
  uint64_t allocator_round_bytes = kAllocatorRoundBytes;
  double allocator_fragmentation = kAllocatorFragmentation;
  // With gradient release: the most bytes of handed-over gradients the GPU keeps while
  // the link takes them down (tandem.torch's grads_in_flight_bytes, Note [Gradients in
  // flight] in python/tandem/_core/grads.py): bounds the gradients waiting behind the link.
  uint64_t grads_in_flight_bytes = uint64_t{1} << 30;

  Algorithm algorithm = Algorithm::kAdamW;
  HyperParams hyper;  // only momentum matters (SGD keeps a buffer iff momentum > 0)
  StateFormats formats{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  DType param_dtype = DType::kBF16;
  DType grad_dtype = DType::kBF16;
  // Gradient release (OptimizerConfig::release_grads; tandem.torch release_grads=True;
  // docs/planner.md "Gradient release"): each gradient is handed to the engine as it is
  // final in backward and its GPU memory given back once the engine has taken it: the
  // GPU-resident part copied into an engine buffer, the offloaded part downloaded into a
  // pinned host gradient area; streamed chunks take their gradient up again at Step.
  // kOff keeps every gradient on the GPU until Step(); kAuto picks per point.
  Choice grad_release = Choice::kOff;
  // A what-if the engine cannot run in this version (the plan says "not available in this
  // version" wherever it mentions it; tandem-plan refuses it): optimizer state divided
  // among the ranks, weights and gradients whole (ShardSpecs). Superseded by fsdp2, which
  // the engine runs; not with fsdp2.
  bool zero1_sharding = false;
  // FSDP2 (`fully_shard` on each transformer block, then on the root; tandem.torch over
  // the DTensor parameters; docs/distributed.md). Every tensor is sharded along
  // dimension 0 over `shard_size` ranks: rank 0 holds ceil(rows / shard_size) rows, the
  // largest shard, and its optimizer holds state for those rows only. Weights and
  // gradients are rank 0's shards, plus the unsharded working set of
  // `fsdp2_blocks_in_flight` blocks and the root unit (MemoryBreakdown::unsharded). q8
  // moments of tensors whose shape is 1-D or whose last dimension is not a multiple of
  // 32 are f32 (the shard-safe group rule). Default false: every rank holds the whole
  // model and the whole optimizer state (plain data parallelism).
  bool fsdp2 = false;
  // Ranks each tensor is sharded over: 0 (default) = all ranks (FSDP); a divisor of the
  // rank count for HSDP (ranks / shard_size replicas). Only with fsdp2.
  uint32_t shard_size = 0;
  // Blocks whose parameters are all-gathered (and, in backward, whose gradients are
  // unsharded) at the same time: the one computing and the one prefetched or being
  // reduce-scattered. Default 2; >= 1. Only with fsdp2.
  uint32_t fsdp2_blocks_in_flight = 2;
  PlacementPolicy placement = PlacementPolicy::kBackwardOrder;
  uint64_t chunk_elements = 1 << 21;  // as OptimizerConfig
  int pipeline_slots = 4;             // as OptimizerConfig
  // Where the host-resident elements are computed, as OptimizerConfig::offload_compute:
  // kOffloadComputeAuto (default: the share tandem::ResolvePlacement picks for the
  // profile's rates, MachineRatesFor, at each fraction), 0 (host: the plan of versions before the
  // three classes, figure for figure), 1 (gpu) or a share in between; text forms through
  // tandem::ParseOffloadCompute. Streamed elements keep their state in host memory less
  // the master's part that aliases the parameter; the GPU then holds stream_slots slots
  // of up to stream_chunk_bytes (MemoryBreakdown::staging on the GPU side). Memory comes
  // from tandem::ResolvePlacement with offload_compute set to the resolved share.
  double offload_compute = kOffloadComputeAuto;
  uint64_t stream_chunk_bytes = uint64_t{32} << 20;  // as OptimizerConfig; >= 4096
  int stream_slots = 3;                              // as OptimizerConfig; >= 2
  // Speculative early start (OptimizerConfig::speculative_early_start, BeginStep before
  // backward): offloaded state is updated during backward as its gradients arrive and
  // kept when the step commits. What a rollback restores is backed up in pinned memory,
  // and a streamed chunk's new parameters wait on the GPU, within two budgets per rank:
  // bytes of host-computed state (speculative_host_bytes) and of streamed state
  // (speculative_stream_bytes, OptimizerConfig's). kAutoBytes: with an iteration model
  // (--seq), the most that fit the memory left and that backward can cover; without one,
  // the engine's defaults (all host-computed state; 1 GiB streamed).
  bool speculative_early_start = false;
  uint64_t speculative_host_bytes = kAutoBytes;
  uint64_t speculative_stream_bytes = kAutoBytes;
  // With release and speculation: OptimizerConfig::in_place_grad_bytes (the handed-over
  // gradients kept on the GPU for speculative kernels to read in place): that many bytes'
  // elements of the speculated ones skip the gradient's upload (Note [What backward
  // hides], planner/overlap.cc). 0: none.
  uint64_t in_place_grad_bytes = 0;
  // The offload fraction to plan at, in [0, 1] (a run's own, to predict it); negative
  // (default): the plan chooses the fastest that fits.
  double fraction = -1;
  uint32_t gpus_per_node = 1;                        // >= 1
  uint32_t nodes = 1;                                // >= 1
  Profile profile = DefaultProfile();
};

// The plan at one offload fraction.
struct FractionPoint {
  double fraction = 0;
  uint64_t hot_elements = 0, cold_elements = 0;  // of rank 0's tensors (ShardSpecs)
  MemoryBreakdown gpu;                           // one GPU
  MemoryBreakdown host;                          // one rank's host memory
  uint64_t host_node_bytes = 0;                  // host.total() * gpus_per_node
  bool fits_gpu = false, fits_host = false;
  StepTime time;
  // offload_compute auto only: its share would stream, but the GPU budget cannot hold the
  // stream slots too while computing on the host fits, so this point computes every
  // offloaded element on the host (time.split.share 0). The engine's auto looks at time
  // alone: such a plan runs with offload_compute 0 ("host").
  bool split_fallback = false;
  // The share is the one offload_compute resolves to (auto: what the engine's auto picks);
  // false when the plan chose another share for a faster iteration.
  bool share_as_asked = true;
  // Gradient release at this point (PlanInputs::grad_release, resolved).
  bool grad_release = false;
  // Elements of rank 0 whose update speculation runs during backward, by class.
  uint64_t speculated_host = 0, speculated_streamed = 0;
  // With speculation, its budgets as the engine takes them (OptimizerConfig): the
  // host-computed state's backups (every host-computed chunk when
  // speculated_host == the point's host-computed elements) and the streamed chunks'
  // spares, in bytes per rank.
  uint64_t speculative_host_bytes = 0, speculative_stream_bytes = 0;
  IterationTime iteration;
};

// One keyword argument of tandem.torch's optimizer, typed as Python and JSON take it.
struct OptimizerKwarg {
  enum class Kind { kBool, kInteger, kNumber, kString };
  std::string name;
  Kind kind = Kind::kInteger;
  bool boolean = false;
  uint64_t integer = 0;
  double number = 0;
  std::string text;
  std::string Python() const;  // True, 14403780608, 0.2698, "gpu"
};
// The keyword arguments of tandem.torch's optimizer (class OptimizerClassName) that run
// `point` of a plan made from `in`: offload_fraction, offload_compute (the point's share,
// named "gpu" or "host" at 1 or 0), the state formats, release_grads and, with
// speculation, speculative_early_start, its two budgets and in_place_grad_bytes
// (docs/planner.md "Running the plan").
std::vector<OptimizerKwarg> OptimizerKwargs(const PlanInputs& in, const FractionPoint& point);
const char* OptimizerClassName(Algorithm algorithm) noexcept;  // "AdamW", "Adam", "Lion", "SGD"

// Element rates used by the step-time model, with where each came from.
struct Rates {
  double gpu_gparams_per_s = 0, host_gparams_per_s = 0;  // host: this rank's share
  std::string gpu_source, host_source;  // "measured <key>" or "roofline ... at NN% ..."
  double gpu_bytes_per_element = 0, host_bytes_per_element = 0;
  // The compute-split model's rates for this rank (MachineRatesFor, the host's share
  // divided among the node's ranks) and where the PCIe and host figures came from.
  MachineRates machine;
  std::string pcie_source, host_dma_source;
  // Host DRAM under every rank's DMA (Profile::Host::dram_gbps, else the triad), GB/s,
  // and where it came from.
  double dram_gbps = 0;
  std::string dram_source;
  // The gradient pre-pass (1e9 elements per second) and where it came from.
  double prepass_gparams_per_s = 0;
  std::string prepass_source;
  // Where the fixed per-step cost came from (Note [Fixed step cost]), one text per part:
  // "measured: 1.20 ms + 4.0 us x tensors" or "not in the profile: counted as 0".
  std::string engine_overhead_source, binding_overhead_source;
  // Host-resident state bytes of one streamed element, each way (its master less the part
  // that aliases the parameter, plus the moments and scales): 3.125 for AdamW
  // bf16+ecc8/q8/q8 with bf16 parameters.
  double stream_bytes_per_element = 0;
};

struct PlanResult {
  bool feasible = false;
  // Smallest fraction (multiple of 1e-4) at which the GPU budget holds; -1 if none.
  double min_fraction = -1;
  // Largest fraction (multiple of 1e-4) at which the host budget holds; -1 if none.
  double max_host_fraction = -1;
  FractionPoint recommended;         // the fastest point that fits both (valid if feasible)
  std::vector<FractionPoint> sweep;  // fractions 0, 1/16, ..., 1
  // GPU bytes (less the streaming slots) non-increasing and host bytes non-decreasing on
  // the sweep.
  bool monotone = true;
  uint64_t gpu_short_bytes = 0;       // > 0: GPU budget short by this much even at fraction 1
  uint64_t host_short_bytes = 0;      // > 0: host budget short by this much at min_fraction
  std::vector<std::string> messages;  // the verdict, then warnings
  Rates rates;
  uint64_t ranks = 1;
  uint64_t shard_elements = 0;  // rank 0's optimizer state elements (all without sharding)
  uint64_t shard_size = 1;      // ranks a tensor is sharded over (FSDP2, ZeRO-1), else 1
  // Whether the engine of this version runs this plan: false with the ZeRO-1 what-if
  // (zero1_sharding). Gradient release and early start, FSDP2's too, run through the C++
  // API and tandem._C; tandem.torch does not hand FSDP2 gradients over during backward
  // yet (the verdict message says so).
  bool runnable = true;
  // FSDP2: tensors whose q8 moments the shard-safe group rule keeps in f32, and their
  // rank-0 elements.
  uint64_t f32_moment_tensors = 0, f32_moment_elements = 0;
  uint64_t usable_gpu_bytes = 0;  // UsableGpuBytes(inputs)
  uint64_t activation_bytes = 0;
  // The activation model the estimate used (inputs.activation_model resolved; kMegatron
  // also when the bytes were given or not estimated) and, for kTransformers, its phases.
  ActivationModel activation_model = ActivationModel::kMegatron;
  TransformersActivations transformers_activations;
  // When the plan does not fit: what would, each computed by the planner (gradient
  // release, activation checkpointing, a shorter sequence, a smaller micro-batch, more
  // host memory), one sentence each; also in `messages`.
  std::vector<std::string> would_fit;
  // The iteration model's inputs: the FLOPs of one GPU's micro-batch, the training
  // throughput and the peak (profile or built-in), with where they came from.
  bool iteration_modelled = false;
  std::string iteration_note;  // why not, when not
  TrainingFlops flops;
  double train_tflops = 0, peak_tflops = 0;
  std::string train_source, peak_source;
  // The recommended point's GPU bytes with and without gradient release (same fraction
  // and share): what release saves.
  uint64_t gpu_bytes_with_release = 0, gpu_bytes_without_release = 0;
  PlanInputs inputs;
};

// The GPU bytes a plan may use: the budget less the headroom (0 if the headroom exceeds
// it). Throws Error(kInvalidArgument) if gpu_headroom_fraction is not in [0, 1).
uint64_t UsableGpuBytes(const PlanInputs& inputs);

// The runtime bytes of one GPU (MemoryBreakdown::runtime): inputs.cuda_context_bytes + 2 x
// the model's tensors x inputs.allocator_round_bytes (weights and gradients) +
// inputs.allocator_fragmentation x `activation_bytes`.
uint64_t RuntimeBytes(const PlanInputs& inputs, uint64_t activation_bytes);

// Builds the plan. Optimizer-state and staging bytes come from tandem::PredictMemory on
// rank 0's tensors (the whole model; its FSDP2 shards with fsdp2, with the group rule's
// f32 moments; its ZeRO-1 shard with the zero1_sharding what-if), so they equal what
// HybridOptimizer::memory() would report there. messages: the
// verdict, then notes (headroom, what-ifs, FSDP2, the model's notes, the profile).
// Throws Error(kInvalidArgument) for bad inputs (empty model, zero budgets, bad shapes;
// fsdp2 with zero1_sharding; a shard_size without fsdp2 or
// that does not divide the ranks; a tensor shape whose product is not its numel).
PlanResult MakePlan(const PlanInputs& inputs);

// The same plan evaluated at one fraction in [0, 1].
FractionPoint EvaluateFraction(const PlanInputs& inputs, double fraction);

// Predicted step time of one rank with `hot` elements on the GPU and `cold` on the host,
// `streamed` (<= cold) of which the GPU computes (docs/planner.md "Step time"); with
// `release` (gradient release) the streamed chunks take their gradients up again.
StepTime PredictStepTime(const PlanInputs& inputs, const Rates& rates, uint64_t hot, uint64_t cold,
                         uint64_t shard_elements, uint64_t streamed = 0, bool release = false);
// Kernel rates for `inputs` from its profile: measured keys, else rooflines.
Rates ResolveRates(const PlanInputs& inputs);


// Whether any offload fraction fits both budgets (MakePlan(inputs).feasible, without the
// step and iteration search). Throws as MakePlan.
bool PlanFits(const PlanInputs& inputs);


// ---------------------------------------------------------------------------------------
// The largest model that fits (docs/planner.md "The largest model")

// For one width of the Llama-3 family: the most layers that fit and its plan.
struct LargestRow {
  std::string shape;              // the preset whose width it is ("llama3-70b")
  uint64_t published_layers = 0;  // the preset's own depth
  uint64_t layers = 0;            // the most that fit, up to twice published_layers; 0: none
  uint64_t params = 0;            // of the model with `layers` layers
  bool published_fits = false;    // the preset itself fits
  PlanResult plan;                // with `layers` layers (feasible), or one (not)
};
struct LargestResult {
  std::vector<LargestRow> rows;  // narrowest first
  int best = -1;                 // the row with the most parameters that fit; -1: none fits
  PlanInputs inputs;
};
// For each preset width (hidden size, heads, FFN and vocabulary of Llama-3 1B, 3B, 8B,
// 70B and 405B), the most decoder layers with which `inputs` (its model ignored) fits
// its budgets: found by bisection on PlanFits, each plan then made in full. Throws as
// MakePlan.
LargestResult FindLargest(const PlanInputs& inputs);

}  // namespace tandem::planner
