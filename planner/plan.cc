// The plan: memory per category at any fraction (optimizer state from PredictMemory),
// the fraction searches, the step-time sweep and the verdict.
#include "planner/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/layout/memory_plan.h"
#include "engine/layout/tensor_rules.h"
#include "engine/resolve_sizes.h"

#include "tandem/error.h"

namespace tandem::planner {
namespace {

void Validate(const PlanInputs& in) {
  auto bad = [](const std::string& m) { throw Error(ErrorKind::kInvalidArgument, m); };
  if (in.model.tensors.empty() || in.model.total_params() == 0)
    bad("plan: the model has no parameters");
  if (in.gpu_budget == 0) bad("plan: the GPU memory budget must be > 0");
  if (in.host_budget == 0) bad("plan: the host memory budget must be > 0");
  if (in.gpus_per_node == 0 || in.nodes == 0) bad("plan: gpus per node and nodes must be >= 1");
  if (!(in.gpu_headroom_fraction >= 0 && in.gpu_headroom_fraction < 1))
    bad("plan: the GPU headroom must be in [0%, 100%), got " +
        std::to_string(in.gpu_headroom_fraction * 100) + "%");
  if (in.profile.gpu.hbm_copy_gbps <= 0 || in.profile.host.triad_gbps <= 0 ||
      in.profile.pcie.h2d_gbps <= 0 || in.profile.pcie.d2h_gbps <= 0 ||
      in.profile.pcie.bidir_gbps <= 0)
    bad("plan: the profile's bandwidths must all be > 0");
  if (in.offload_compute != kOffloadComputeAuto &&
      !(in.offload_compute >= 0.0 && in.offload_compute <= 1.0))
    bad("plan: offload_compute must be auto, host (0), gpu (1) or a share in [0, 1], got " +
        std::to_string(in.offload_compute));
  if (in.stream_slots < 2)
    bad("plan: stream slots must be >= 2, got " + std::to_string(in.stream_slots));
  if (in.stream_chunk_bytes < 4096)
    bad("plan: the stream chunk must be >= 4096 bytes, got " +
        std::to_string(in.stream_chunk_bytes));
  if (in.fraction > 1 || (in.fraction < 0 && in.fraction != -1))
    bad("plan: the offload fraction must be in [0, 1], got " + std::to_string(in.fraction));
  if (!in.speculative_early_start &&
      (in.speculative_host_bytes != kAutoBytes || in.speculative_stream_bytes != kAutoBytes))
    bad("plan: speculation budgets need speculative early start (--speculative-early-start)");
  const uint64_t ranks = static_cast<uint64_t>(in.gpus_per_node) * in.nodes;
  if (in.shard_size != 0 && !in.fsdp2)
    bad("plan: a shard size (--shard-size) needs FSDP2 (--fsdp2)");
  if (in.fsdp2) {
    if (in.zero1_sharding)
      bad("plan: FSDP2 and the ZeRO-1 what-if exclude each other (FSDP2 shards the "
          "optimizer state already)");
    if (in.shard_size != 0 && ranks % in.shard_size != 0)
      bad("plan: the shard size " + std::to_string(in.shard_size) + " does not divide the " +
          std::to_string(ranks) + " ranks (" + std::to_string(in.gpus_per_node) +
          " GPU(s)/node x " + std::to_string(in.nodes) + " node(s))");
    if (in.fsdp2_blocks_in_flight == 0) bad("plan: FSDP2 blocks in flight must be >= 1");
    for (const ModelTensor& t : in.model.tensors) {
      uint64_t product = 1;
      for (uint64_t d : t.shape) product *= d;
      if (!t.shape.empty() && product != t.numel)
        bad("plan: tensor '" + t.name + "': its shape has " + std::to_string(product) +
            " elements, its numel is " + std::to_string(t.numel));
    }
  }
}

std::string GiB(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", ToGiB(bytes));
  return b;
}

// Smallest k in [lo, hi] with ok(k), given !ok(lo) and ok(hi) (monotone predicate).
template <typename F>
int Bisect(int lo, int hi, F ok) {
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (ok(mid) ? hi : lo) = mid;
  }
  return hi;
}

double Frac(int k) { return static_cast<double>(k) / kFractionSteps; }

uint64_t StreamSlotBytes(const PlanInputs& in) {
  return static_cast<uint64_t>(in.stream_slots) * in.stream_chunk_bytes;
}

}  // namespace

const char* Name(Choice c) noexcept {
  switch (c) {
    case Choice::kOff:
      return "off";
    case Choice::kOn:
      return "on";
    case Choice::kAuto:
      return "auto";
  }
  return "?";
}

Choice ParseChoice(std::string_view s) {
  if (s == "off") return Choice::kOff;
  if (s == "on") return Choice::kOn;
  if (s == "auto") return Choice::kAuto;
  throw Error(ErrorKind::kInvalidArgument, "'" + std::string(s) + "' is not on, off or auto");
}

uint64_t MemoryBreakdown::total() const {
  return weights + master + correction + moments + scales + gradients + unsharded + staging +
         activations + metadata + speculation + runtime;
}

uint64_t RuntimeBytes(const PlanInputs& in, uint64_t activation_bytes) {
  return in.cuda_context_bytes + 2 * in.model.tensors.size() * in.allocator_round_bytes +
         static_cast<uint64_t>(std::ceil(in.allocator_fragmentation *
                                         static_cast<double>(activation_bytes)));
}

uint64_t RankCount(const PlanInputs& in) {
  return static_cast<uint64_t>(in.gpus_per_node) * in.nodes;
}

uint64_t UsableGpuBytes(const PlanInputs& in) {
  if (!(in.gpu_headroom_fraction >= 0 && in.gpu_headroom_fraction < 1))
    throw Error(ErrorKind::kInvalidArgument, "plan: the GPU headroom must be in [0%, 100%)");
  const uint64_t kept = static_cast<uint64_t>(std::ceil(static_cast<double>(in.gpu_budget) *
                                                        in.gpu_headroom_fraction)) +
                        in.gpu_headroom_bytes;
  return kept >= in.gpu_budget ? 0 : in.gpu_budget - kept;
}

uint64_t ShardRanks(const PlanInputs& in) {
  if (in.fsdp2) return in.shard_size != 0 ? in.shard_size : RankCount(in);
  return in.zero1_sharding ? RankCount(in) : 1;
}

std::vector<TensorSpec> ShardSpecs(const PlanInputs& in) {
  const uint64_t ranks = ShardRanks(in);
  std::vector<TensorSpec> specs;
  specs.reserve(in.model.tensors.size());
  for (const ModelTensor& t : in.model.tensors) {
    TensorSpec s;
    s.name = t.name;
    if (in.fsdp2) {
      s.numel = Fsdp2ShardNumel(t, ranks);
    } else {
      const uint64_t per_rank = (t.numel + ranks - 1) / ranks;
      const uint64_t grouped = (per_rank + kQuantGroup - 1) / kQuantGroup * kQuantGroup;
      s.numel = std::min(t.numel, grouped);
    }
    s.param_dtype = in.param_dtype;
    s.grad_dtype = in.grad_dtype;
    specs.push_back(std::move(s));
  }
  return specs;
}

