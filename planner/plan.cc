// The plan: memory per category at any fraction (optimizer state from PredictMemory),
// the fraction searches, the step-time sweep and the verdict.
#include "planner/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

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
  const uint64_t ranks = static_cast<uint64_t>(in.gpus_per_node) * in.nodes;
  if (in.shard_size != 0 && !in.fsdp2)
    bad("plan: a shard size (--shard-size) needs FSDP2 (--fsdp2)");
  if (in.fsdp2) {
    if (in.zero1_sharding)
      bad("plan: FSDP2 and the ZeRO-1 what-if exclude each other (FSDP2 shards the "
          "optimizer state already)");
    if (in.speculative_early_start)
      bad("plan: speculative early start is not available with FSDP2 (FSDP2 assigns the "
          "sharded gradients after its reduce-scatter, outside autograd's hooks)");
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

// The compute share offload_compute resolves to at `fraction` for the profile's rates
// (the planner's model of the machine: ResolveComputeShare).
double PlannedShare(const PlanInputs& in, const Rates& rates, const std::vector<uint64_t>& numels,
                    double fraction) {
  const Placement base = ComputePlacement(numels, fraction, in.placement);
  return ResolveComputeShare(in, rates, base.total - base.offloaded, base.offloaded);
}

// The placement at `fraction` with that share: what ResolvePlacement places (for the step
// time alone, which needs no memory).
Placement PlaceWithShare(const PlanInputs& in, const Rates& rates,
                         const std::vector<uint64_t>& numels, double fraction) {
  return ComputePlacement(numels, fraction, in.placement,
                          PlannedShare(in, rates, numels, fraction));
}

}  // namespace

uint64_t MemoryBreakdown::total() const {
  return weights + master + correction + moments + scales + gradients + unsharded + staging +
         activations + metadata + speculation;
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
  return EstimateActivationBytes(s, in.recompute);
}

namespace {

// The plan at `fraction` with compute share `share`: rank 0's placement and optimizer
// memory from one ResolvePlacement over ShardSpecs(in), the figures the engine would build.
FractionPoint EvaluateAt(const PlanInputs& in, const std::vector<TensorSpec>& specs,
                         const Rates& rates, double fraction, double share) {
  const ResolvedPlacement rp = ResolveRankPlacement(specs, F32MomentTensors(in),
                                                    ShardConfig(in, fraction, share));
  const Placement& pl = rp.placement;
  const MemoryReport& r = rp.memory;
  uint64_t shard = 0;
  for (const TensorSpec& s : specs) shard += s.numel;
  FractionPoint p;
  p.fraction = fraction;
  if (in.fsdp2) {
    // Rank 0's shards; with gradient release the largest layer's shards.
    uint64_t shard = 0, largest = 0;
    std::map<int, uint64_t> per_layer;
    for (size_t t = 0; t < specs.size(); ++t) {
      shard += specs[t].numel;
      const int layer = in.model.tensors[t].layer;
      if (layer < 0)
        largest = std::max(largest, specs[t].numel);
      else
        per_layer[layer] += specs[t].numel;
    }
    for (const auto& [layer, n] : per_layer) largest = std::max(largest, n);
    p.gpu.weights = shard * DTypeSize(in.param_dtype);
    p.gpu.gradients = (in.grad_release ? largest : shard) * DTypeSize(in.grad_dtype);
    p.gpu.unsharded = Fsdp2UnshardedBytes(in);
  } else {
    const uint64_t total = in.model.total_params();
    p.gpu.weights = total * DTypeSize(in.param_dtype);
    p.gpu.gradients =
        (in.grad_release ? in.model.largest_layer_params() : total) * DTypeSize(in.grad_dtype);
  }
  p.gpu.activations = ActivationBytes(in);
  auto state = [](const MemoryReport::Bytes& b, MemoryBreakdown* m) {
    m->master = b.master;
    m->correction = b.correction;
    m->moments = b.momentum + b.variance;
    m->scales = b.scales;
    m->staging = b.staging;
    m->metadata = b.metadata;
    m->speculation = b.speculation;
  };
  state(r.device, &p.gpu);
  state(r.host, &p.host);
  p.host_node_bytes = p.host.total() * in.gpus_per_node;
  p.fits_gpu = p.gpu.total() <= UsableGpuBytes(in);
  p.fits_host = p.host_node_bytes <= in.host_budget;
  p.cold_elements = pl.offloaded;
  p.hot_elements = pl.total - pl.offloaded;
  p.time = PredictStepTime(in, rates, p.hot_elements, p.cold_elements, shard, pl.streamed);
  return p;
}

}  // namespace

