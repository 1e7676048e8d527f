// Internal: pieces of the plan shared by MakePlan and the tests.
#pragma once

#include <string>
#include <vector>

#include "tandem/config.h"
#include "tandem/resolve_placement.h"
#include "tandem/planner.h"

namespace tandem::planner {

// Fraction grid of the searches: multiples of 1 / kFractionSteps.
inline constexpr int kFractionSteps = 10000;
// Sweep reported in tables and charts: 0, 1/16, ..., 1.
inline constexpr int kSweepSteps = 16;

// Leaves MemoryBreakdown::runtime out of a plan (its three estimates 0): for tests that
// size the plan's own tensors against exact budgets.
inline void NoRuntime(PlanInputs* in) {
  in->cuda_context_bytes = 0;
  in->allocator_round_bytes = 0;
  in->allocator_fragmentation = 0;
}

// Data-parallel ranks: gpus_per_node * nodes.
uint64_t RankCount(const PlanInputs& in);

// Ranks each tensor is sharded over: shard_size (0: all ranks) with fsdp2, all ranks
// with zero1_sharding, else 1.
uint64_t ShardRanks(const PlanInputs& in);

// The tensors rank 0 steps: every tensor whole (plain data parallelism); with fsdp2 its
// FSDP2 shard (Fsdp2ShardNumel, shape {ceil(rows / ranks), ...}); with the
// zero1_sharding what-if each tensor's first ceil(numel / ranks) elements rounded up to
// a quantization group. Rank 0 holds the largest shard of every tensor, so it is the
// rank that bounds memory and time.
std::vector<TensorSpec> ShardSpecs(const PlanInputs& in);

// ---------------------------------------------------------------------------------------
// FSDP2 (fsdp2.cc; docs/planner.md "FSDP2")

// Rows of dimension 0 that FSDP2 gives rank 0, the most any rank holds:
// ceil(rows / ranks) (trailing ranks hold fewer or none). ranks >= 1.
uint64_t Fsdp2Rows(uint64_t rows, uint64_t ranks);
// Elements of `t` on rank 0: Fsdp2Rows(shape[0], ranks) rows of shape[1] x ... elements
// (a 1-D or shapeless tensor: rows are elements).
uint64_t Fsdp2ShardNumel(const ModelTensor& t, uint64_t ranks);
// The shard-safe group rule (docs/distributed.md): a sharded tensor keeps q8 moments
// only if its global shape has two or more dimensions and the last is a multiple of 32.
bool GroupSafe(const ModelTensor& t);
// `f` with q8 moments made f32 (the formats of a tensor the group rule applies to).
StateFormats F32MomentFormats(StateFormats f);
// Per tensor of ShardSpecs(in): whether the group rule makes its moments f32 (fsdp2,
// a q8 moment format and !GroupSafe); all false otherwise.
std::vector<bool> F32MomentTensors(const PlanInputs& in);

// ResolvePlacement (GPU mode) over `specs` at `cfg` where the tensors flagged in
// `f32_moments` hold F32MomentFormats(cfg.formats) (TensorSpec::formats): the placement of
// the optimizer tandem.torch builds under FSDP2 and what its memory() would report.
// PredictRankMemory: its memory alone.
ResolvedPlacement ResolveRankPlacement(const std::vector<TensorSpec>& specs,
                                       const std::vector<bool>& f32_moments,
                                       const OptimizerConfig& cfg);
MemoryReport PredictRankMemory(const std::vector<TensorSpec>& specs,
                               const std::vector<bool>& f32_moments, const OptimizerConfig& cfg);
// `specs` with the flagged tensors' formats set to F32MomentFormats(cfg.formats): the
// tensors ResolveRankPlacement places.
std::vector<TensorSpec> RankSpecs(const std::vector<TensorSpec>& specs,
                                  const std::vector<bool>& f32_moments, const OptimizerConfig& cfg);

// With gradient release, the gradient elements of rank 0 that wait on the GPU at once for
// the engine to take them: one release group (the largest block, or the largest tensor
// outside the blocks) without FSDP2; with FSDP2 the reduce-scatter outputs of the blocks
// in flight, or the root unit's, whichever is larger. `specs`: ShardSpecs(in).
uint64_t GradientsInFlight(const PlanInputs& in, const std::vector<TensorSpec>& specs);

// FSDP2's unsharded working set on one GPU: the root unit (tensors outside the blocks:
// embeddings, final norm, lm_head; FSDP2 keeps the root unsharded from forward to
// backward) and the fsdp2_blocks_in_flight largest blocks, each as its all-gathered
// parameters plus its unsharded gradients before the reduce-scatter:
//   (root + min(blocks_in_flight, blocks) x largest block) x (param + grad bytes).
uint64_t Fsdp2UnshardedBytes(const PlanInputs& in);

// The optimizer configuration rank 0 would run with at `fraction`, with offload_compute
// `share` (the share the plan resolved: ResolvePlacement then places and sizes exactly
// that).
OptimizerConfig ShardConfig(const PlanInputs& in, double fraction, double share = 0.0);

// Activation bytes per GPU from the inputs (given, estimated, or 0), with the activation
// model ResolvedActivationModel picks (kMegatron when nothing is estimated);
// TransformersActivationsOf: its phases, all zero unless that model is kTransformers.
uint64_t ActivationBytes(const PlanInputs& in);
ActivationModel ResolvedActivationModel(const PlanInputs& in);
TransformersActivations TransformersActivationsOf(const PlanInputs& in);

// The smallest offload fraction (multiple of 1e-4) at which `in` fits both budgets, or -1
// (PlanFits without the step and iteration search). Throws as MakePlan.
double FitFraction(const PlanInputs& in);

// Note [What would fit] (would_fit.cc): for inputs that do not fit, what would, each
// computed with FitFraction: gradient release, activation checkpointing, the longest
// sequence and the largest micro-batch that fit, the host memory the smallest GPU
// fraction needs. One sentence each, in tandem-plan's option names.
std::vector<std::string> WhatWouldFit(const PlanInputs& in, uint64_t host_short_bytes);

// ---------------------------------------------------------------------------------------
// The iteration (overlap.cc; Note [What backward hides])

// Forward and backward of one rank: modelled when the inputs have a sequence length and
// the model a dense transformer shape (else `note` says why not).
struct TrainingModel {
  bool modelled = false;
  std::string note;
  TrainingFlops flops;
  double tflops = 0, peak = 0;  // training throughput and peak, 10^12 FLOP/s
  std::string tflops_source, peak_source;
  double forward_ms = 0, backward_ms = 0;
  uint64_t blocks = 0;  // gradients arrive one block at a time
};
TrainingModel ResolveTraining(const PlanInputs& in);

// Rank 0's elements at one point by placement class, and those of them whose gradients
// arrive last in backward (block 0 and the tensors before it: the embedding).
struct PointClasses {
  uint64_t hot = 0, streamed = 0, host = 0;
  uint64_t tail_hot = 0, tail_streamed = 0, tail_host = 0;
};
PointClasses ClassesOf(const PlanInputs& in, const Placement& placement);

// Elements whose update speculation runs during backward, and the bytes a speculated
// host-computed element's backup copies (its state, before the update).
struct SpeculationElements {
  uint64_t host = 0, streamed = 0;
  // With release: of `streamed`, those whose released gradient the speculative kernel
  // reads in place (PlanInputs::in_place_grad_bytes / grad bytes, at most `streamed`).
  uint64_t in_place = 0;
  double host_backup_per_element = 0;
};
// The memory one rank has left for speculation, and what one speculated element takes:
// a host-computed one its state's backup (and a held parameter where the master does not
// alias it), a streamed one its state's spare on the host and its new parameter on the
// GPU.
struct SpeculationRoom {
  uint64_t gpu_bytes = 0, host_bytes = 0;
  double host_per_element = 0, stream_spare_per_element = 0, stream_hold_per_element = 0;
};
// The most elements speculation can take that the room holds and that backward covers
// (host-computed first: their gradients arrive first). Needs tm.modelled.
SpeculationElements ChooseSpeculation(const PlanInputs& in, const Rates& rates,
                                      const TrainingModel& tm, const PointClasses& c,
                                      bool release, const SpeculationRoom& room);
// With gradient release, the gradients still on the GPU when backward ends because their
// downloads (and speculated chunks) queue beyond it, in elements; 0 otherwise.
double GradientsWaiting(const PlanInputs& in, const Rates& rates, const TrainingModel& tm,
                        const PointClasses& c, bool release, const SpeculationElements& s);
// The iteration at one point (`step`: its step-time model; `backup_bytes`: what a rollback
// restores on this rank).
IterationTime PredictIteration(const PlanInputs& in, const Rates& rates, const TrainingModel& tm,
                               const StepTime& step, const PointClasses& c, bool release,
                               const SpeculationElements& s, uint64_t backup_bytes);

}  // namespace tandem::planner