OptimizerConfig ShardConfig(const PlanInputs& in, double fraction, double share) {
  OptimizerConfig c;
  c.algorithm = in.algorithm;
  c.groups = {in.hyper};
  c.formats = in.formats;
  c.offload_fraction = fraction;
  c.placement = in.placement;
  c.mode = ExecutionMode::kGpu;
  c.chunk_elements = in.chunk_elements;
  c.pipeline_slots = in.pipeline_slots;
  c.speculative_early_start = in.speculative_early_start;
  c.offload_compute = share;
  c.stream_chunk_bytes = in.stream_chunk_bytes;
  c.stream_slots = in.stream_slots;
  return c;
}

ActivationModel ResolvedActivationModel(const PlanInputs& in) {
  if (in.activation_bytes_given || in.activation_shape.seq_len == 0)
    return ActivationModel::kMegatron;  // nothing estimated
  if (in.activation_model != ActivationModel::kAuto) return in.activation_model;
  return in.model.transformers_config ? ActivationModel::kTransformers : ActivationModel::kMegatron;
}

TransformersActivations TransformersActivationsOf(const PlanInputs& in) {
  if (ResolvedActivationModel(in) != ActivationModel::kTransformers) return {};
  if (in.model.transformer.intermediate == 0 && in.model.transformer.moe_layers == 0)
    throw Error(ErrorKind::kInvalidArgument,
                "the transformers activation estimate needs the model's config (its MLP width "
                "and heads): describe the model with a config, or --activation-model megatron");
  return EstimateTransformersActivations(in.model, in.activation_shape, in.recompute,
                                         in.param_dtype);
}

uint64_t ActivationBytes(const PlanInputs& in) {
  if (in.activation_bytes_given) return in.activation_bytes;
  if (in.activation_shape.seq_len == 0) return 0;
  ActivationShape s = in.activation_shape;
  if (s.hidden == 0) s.hidden = in.model.hidden_size;
  if (s.layers == 0) s.layers = in.model.num_layers;
  if (s.heads == 0) s.heads = in.model.num_heads;
  if (s.vocab == 0) s.vocab = in.model.vocab_size;
  if (s.hidden == 0 || s.layers == 0)
    throw Error(ErrorKind::kInvalidArgument,
                "activation estimate needs the model's shape (hidden size, layers, heads): "
                "describe the model with a config or preset, or give the activation bytes");
  if (ResolvedActivationModel(in) == ActivationModel::kTransformers)
    return TransformersActivationsOf(in).peak();
  return EstimateActivationBytes(s, in.recompute);
}