FractionPoint EvaluateFraction(const PlanInputs& in, double fraction) {
  Validate(in);
  const std::vector<TensorSpec> specs = ShardSpecs(in);
  const Rates rates = ResolveRates(in);
  std::vector<uint64_t> numels;
  for (const TensorSpec& s : specs) numels.push_back(s.numel);
  FractionPoint p =
      EvaluateAt(in, specs, rates, fraction, PlannedShare(in, rates, numels, fraction));
  // Note [Auto streams only where the slots fit]: the stream slots (and their kernel
  // tables) are the only GPU bytes streaming adds; where they do not fit but computing on
  // the host does, auto's plan computes on the host (and says so: the engine's auto looks
  // at time only).
  if (!p.fits_gpu && p.time.streamed > 0 && in.offload_compute == kOffloadComputeAuto) {
    FractionPoint q = EvaluateAt(in, specs, rates, fraction, 0.0);
    if (q.fits_gpu) {
      q.split_fallback = true;
      return q;
    }
  }
  return p;
}

PlanResult MakePlan(const PlanInputs& in) {
  Validate(in);
  PlanResult plan;
  plan.inputs = in;
  plan.ranks = RankCount(in);
  plan.shard_size = ShardRanks(in);
  plan.runnable = !in.grad_release && !in.zero1_sharding;
  plan.usable_gpu_bytes = UsableGpuBytes(in);
  const uint64_t usable = plan.usable_gpu_bytes;
  plan.rates = ResolveRates(in);
  plan.activation_bytes = ActivationBytes(in);
  const std::vector<TensorSpec> specs = ShardSpecs(in);
  std::vector<uint64_t> numels;
  for (const TensorSpec& s : specs) numels.push_back(s.numel), plan.shard_elements += s.numel;
  const std::vector<bool> f32_moments = F32MomentTensors(in);
  for (size_t t = 0; t < specs.size(); ++t)
    if (f32_moments[t]) ++plan.f32_moment_tensors, plan.f32_moment_elements += specs[t].numel;

  for (int i = 0; i <= kSweepSteps; ++i)
    plan.sweep.push_back(EvaluateFraction(in, static_cast<double>(i) / kSweepSteps));
  // Both sides without their staging buffers, which follow the compute split rather than
  // the fraction: the GPU's stream slots appear with the first streamed element, the
  // host's pinned pipeline slots with the first element computed on the host, and auto
  // may stream at one fraction and compute on the host at the next (Note [Auto streams
  // only where the slots fit]), so the totals may step back by a staging buffer while
  // the state itself moves one way.
  auto gpu_state = [](const FractionPoint& p) { return p.gpu.total() - p.gpu.staging; };
  auto host_state = [](const FractionPoint& p) { return p.host.total() - p.host.staging; };
  for (size_t i = 1; i < plan.sweep.size(); ++i) {
    if (gpu_state(plan.sweep[i]) > gpu_state(plan.sweep[i - 1]) ||
        host_state(plan.sweep[i]) < host_state(plan.sweep[i - 1]))
      plan.monotone = false;
  }

  // Smallest fraction that fits the GPU (GPU bytes fall as the fraction grows).
  auto at = [&](int k) { return EvaluateFraction(in, Frac(k)); };
  const FractionPoint all_off = plan.sweep.back();
  int kmin = -1;
  if (plan.sweep.front().fits_gpu) {
    kmin = 0;
  } else if (all_off.fits_gpu) {
    kmin = Bisect(0, kFractionSteps, [&](int k) { return at(k).fits_gpu; });
  } else {
    plan.gpu_short_bytes = all_off.gpu.total() - usable;
  }
  // Largest fraction that fits the host (host bytes grow with the fraction).
  int khmax = -1;
  if (all_off.fits_host) {
    khmax = kFractionSteps;
  } else if (plan.sweep.front().fits_host) {
    khmax = Bisect(0, kFractionSteps, [&](int k) { return !at(k).fits_host; }) - 1;
  }
  if (khmax >= 0) plan.max_host_fraction = Frac(khmax);
  if (kmin >= 0) {
    plan.min_fraction = Frac(kmin);
    const FractionPoint first = at(kmin);
    if (!first.fits_host) plan.host_short_bytes = first.host_node_bytes - in.host_budget;
    plan.feasible = first.fits_host && khmax >= kmin;
  }

  if (plan.feasible) {
    // The fastest fraction of the feasible range [kmin, khmax] (ties: the smaller), each
    // at the compute share offload_compute resolves to there.
    // Note [Auto streams only where the slots fit]: below kstream the GPU cannot hold the
    // stream slots too, and auto's plan computes on the host there.
    int kstream = kmin;
    if (in.offload_compute == kOffloadComputeAuto) {
      auto streams = [&](int k) { return !at(k).split_fallback; };
      kstream = streams(kmin) ? kmin : streams(khmax) ? Bisect(kmin, khmax, streams) : khmax + 1;
    }
    int best = kmin;
    double best_ms = 0;
    for (int k = kmin; k <= khmax; ++k) {
      const Placement pl = k < kstream ? ComputePlacement(numels, Frac(k), in.placement)
                                       : PlaceWithShare(in, plan.rates, numels, Frac(k));
      const double ms = PredictStepTime(in, plan.rates, pl.total - pl.offloaded, pl.offloaded,
                                        plan.shard_elements, pl.streamed)
                            .step_ms;
      if (k == kmin || ms < best_ms) best = k, best_ms = ms;
    }
    plan.recommended = at(best);
    if (!plan.recommended.fits_gpu || !plan.recommended.fits_host) {
      plan.monotone = false;
      plan.recommended = at(kmin);
    }
    char split[160] = "";
    if (plan.recommended.time.streamed > 0)
      std::snprintf(split, sizeof split,
                    "; the GPU computes %.4f of the offloaded elements (offload_compute %s)",
                    plan.recommended.time.split.share,
                    OffloadComputeName(in.offload_compute).c_str());
    char b[640];
    std::snprintf(b, sizeof b,
                  "FITS: recommended offload fraction %.4f: %s of %s usable %s, %s of %s host "
                  "per node; step %.2f ms (bottleneck: %s)%s. The GPU budget needs fraction "
                  ">= %.4f. %s",
                  plan.recommended.fraction, GiB(plan.recommended.gpu.total()).c_str(),
                  GiB(usable).c_str(), in.fsdp2 ? "GPU per rank" : "GPU",
                  GiB(plan.recommended.host_node_bytes).c_str(), GiB(in.host_budget).c_str(),
                  plan.recommended.time.step_ms, Name(plan.recommended.time.bottleneck), split,
                  plan.min_fraction,
                  !plan.runnable ? "A what-if: this version cannot run it (see the warnings)."
                  : in.fsdp2     ? "Runnable: FSDP2 with tandem.torch (docs/distributed.md)."
                                 : "Runnable.");
    plan.messages.push_back(b);
  } else {
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
        " kept free for the CUDA context, NCCL and the allocator: the plan "
        "uses " +
        GiB(usable) + " of " + GiB(in.gpu_budget) + " (--headroom)");
  } else {
    plan.messages.push_back(
        "note: no GPU headroom kept (--headroom 0%): the CUDA context, NCCL "
        "and the allocator's fragmentation are not counted");
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
  if (in.grad_release)
    plan.messages.push_back(
        "warning: gradient release is not available in this version: this plan is a what-if "
        "(one layer's gradients resident); the engine keeps every gradient until Step()");
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