namespace {

// What one plan evaluates its points with: rank 0's tensors, the group rule's tensors,
// the rates and the iteration model.
struct Context {
  std::vector<TensorSpec> specs;
  std::vector<bool> f32_moments;
  // RankSpecs(specs, f32_moments, ...): the tensors the engine places, and their formats.
  std::vector<TensorSpec> rank_specs;
  std::vector<StateFormats> rank_formats;
  uint64_t shard = 0;
  uint64_t activations = 0;  // ActivationBytes(in)
  TransformersActivations transformers;  // its phases (zeros unless that model)
  Rates rates;
  TrainingModel training;
  // Whether points need only fit (PlanFits): the compute share auto resolves to, not the
  // other shares an iteration model would try.
  bool fit_only = false;
};

Context MakeContext(const PlanInputs& in) {
  Context x;
  x.specs = ShardSpecs(in);
  x.f32_moments = F32MomentTensors(in);
  const OptimizerConfig cfg = ShardConfig(in, 0.0);
  x.rank_specs = RankSpecs(x.specs, x.f32_moments, cfg);
  x.rank_formats = layout::TensorFormats(x.rank_specs, cfg);
  for (const TensorSpec& t : x.specs) x.shard += t.numel;
  x.activations = ActivationBytes(in);
  if (!in.activation_bytes_given && in.activation_shape.seq_len > 0)
    x.transformers = TransformersActivationsOf(in);
  x.rates = ResolveRates(in);
  x.training = ResolveTraining(in);
  return x;
}

// The engine's decision for rank 0 (DecidePlacement, GPU mode) at `fraction` with
// offload_compute `share` (kOffloadComputeAuto: the share the profile's rates choose) and
// gradient release `release`.
PlacementDecision Decide(const PlanInputs& in, const Context& x, double fraction, double share,
                         bool release) {
  OptimizerConfig cfg = ShardConfig(in, fraction, share);
  cfg.speculative_early_start = false;
  cfg.release_grads = release;
  return DecidePlacement(x.rank_specs, cfg, ExecutionMode::kGpu, &x.rates.machine);
}

// The compute share offload_compute resolves to at `fraction` with `release`: the
// engine's for the profile's rates (Note [The compute share's input] in
// engine/layout/stream_layout.h).
double PlannedShare(const PlanInputs& in, const Context& x, double fraction, bool release) {
  return Decide(in, x, fraction, in.offload_compute, release).split.share;
}

// The engine's placement and memory for rank 0 (ResolvePlacement, GPU mode, the profile's
// rates, its plan sized without parts: ResolvePlacementSizes) at `fraction` and compute
// share `share`, without release and speculation: the plan counts what they add itself.
ResolvedPlacement Resolve(const PlanInputs& in, const Context& x, double fraction,
                          double share) {
  OptimizerConfig cfg = ShardConfig(in, fraction, share);
  cfg.speculative_early_start = false;
  return ResolvePlacementSizes(x.rank_specs, cfg, ExecutionMode::kGpu, &x.rates.machine);
}

// Note [Gradients beside the loss]: with gradient release the gradients in flight exist
// in backward's layer phases only: the loss's backward, where transformers' fp32 loss
// buffers make the peak, comes before any parameter's gradient (the output layer's is
// computed from the loss's gradient once those buffers are freed). So the GPU holds
// max(loss, final norm, layer backward + gradients in flight), not their sum; the
// breakdown keeps the gradients apart and counts under activations what the peak adds to
// them. Without the transformers model's phases (Korthikanti's, a given figure) the sum
// stays.
uint64_t ActivationsBesideGradients(const TransformersActivations& t, uint64_t activations,
                                    uint64_t in_flight) {
  if (t.peak() == 0) return activations;
  const uint64_t before = std::max(t.loss, t.final_norm);  // no gradient yet
  const uint64_t layers = std::max(t.mlp, t.attention);
  return std::max(layers, before > in_flight ? before - in_flight : 0);
}

void SetState(const MemoryReport::Bytes& b, MemoryBreakdown* m) {
  m->master = b.master;
  m->correction = b.correction;
  m->moments = b.momentum + b.variance;
  m->scales = b.scales;
  m->staging = b.staging;
  m->metadata = b.metadata;
  m->speculation = b.speculation;
}

// Per rank: the host budget of the node shared by its ranks.
uint64_t HostBudgetPerRank(const PlanInputs& in) {
  return in.host_budget / std::max<uint32_t>(in.gpus_per_node, 1);
}

void SetFits(const PlanInputs& in, FractionPoint* p) {
  p->host_node_bytes = p->host.total() * in.gpus_per_node;
  p->fits_gpu = p->gpu.total() <= UsableGpuBytes(in);
  p->fits_host = p->host_node_bytes <= in.host_budget;
}

// Speculative early start at the point `p` (placement `pl`, base memory without it):
// chooses or takes the budgets, adds the backups and spares (host) and the held parameters
// of streamed chunks (GPU) to `p`, and returns the speculated elements and the bytes a
// rollback restores. The streamed chunks' spares are the engine's own layout
// (layout::PlanMemory: whole chunks from the last, within the budget); of the
// host-computed state, the budget's share of the engine's backup and held parameters.
SpeculationElements AddSpeculation(const PlanInputs& in, const Context& x, const Placement& pl,
                                   const OptimizerConfig& cfg, const PointClasses& c, bool release,
                                   FractionPoint* p, uint64_t* backup_bytes) {
  layout::LayoutParams all = layout::LayoutParamsOf(cfg);
  all.speculative_early_start = true;
  all.speculative_stream_bytes = ~uint64_t{0};
  const layout::MemoryPlan full =
      layout::PlanMemory(x.rank_specs, x.rank_formats, all, pl, true, /*sizes_only=*/true);
  const double host_state = static_cast<double>(full.cold.bytes() + full.hold_bytes);
  SpeculationRoom room;
  if (c.host > 0) room.host_per_element = host_state / static_cast<double>(c.host);
  if (c.streamed > 0) {
    room.stream_spare_per_element =
        static_cast<double>(full.spec_spare_bytes) / static_cast<double>(c.streamed);
    room.stream_hold_per_element =
        static_cast<double>(full.spec_hold_bytes) / static_cast<double>(c.streamed);
  }
  const uint64_t usable = UsableGpuBytes(in), host_rank = HostBudgetPerRank(in);
  room.gpu_bytes = usable > p->gpu.total() ? usable - p->gpu.total() : 0;
  room.host_bytes = host_rank > p->host.total() ? host_rank - p->host.total() : 0;
  // A host budget of 0 is the engine's "every host-computed chunk" (OptimizerConfig): any
  // budget above the state's bytes (kAutoBytes itself asks for the plan's choice).
  uint64_t host_budget = in.speculative_host_bytes == 0 ? kAutoBytes - 1 : in.speculative_host_bytes;
  uint64_t stream_budget = in.speculative_stream_bytes;
  if (host_budget == kAutoBytes || stream_budget == kAutoBytes) {
    // With an iteration model: what fits and what backward covers; without one: the
    // engine's defaults (every host-computed element; OptimizerConfig's streamed bytes).
    SpeculationElements chosen{c.host, c.streamed};
    if (x.training.modelled)
      chosen = ChooseSpeculation(in, x.rates, x.training, c, release, room);
    if (host_budget == kAutoBytes)
      host_budget = x.training.modelled ? static_cast<uint64_t>(static_cast<double>(chosen.host) *
                                                                room.host_per_element)
                                        : ~uint64_t{0};
    if (stream_budget == kAutoBytes)
      stream_budget = x.training.modelled
                          ? static_cast<uint64_t>(static_cast<double>(chosen.streamed) *
                                                  room.stream_spare_per_element)
                          : OptimizerConfig{}.speculative_stream_bytes;
  }
  layout::LayoutParams spec = layout::LayoutParamsOf(cfg);
  spec.speculative_early_start = true;
  spec.speculative_stream_bytes = stream_budget;
  const layout::MemoryPlan lp =
      layout::PlanMemory(x.rank_specs, x.rank_formats, spec, pl, true, /*sizes_only=*/true);
  const double host_share =
      host_state > 0 ? std::min(1.0, static_cast<double>(host_budget) / host_state) : 0.0;
  const uint64_t host_backup = static_cast<uint64_t>(host_share * host_state);
  p->host.speculation += host_backup + lp.spec_spare_bytes;
  p->speculative_host_bytes = host_backup;
  p->speculative_stream_bytes = lp.spec_spare_bytes;
  p->gpu.speculation += lp.spec_hold_bytes;
  if (!release) p->host.staging += lp.early_bytes;  // with release: the gradient area
  *backup_bytes = host_backup;  // a streamed chunk's rollback copies nothing (its spare)
  SpeculationElements s;
  s.host_backup_per_element = room.host_per_element;
  s.host = static_cast<uint64_t>(host_share * static_cast<double>(c.host));
  s.streamed = room.stream_spare_per_element > 0
                   ? std::min<uint64_t>(c.streamed,
                                        static_cast<uint64_t>(
                                            static_cast<double>(lp.spec_spare_bytes) /
                                            room.stream_spare_per_element))
                   : 0;
  return s;
}

// The plan at `fraction` with compute share `share` and gradient release `release`: rank
// 0's placement and optimizer memory from one ResolvePlacement over ShardSpecs(in), the
// figures the engine would build, plus what release and speculation add (Note [What
// backward hides] in overlap.cc), the step and the iteration.
// `resolved`: the engine's placement at (fraction, share) when the caller has it already
// (it does not depend on release), else null.
FractionPoint EvaluateAt(const PlanInputs& in, const Context& x, double fraction, double share,
                         bool release, const ResolvedPlacement* resolved = nullptr) {
  OptimizerConfig cfg = ShardConfig(in, fraction, share);
  cfg.speculative_early_start = false;
  const ResolvedPlacement rp = resolved != nullptr ? *resolved : Resolve(in, x, fraction, share);
  const Placement& pl = rp.placement;
  const uint64_t g = DTypeSize(in.grad_dtype);
  FractionPoint p;
  p.fraction = fraction;
  p.grad_release = release;
  p.cold_elements = pl.offloaded;
  p.hot_elements = pl.total - pl.offloaded;
  if (in.fsdp2) {
    p.gpu.weights = x.shard * DTypeSize(in.param_dtype);
    p.gpu.unsharded = Fsdp2UnshardedBytes(in);
  } else {
    p.gpu.weights = in.model.total_params() * DTypeSize(in.param_dtype);
  }
  const uint64_t all_grads = in.fsdp2 ? x.shard : in.model.total_params();
  // Release: the GPU-resident part's gradients in the engine's device buffer, and the
  // groups in flight; the offloaded part's in the pinned host gradient area.
  // (HSDP keeps each group's reduce output to the end of backward: nothing is saved.)
  const bool saves = release && !(in.fsdp2 && ShardRanks(in) < RankCount(in));
  p.gpu.gradients = (saves ? p.hot_elements + GradientsInFlight(in, x.specs) : all_grads) * g;
  p.gpu.activations = x.activations;
  p.gpu.runtime = RuntimeBytes(in, x.activations);
  SetState(rp.memory.device, &p.gpu);
  // Release: each stream slot also holds its chunk's gradient, which `rp`, resolved
  // without release, leaves out.
  if (release) p.gpu.staging += rp.plan->release_slot_bytes;
  SetState(rp.memory.host, &p.host);
  if (release) p.host.gradients = p.cold_elements * g;
  const PointClasses c = ClassesOf(in, pl);
  SpeculationElements spec;
  uint64_t backup = 0;
  if (in.speculative_early_start && pl.offloaded > 0)
    spec = AddSpeculation(in, x, pl, cfg, c, release, &p, &backup);
  // Read in place: a gradient waits on the GPU for its chunk's kernel as it would for its
  // download, both behind the same queued work (GradientsWaiting counts either).
  if (release) spec.in_place = std::min(spec.streamed, in.in_place_grad_bytes / g);
  p.speculated_host = spec.host;
  p.speculated_streamed = spec.streamed;
  if (saves) {
    // Note [Gradients in flight] (python/tandem/_core/grads.py): the hand-over waits for the
    // link past grads_in_flight_bytes, so no more than that waits behind it.
    const double waiting =
        GradientsWaiting(in, x.rates, x.training, c, release, spec) * static_cast<double>(g);
    p.gpu.gradients +=
        static_cast<uint64_t>(std::min(waiting, static_cast<double>(in.grads_in_flight_bytes)));
    p.gpu.activations =
        ActivationsBesideGradients(x.transformers, x.activations,
                                   p.gpu.gradients - p.hot_elements * g);
  }
  SetFits(in, &p);
  p.time = PredictStepTime(in, x.rates, p.hot_elements, p.cold_elements, x.shard, pl.streamed,
                           release);
  p.iteration = PredictIteration(in, x.rates, x.training, p.time, c, release, spec, backup);
  return p;
}

// Point `r` evaluated again, at its fraction and compute share, with `in` and `release`.
FractionPoint EvaluateAgain(const PlanInputs& in, const Context& x, const FractionPoint& r,
                            bool release) {
  return EvaluateAt(in, x, r.fraction, r.cold_elements > 0 ? r.time.split.share : 0.0, release);
}

// How a point ranks: the iteration when it is modelled, else the step.
double Score(const FractionPoint& p) {
  return p.iteration.modelled ? p.iteration.iteration_ms : p.time.step_ms;
}

// Whether `a` is a better plan at its fraction than `b`: fitting both budgets first, then
// the GPU, then the faster (or, neither fitting the GPU, the smaller on it).
bool Better(const FractionPoint& a, const FractionPoint& b) {
  const int fa = (a.fits_gpu && a.fits_host) ? 2 : a.fits_gpu ? 1 : 0;
  const int fb = (b.fits_gpu && b.fits_host) ? 2 : b.fits_gpu ? 1 : 0;
  if (fa != fb) return fa > fb;
  // Neither fits the GPU: the setting that needs less of it (release), else the share
  // tried first (auto's).
  if (fa == 0) return a.grad_release != b.grad_release && a.gpu.total() < b.gpu.total();
  return Score(a) < Score(b) * (1 - 1e-9);
}

std::vector<bool> ReleaseChoices(const PlanInputs& in) {
  switch (in.grad_release) {
    case Choice::kOff:
      return {false};
    case Choice::kOn:
      return {true};
    case Choice::kAuto:
      break;
  }
  return {false, true};
}

// The best point at `fraction` over the settings the plan may choose: gradient release
// (PlanInputs::grad_release) and, with an iteration model and offload_compute auto, the
// compute share (ChooseSplit's, all on the host, half, all streamed). Without an iteration
// model auto takes ChooseSplit's share, as the engine does, except where its stream slots
// do not fit the GPU and computing on the host does (Note [Auto streams only where the
// slots fit]).
FractionPoint BestAt(const PlanInputs& in, const Context& x, double fraction) {
  std::optional<FractionPoint> best;
  std::map<double, ResolvedPlacement> placed;  // by share: release does not change it
  auto evaluate = [&](double share, bool release) {
    auto it = placed.find(share);
    if (it == placed.end()) it = placed.emplace(share, Resolve(in, x, fraction, share)).first;
    return EvaluateAt(in, x, fraction, share, release, &it->second);
  };
  for (bool release : ReleaseChoices(in)) {
    const double planned = PlannedShare(in, x, fraction, release);
    std::vector<double> shares = {planned};
    if (in.offload_compute == kOffloadComputeAuto && x.training.modelled && !x.fit_only)
      for (double s : {0.0, 0.5, 1.0})
        if (s != planned) shares.push_back(s);
    for (double share : shares) {
      FractionPoint p = evaluate(share, release);
      p.share_as_asked = share == planned;
      // Note [Auto streams only where the slots fit]: the stream slots (and their kernel
      // tables) are the only GPU bytes streaming adds; where they do not fit but
      // computing on the host does, auto's plan computes on the host (and says so: the
      // engine's auto looks at time only).
      if ((!x.training.modelled || x.fit_only) && !p.fits_gpu && p.time.streamed > 0 &&
          in.offload_compute == kOffloadComputeAuto) {
        FractionPoint q = evaluate(0.0, release);
        if (q.fits_gpu) {
          q.split_fallback = true;
          p = q;
        }
      }
      if (!best || Better(p, *best)) best = p;
    }
  }
  return *best;
}

// Note [A larger fraction must pay]
// Offloading more costs host memory, PCIe traffic beside the training's own and the
// model's error; a plan takes a larger offload fraction than the smallest that fits only
// when it is meaningfully faster: by at least kMinIterationGain of the iteration when the
// iteration is modelled (--seq), else by kMinStepGain of the optimizer step, which is
// then all the plan knows (a step is typically a tenth of an iteration, so 5% of it is
// about 0.5% of the iteration). Without these, a model that fits at fraction 0 was
// planned at 0.0225, balancing the GPU kernel against the host to save 0.58 ms of a
// 33.20 ms step (Llama-3-8B on 80 GiB). With 1% of the iteration the same model on 80 GiB
// at seq 2048 was planned at 0.0156 for a modelled 2.5% (7 ms), less than the iteration
// model's error on one GPU (docs/benchmarks.md "Fit: the plan against the run"): a gain
// has to be 5% of the iteration.
constexpr double kMinIterationGain = 0.05;
constexpr double kMinStepGain = 0.05;

// The fastest step of the feasible range [kmin, khmax] (ties: the smaller fraction), on
// the fraction grid, each fraction at the compute share offload_compute resolves to there
// and, where the plan chooses gradient release, with the setting that fits there (release
// keeps fewer bytes on the GPU, so it may fit from a smaller fraction on).
FractionPoint FastestStep(const PlanInputs& in, const Context& x, int kmin, int khmax) {
  struct Candidate {
    int k;
    bool release;
    double ms;
  };
  std::vector<Candidate> steps;
  int best_k = khmax + 1;
  bool best_release = false;
  double best_ms = 0;
  bool any = false;
  for (bool release : ReleaseChoices(in)) {
    PlanInputs one = in;
    one.grad_release = release ? Choice::kOn : Choice::kOff;
    auto at = [&](int k) { return BestAt(one, x, Frac(k)); };
    auto fits = [&](int k) {
      const FractionPoint p = at(k);
      return p.fits_gpu && p.fits_host;
    };
    const int from = fits(kmin) ? kmin : fits(khmax) ? Bisect(kmin, khmax, fits) : khmax + 1;
    // Note [Auto streams only where the slots fit]: below kstream the GPU cannot hold the
    // stream slots too, and auto's plan computes on the host there.
    int kstream = from;
    if (in.offload_compute == kOffloadComputeAuto && from <= khmax) {
      auto streams = [&](int k) { return !at(k).split_fallback; };
      kstream = streams(from) ? from : streams(khmax) ? Bisect(from, khmax, streams) : khmax + 1;
    }
    for (int k = from; k <= khmax; ++k) {
      const Placement pl =
          Decide(in, x, Frac(k), k < kstream ? 0.0 : in.offload_compute, release).placement;
      const double ms = PredictStepTime(in, x.rates, pl.total - pl.offloaded, pl.offloaded, x.shard,
                                        pl.streamed, release)
                            .step_ms;
      steps.push_back({k, release, ms});
      if (!any || ms < best_ms) best_ms = ms, any = true;
    }
  }
  // Note [A larger fraction must pay]: the smallest fraction within kMinStepGain of the
  // fastest (release off first at a fraction).
  for (const Candidate& c : steps)
    if (c.ms <= best_ms * (1 + kMinStepGain) &&
        (c.k < best_k || (c.k == best_k && !c.release && best_release)))
      best_k = c.k, best_release = c.release;
  PlanInputs chosen = in;
  chosen.grad_release = best_release ? Choice::kOn : Choice::kOff;
  return BestAt(chosen, x, Frac(best_k));
}

// The fastest iteration of the feasible range [kmin, khmax]: the range's ends, 64 steps
// between them and the sweep's fractions inside it, each the best point there (BestAt);
// then the smallest fraction within kMinIterationGain of it (Note [A larger fraction must
// pay]).
FractionPoint FastestIteration(const PlanInputs& in, const Context& x, int kmin, int khmax) {
  std::vector<int> ks = {kmin, khmax};
  constexpr int kGrid = 64;
  for (int i = 1; i < kGrid; ++i) ks.push_back(kmin + (khmax - kmin) * i / kGrid);
  for (int i = 0; i <= kSweepSteps; ++i) {
    const int k = kFractionSteps * i / kSweepSteps;
    if (k >= kmin && k <= khmax) ks.push_back(k);
  }
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  std::vector<FractionPoint> fitting;
  double fastest = 0;
  for (int k : ks) {
    FractionPoint p = BestAt(in, x, Frac(k));
    if (!p.fits_gpu || !p.fits_host) continue;
    if (fitting.empty() || Score(p) < fastest) fastest = Score(p);
    fitting.push_back(std::move(p));
  }
  for (const FractionPoint& p : fitting)  // ascending fractions
    if (Score(p) <= fastest * (1 + kMinIterationGain)) return p;
  return BestAt(in, x, Frac(kmin));
}

// Where the budgets hold: the smallest fraction that fits the GPU (GPU bytes fall as the
// fraction grows), the largest that fits the host (host bytes grow with it), and what is
// short when none fits both; `front` and `back` are the points at fractions 0 and 1.
struct Bounds {
  int kmin = -1, khmax = -1;
  // The smallest fraction at which a point fits both budgets (kmin, or above it when the
  // setting that fits the GPU first does not fit the host: streaming needs GPU slots,
  // host-computed elements more host memory); -1 if none.
  int kfit = -1;
  uint64_t gpu_short = 0, host_short = 0;
  bool feasible = false;
};

Bounds FindBounds(const PlanInputs& in, const Context& x, const FractionPoint& front,
                  const FractionPoint& back) {
  auto at = [&](int k) { return BestAt(in, x, Frac(k)); };
  Bounds b;
  if (front.fits_gpu) {
    b.kmin = 0;
  } else if (back.fits_gpu) {
    b.kmin = Bisect(0, kFractionSteps, [&](int k) { return at(k).fits_gpu; });
  } else {
    b.gpu_short = back.gpu.total() - UsableGpuBytes(in);
  }
  if (back.fits_host) {
    b.khmax = kFractionSteps;
  } else if (front.fits_host) {
    b.khmax = Bisect(0, kFractionSteps, [&](int k) { return !at(k).fits_host; }) - 1;
  }
  if (b.kmin >= 0) {
    const FractionPoint first = b.kmin == 0 ? front : at(b.kmin);
    auto both = [&](int k) {
      const FractionPoint p = at(k);
      return p.fits_gpu && p.fits_host;
    };
    if (first.fits_host) {
      b.kfit = b.kmin;
    } else if (b.khmax > b.kmin) {
      // Another setting may fit both a little further on: the first grid point that
      // does, then the first fraction before it.
      constexpr int kGrid = 64;
      int prev = b.kmin;
      for (int i = 1; i <= kGrid && b.kfit < 0; ++i) {
        const int k = b.kmin + static_cast<int>(static_cast<int64_t>(b.khmax - b.kmin) * i / kGrid);
        if (k == prev) continue;
        if (both(k)) b.kfit = Bisect(prev, k, both);
        prev = k;
      }
    }
    b.feasible = b.kfit >= 0 && b.khmax >= b.kfit;
    if (!b.feasible && !first.fits_host) b.host_short = first.host_node_bytes - in.host_budget;
  }
  return b;
}

// The optimizer call that runs the recommended point (OptimizerKwargs).
// Note [Run it says all the plan assumed]: the training code the plan was made for, then
// the optimizer call that runs the recommended point (OptimizerKwargs): the activation
// recomputation the estimate assumed, FSDP2 under torchrun, the named parameters (their
// names go into checkpoints and messages) and, with speculation, begin_step() before
// each backward, without which early start stays inactive.
std::string RunItMessage(const PlanInputs& in, const FractionPoint& r) {
  std::string line = "run it: ";
  const bool estimated = !in.activation_bytes_given && in.activation_shape.seq_len > 0;
  if (estimated && in.recompute != Recompute::kNone) {
    if (ResolvedActivationModel(in) == ActivationModel::kTransformers)
      line += "model.gradient_checkpointing_enable(); ";
    else if (in.recompute == Recompute::kFull)
      line += "activation checkpointing of every block (recompute full); ";
    else
      line += "selective recomputation of attention (recompute selective); ";
  }
  if (in.fsdp2)
    line += "under torchrun with " + std::to_string(in.gpus_per_node) +
            " process(es) per node, fully_shard(block) for each block, then fully_shard(model)" +
            (in.shard_size != 0 ? " over a " + std::to_string(in.shard_size) + "-rank shard mesh"
                                : std::string()) +
            "; ";
  line += std::string("opt = tandem.torch.") + OptimizerClassName(in.algorithm) +
          "(model.named_parameters()";
  for (const OptimizerKwarg& k : OptimizerKwargs(in, r)) line += ", " + k.name + "=" + k.Python();
  line += ") with your hyper-parameters beside them";
  if (in.speculative_early_start && r.cold_elements > 0)
    line += "; each iteration opt.begin_step() before loss.backward(), then opt.step()";
  return line + " (tandem.plan(...).optimizer_kwargs is the keyword arguments as a dict)";
}

}  // namespace

double FitFraction(const PlanInputs& in) {
  Validate(in);
  Context x = MakeContext(in);
  x.fit_only = true;
  const Bounds b = FindBounds(in, x, BestAt(in, x, 0.0), BestAt(in, x, 1.0));
  return b.feasible ? Frac(b.kfit) : -1.0;
}

bool PlanFits(const PlanInputs& in) { return FitFraction(in) >= 0; }

FractionPoint EvaluateFraction(const PlanInputs& in, double fraction) {
  Validate(in);
  return BestAt(in, MakeContext(in), fraction);
}

PlanResult MakePlan(const PlanInputs& in) {
  Validate(in);
  PlanResult plan;
  plan.inputs = in;
  plan.ranks = RankCount(in);
  plan.shard_size = ShardRanks(in);
  plan.runnable = !in.zero1_sharding;
  plan.usable_gpu_bytes = UsableGpuBytes(in);
  const uint64_t usable = plan.usable_gpu_bytes;
  const Context x = MakeContext(in);
  plan.rates = x.rates;
  plan.activation_bytes = x.activations;
  plan.activation_model = ResolvedActivationModel(in);
  plan.transformers_activations = TransformersActivationsOf(in);
  plan.shard_elements = x.shard;
  for (size_t t = 0; t < x.specs.size(); ++t)
    if (x.f32_moments[t]) ++plan.f32_moment_tensors, plan.f32_moment_elements += x.specs[t].numel;
  plan.iteration_modelled = x.training.modelled;
  plan.iteration_note = x.training.note;
  plan.flops = x.training.flops;
  plan.train_tflops = x.training.tflops;
  plan.peak_tflops = x.training.peak;
  plan.train_source = x.training.tflops_source;
  plan.peak_source = x.training.peak_source;

  auto at = [&](int k) { return BestAt(in, x, Frac(k)); };
  for (int i = 0; i <= kSweepSteps; ++i)
    plan.sweep.push_back(BestAt(in, x, static_cast<double>(i) / kSweepSteps));
  // Both sides without their staging buffers, which follow the compute split rather than
  // the fraction: the GPU's stream slots appear with the first streamed element, the
  // host's pinned pipeline slots with the first element computed on the host, and auto
  // may stream at one fraction and compute on the host at the next (Note [Auto streams
  // only where the slots fit]), so the totals may step back by a staging buffer while
  // the state itself moves one way. With gradient release chosen point by point, only
  // points of one setting compare.
  auto gpu_state = [](const FractionPoint& p) { return p.gpu.total() - p.gpu.staging; };
  auto host_state = [](const FractionPoint& p) { return p.host.total() - p.host.staging; };
  for (size_t i = 1; i < plan.sweep.size(); ++i) {
    const FractionPoint &a = plan.sweep[i - 1], &b = plan.sweep[i];
    // Speculation with an iteration model takes what memory is left: not monotone.
    if (a.grad_release != b.grad_release ||
        (x.training.modelled && in.speculative_early_start))
      continue;
    if (gpu_state(b) > gpu_state(a) || host_state(b) < host_state(a)) plan.monotone = false;
  }

  const FractionPoint all_off = plan.sweep.back();
  const Bounds bounds = FindBounds(in, x, plan.sweep.front(), all_off);
  const int kmin = bounds.kmin, khmax = bounds.khmax;
  plan.gpu_short_bytes = bounds.gpu_short;
  plan.host_short_bytes = bounds.host_short;
  plan.feasible = bounds.feasible;
  if (khmax >= 0) plan.max_host_fraction = Frac(khmax);
  if (kmin >= 0) plan.min_fraction = Frac(kmin);

  if (in.fraction >= 0) {
    // The plan at the given fraction: it fits there or not.
    const FractionPoint given = BestAt(in, x, in.fraction);
    plan.feasible = given.fits_gpu && given.fits_host;
    if (!plan.feasible) {
      plan.recommended = given;
      char b[320];
      std::snprintf(b, sizeof b,
                    "DOES NOT FIT at the given offload fraction %.4f: needs %s of %s usable GPU "
                    "per rank and %s of %s host per node",
                    in.fraction, GiB(given.gpu.total()).c_str(), GiB(usable).c_str(),
                    GiB(given.host_node_bytes).c_str(), GiB(in.host_budget).c_str());
      plan.messages.push_back(b);
    }
  }
  if (plan.feasible) {
    plan.recommended = in.fraction >= 0            ? BestAt(in, x, in.fraction)
                       : x.training.modelled ? FastestIteration(in, x, bounds.kfit, khmax)
                                             : FastestStep(in, x, bounds.kfit, khmax);
    if (in.fraction < 0 && (!plan.recommended.fits_gpu || !plan.recommended.fits_host)) {
      plan.monotone = false;
      plan.recommended = at(bounds.kfit);
    }
    const FractionPoint& r = plan.recommended;
    char split[200] = "";
    if (!r.share_as_asked)
      std::snprintf(split, sizeof split,
                    "; the GPU computes %.4f of the offloaded elements (run with "
                    "offload_compute=%s: auto would pick another share)",
                    r.time.split.share, OffloadComputeName(r.time.split.share).c_str());
    else if (r.time.streamed > 0)
      std::snprintf(split, sizeof split,
                    "; the GPU computes %.4f of the offloaded elements (offload_compute %s)",
                    r.time.split.share, OffloadComputeName(in.offload_compute).c_str());
    std::string release;
    if (in.grad_release != Choice::kOff || r.grad_release)
      release = r.grad_release ? "; gradient release on" : "; gradient release off";
    if (r.speculated_host + r.speculated_streamed > 0) {
      char b[160];
      std::snprintf(b, sizeof b, "; speculation during backward over %.1f%% of the offloaded elements",
                    100.0 * static_cast<double>(r.speculated_host + r.speculated_streamed) /
                        static_cast<double>(std::max<uint64_t>(r.cold_elements, 1)));
      release += b;
    }
    char time[400];
    if (r.iteration.modelled)
      std::snprintf(time, sizeof time,
                    "iteration %.2f ms (forward + backward %.2f, optimizer step %.2f ms of which "
                    "%.2f exposed after backward; %.0f tokens/s per GPU, MFU %.1f%%)",
                    r.iteration.iteration_ms, r.iteration.forward_ms + r.iteration.backward_ms,
                    r.time.step_ms, r.iteration.exposed_ms, r.iteration.tokens_per_s,
                    100 * r.iteration.mfu);
    else
      std::snprintf(time, sizeof time, "step %.2f ms (bottleneck: %s)", r.time.step_ms,
                    Name(r.time.bottleneck));
    char b[1200];
    std::snprintf(b, sizeof b,
                  "FITS: %s offload fraction %.4f: %s of %s usable %s, %s of %s host "
                  "per node; %s%s%s. The GPU budget needs fraction >= %.4f. %s",
                  in.fraction >= 0 ? "the given" : "recommended", r.fraction, GiB(r.gpu.total()).c_str(), GiB(usable).c_str(),
                  in.fsdp2 ? "GPU per rank" : "GPU", GiB(r.host_node_bytes).c_str(),
                  GiB(in.host_budget).c_str(), time, split, release.c_str(), plan.min_fraction,
                  !plan.runnable ? "A what-if: this version cannot run it (see the warnings)."
                  : in.fsdp2 && r.grad_release
                      ? "Runnable: FSDP2 with tandem.torch, release_grads=True "
                        "(docs/distributed.md, \"Early start and gradient release\")."
                  : in.fsdp2 ? "Runnable: FSDP2 with tandem.torch (docs/distributed.md)."
                             : "Runnable.");
    plan.messages.push_back(b);
    if (plan.runnable) plan.messages.push_back(RunItMessage(in, r));
  } else if (in.fraction < 0) {
    if (plan.gpu_short_bytes > 0)
      plan.messages.push_back("DOES NOT FIT: GPU memory short by " + GiB(plan.gpu_short_bytes) +
                              " even with all optimizer state offloaded (fraction 1): needs " +
                              GiB(all_off.gpu.total()) + " of " + GiB(usable) + " usable per GPU");
    if (plan.host_short_bytes > 0) {
      char b[64];
      std::snprintf(b, sizeof b, "%.4f", plan.min_fraction);
      plan.messages.push_back("DOES NOT FIT: host memory short by " + GiB(plan.host_short_bytes) +
                              " at fraction " + b + " (the smallest that fits the GPU): needs " +
                              GiB(plan.host_short_bytes + in.host_budget) + " of " +
                              GiB(in.host_budget) + " per node");
    }
    if (plan.messages.empty())  // only when memory is not monotone in the fraction
      plan.messages.push_back("DOES NOT FIT: no fraction fits both budgets (the GPU needs >= " +
                              std::to_string(plan.min_fraction) + ", the host allows <= " +
                              std::to_string(plan.max_host_fraction) + ")");
    plan.would_fit = WhatWouldFit(in, plan.host_short_bytes);
    for (const std::string& w : plan.would_fit) plan.messages.push_back(w);
    if (plan.would_fit.empty())
      plan.messages.push_back(
          "nothing tried fits (gradient release, full recomputation, a shorter sequence, a "
          "smaller micro-batch, more host memory): more GPUs with --fsdp2, or a GPU with more "
          "memory");
    plan.recommended = plan.min_fraction >= 0 ? at(kmin) : all_off;
  }
  // What the plan assumes, and what this version cannot do.
  if (in.gpu_headroom_fraction > 0 || in.gpu_headroom_bytes > 0) {
    char b[96] = "";
    if (in.gpu_headroom_fraction > 0)
      std::snprintf(b, sizeof b, "%g%% of ", in.gpu_headroom_fraction * 100);
    plan.messages.push_back(
        "note: GPU headroom " + std::string(b) +
        (in.gpu_headroom_fraction > 0 ? "the budget" : "") +
        (in.gpu_headroom_fraction > 0 && in.gpu_headroom_bytes > 0 ? " + " : "") +
        (in.gpu_headroom_bytes > 0 ? GiB(in.gpu_headroom_bytes) : "") +
        " kept free for what the plan does not count (NCCL's buffers, other processes, "
        "the estimates' error): the plan uses " +
        GiB(usable) + " of " + GiB(in.gpu_budget) + " (--headroom)");
  } else {
    plan.messages.push_back(
        "note: no GPU headroom kept (--headroom 0%): NCCL's buffers, other processes and "
        "the estimates' error are not counted");
  }
  if (plan.recommended.split_fallback) {
    char b[400];
    std::snprintf(b, sizeof b,
                  "note: offload_compute auto would stream state to the GPU here, but the GPU "
                  "budget cannot also hold its stream slots (up to %s: %d x %s): this plan "
                  "computes every offloaded element on the host; run it with "
                  "offload_compute=\"host\", or smaller slots (--stream-chunk)",
                  GiB(StreamSlotBytes(in)).c_str(), in.stream_slots,
                  GiB(in.stream_chunk_bytes).c_str());
    plan.messages.push_back(b);
  }
  {
    // What release saves: the recommended point again with the other setting.
    const FractionPoint& r = plan.recommended;
    const FractionPoint other = EvaluateAgain(in, x, r, !r.grad_release);
    plan.gpu_bytes_with_release = (r.grad_release ? r : other).gpu.total();
    plan.gpu_bytes_without_release = (r.grad_release ? other : r).gpu.total();
  }
  if (plan.recommended.grad_release) {
    const FractionPoint& r = plan.recommended;
    plan.messages.push_back(
        "note: gradient release: the GPU keeps " +
        GiB(r.gpu.gradients) + " of gradients (the GPU-resident part's, the groups in flight" +
        (r.iteration.modelled ? " and those waiting for their download" : "") +
        ") instead of " + GiB(plan.gpu_bytes_without_release - plan.gpu_bytes_with_release +
                               r.gpu.gradients) +
        "; the host a pinned gradient area of " + GiB(r.host.gradients) +
        " per rank. tandem.torch runs it with release_grads=True: each gradient handed over "
        "once per step (accumulate inside opt.accumulating()), clipped through max_grad_norm, "
        "p.grad None after backward");
    if (in.fsdp2 && plan.shard_size < plan.ranks)
      plan.messages.push_back(
          "warning: HSDP keeps each group's reduce output until the end of backward (torch "
          "2.11): gradient release frees no GPU memory there, and this plan counts every "
          "gradient");
  }
  if (plan.iteration_modelled) {
    char b[600];
    std::snprintf(b, sizeof b,
                  "note: iteration: forward and backward of %.1f TFLOP of hardware work per GPU "
                  "(%.0f tokens, recompute %s counted) at %.0f TFLOP/s (%s); MFU of the model's "
                  "%.1f TFLOP against a %.0f TFLOP/s peak (%s); the optimizer's work during "
                  "backward is assumed not to slow it",
                  plan.flops.hardware() / 1e12, plan.flops.tokens, Name(in.recompute),
                  plan.train_tflops, plan.train_source.c_str(), plan.flops.model() / 1e12,
                  plan.peak_tflops, plan.peak_source.c_str());
    plan.messages.push_back(b);
    const FractionPoint& r = plan.recommended;
    if (r.speculated_host + r.speculated_streamed > 0) {
      std::snprintf(b, sizeof b,
                    "note: speculation commits only when clipping does not trigger and every "
                    "gradient is finite on every rank; when it is rolled back the step takes "
                    "%.2f ms after backward (iteration %.2f ms)",
                    r.iteration.exposed_abort_ms, r.iteration.iteration_abort_ms);
      plan.messages.push_back(b);
    }
    if (r.grad_release && r.speculated_streamed > 0 && in.in_place_grad_bytes == 0) {
      // The speculated chunks could read the handed gradients in place (Note [Reading the
      // handed gradient in place]): the same point with a budget for all of them.
      PlanInputs all = in;
      all.in_place_grad_bytes = r.speculated_streamed * DTypeSize(in.grad_dtype);
      const FractionPoint q = EvaluateAgain(all, x, r, true);
      if (q.iteration.iteration_ms < r.iteration.iteration_ms) {
        std::snprintf(b, sizeof b,
                      "note: with in_place_grad_bytes = %s (--in-place-grad-bytes) the "
                      "speculated chunks read the handed gradients on the GPU instead of "
                      "uploading them again: iteration %.2f ms",
                      GiB(all.in_place_grad_bytes).c_str(), q.iteration.iteration_ms);
        plan.messages.push_back(b);
      }
    }
  } else if (in.activation_shape.seq_len > 0 && !plan.iteration_note.empty()) {
    plan.messages.push_back("note: " + plan.iteration_note);
  }
  if (plan.recommended.host_node_bytes > in.host_budget / 2)
    plan.messages.push_back(
        "note: the plan pins " + GiB(plan.recommended.host_node_bytes) +
        " per node, more than half of the host budget: tandem's node pinned budget is half "
        "of MemTotal unless TANDEM_NODE_PINNED_BUDGET sets it (docs/node_sharing.md)");
  if (in.zero1_sharding && plan.ranks > 1)
    plan.messages.push_back(
        "warning: ZeRO-1 sharding is not available in this version: this plan is a what-if "
        "(optimizer state divided among the ranks); the engine keeps the whole state per rank");
  if (in.fsdp2) {
    char b[512];
    std::snprintf(b, sizeof b,
                  "note: FSDP2: every tensor sharded along dimension 0 over %llu rank(s)%s; "
                  "figures are rank 0's, which holds ceil(rows / %llu) rows of each tensor "
                  "(the largest shard); the unsharded working set (%s per GPU) is the root "
                  "unit and %u block(s) in flight, all-gathered parameters plus unsharded "
                  "gradients",
                  static_cast<unsigned long long>(plan.shard_size),
                  plan.shard_size < plan.ranks ? " (HSDP: replicated across the shard groups)" : "",
                  static_cast<unsigned long long>(plan.shard_size),
                  GiB(Fsdp2UnshardedBytes(in)).c_str(), in.fsdp2_blocks_in_flight);
    plan.messages.push_back(b);
    if (plan.f32_moment_tensors > 0)
      plan.messages.push_back(
          "note: FSDP2: " + std::to_string(plan.f32_moment_tensors) + " tensor(s) (" +
          std::to_string(plan.f32_moment_elements) +
          " elements on rank 0) keep f32 moments: 1-D or a last dimension not a multiple "
          "of 32 (the shard-safe group rule)");
  } else if (plan.ranks > 1) {
    plan.messages.push_back(
        "note: plain data parallelism: every rank holds the whole model, its gradients and "
        "the whole optimizer state (--fsdp2 plans FSDP2 shards)");
  }
  for (const std::string& n : in.model.notes) plan.messages.push_back("note: " + n);
  if (IsMixtureOfExperts(in.model) && plan.activation_model == ActivationModel::kMegatron &&
      plan.activation_bytes > 0 && !in.activation_bytes_given)
    plan.messages.push_back(
        "note: mixture of experts: the megatron activation estimate uses the dense-block "
        "formula; the routed experts' buffers (top-k x expert width per token) and the "
        "router's are not counted");
  if (plan.activation_model == ActivationModel::kTransformers) {
    const TransformersActivations& a = plan.transformers_activations;
    char b[600];
    std::snprintf(b, sizeof b,
                  "note: activations as transformers computes them (--activation-model "
                  "transformers; docs/planner.md \"Activations\"): the peak is in the %s, "
                  "%s kept by the layers, %s of logits and fp32 loss buffers; a plain loop "
                  "holding the output is assumed (a Trainer frees the logits before backward)",
                  a.where(), GiB(a.kept).c_str(), GiB(a.logits).c_str());
    plan.messages.push_back(b);
  }
  {
    const FractionPoint& r = plan.recommended;
    char b[400];
    std::snprintf(b, sizeof b,
                  "note: runtime %s per GPU counted apart from the headroom: the CUDA context "
                  "%s and the allocator's rounding and fragmentation (%g%% of the activations), "
                  "as measured on one H200 (docs/planner.md \"Runtime\")",
                  GiB(r.gpu.runtime).c_str(), GiB(in.cuda_context_bytes).c_str(),
                  in.allocator_fragmentation * 100);
    plan.messages.push_back(b);
  }
  if (in.profile.builtin_default)
    plan.messages.push_back(
        "note: step times use the built-in H200 reference profile (design-brief figures, "
        "kernels at 90% of roofline), not measurements of this machine; pass --profile");
  if (!plan.monotone)
    plan.messages.push_back(
        "warning: memory is not monotone in the fraction on this model; the searches assume "
        "it is, so check the sweep table");
  return plan;
}

}  // namespace tandem::planner
