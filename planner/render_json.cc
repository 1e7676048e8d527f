// The plan as JSON (docs/planner.md "JSON output" lists the fields).
#include <nlohmann/json.hpp>

#include "tandem/planner.h"
#include "tandem/version.h"

namespace tandem::planner {
namespace {

using nlohmann::json;

json BreakdownJson(const MemoryBreakdown& m) {
  return {
      {"weights", m.weights},     {"master", m.master},           {"correction", m.correction},
      {"moments", m.moments},     {"scales", m.scales},           {"gradients", m.gradients},
      {"unsharded", m.unsharded}, {"staging", m.staging},         {"activations", m.activations},
      {"metadata", m.metadata},   {"speculation", m.speculation}, {"runtime", m.runtime},
      {"total", m.total()}};
}

// Note [What backward hides] (planner/overlap.cc); null without an iteration model.
json IterationJson(const IterationTime& it) {
  if (!it.modelled) return json(nullptr);
  return {{"forward_ms", it.forward_ms},
          {"backward_ms", it.backward_ms},
          {"during_backward_ms", it.during_backward_ms},
          {"backlog_ms", it.backlog_ms},
          {"at_step_ms", it.at_step_ms},
          {"exposed_ms", it.exposed_ms},
          {"exposed_abort_ms", it.exposed_abort_ms},
          {"iteration_ms", it.iteration_ms},
          {"iteration_abort_ms", it.iteration_abort_ms},
          {"tokens_per_s", it.tokens_per_s},
          {"mfu", it.mfu}};
}

json PointJson(const FractionPoint& p) {
  return {{"fraction", p.fraction},
          {"hot_elements", p.hot_elements},
          {"cold_elements", p.cold_elements},
          {"gpu_bytes", BreakdownJson(p.gpu)},
          {"host_bytes_per_rank", BreakdownJson(p.host)},
          {"host_bytes_per_node", p.host_node_bytes},
          {"fits_gpu", p.fits_gpu},
          {"fits_host", p.fits_host},
          {"step_ms",
           {{"prepass", p.time.prepass_ms},
            {"gpu", p.time.gpu_ms},
            {"d2h", p.time.d2h_ms},
            {"host", p.time.host_ms},
            {"h2d", p.time.h2d_ms},
            {"fill", p.time.fill_ms},
            {"pipeline", p.time.pipeline_ms},
            // Note [Fixed step cost]: 0 where the profile lacks the part.
            {"engine_overhead", p.time.engine_overhead_ms},
            {"binding_overhead", p.time.binding_overhead_ms},
            {"step", p.time.step_ms}}},
          {"bottleneck", Name(p.time.bottleneck)},
          // tandem::PredictSplit's terms at the share (no prepass, fill or chunk overhead).
          {"compute_split",
           {{"share", p.time.split.share},
            {"streamed_elements", p.time.streamed},
            {"host_computed_elements", p.cold_elements - p.time.streamed},
            {"bound", p.cold_elements > 0 ? p.time.split.bound() : "none"},
            {"auto_fell_back_to_host", p.split_fallback},
            {"d2h_ms", p.time.split.down_ms},
            {"h2d_ms", p.time.split.up_ms},
            {"host_ms", p.time.split.host_ms},
            {"gpu_ms", p.time.split.gpu_ms},
            {"step_ms", p.time.split.step_ms}}},
          {"grad_release", p.grad_release},
          {"speculated_elements", {{"host", p.speculated_host}, {"streamed", p.speculated_streamed}}},
          {"iteration", IterationJson(p.iteration)}};
}

// OptimizerKwargs as a JSON object, typed.
json KwargsJson(const PlanInputs& in, const FractionPoint& p) {
  json j = json::object();
  for (const OptimizerKwarg& k : OptimizerKwargs(in, p)) {
    switch (k.kind) {
      case OptimizerKwarg::Kind::kBool:
        j[k.name] = k.boolean;
        break;
      case OptimizerKwarg::Kind::kInteger:
        j[k.name] = k.integer;
        break;
      case OptimizerKwarg::Kind::kNumber:
        j[k.name] = k.number;
        break;
      case OptimizerKwarg::Kind::kString:
        j[k.name] = k.text;
        break;
    }
  }
  return j;
}

}  // namespace

std::string PlanToJson(const PlanResult& plan) {
  const PlanInputs& in = plan.inputs;
  json sweep = json::array();
  for (const FractionPoint& p : plan.sweep) sweep.push_back(PointJson(p));
  json j = {
      {"schema", "tandem-plan/1"},
      {"version", kVersion},
      {"model",
       {{"name", in.model.name},
        {"notes", in.model.notes},
        {"architecture", in.model.architecture},
        {"params", in.model.total_params()},
        {"tensors", in.model.tensors.size()},
        {"largest_layer_params", in.model.largest_layer_params()}}},
      {"optimizer",
       {{"algorithm", Name(in.algorithm)},
        {"master", Name(in.formats.master)},
        {"momentum", Name(in.formats.momentum)},
        {"variance", Name(in.formats.variance)},
        {"param_dtype", Name(in.param_dtype)},
        {"grad_dtype", Name(in.grad_dtype)},
        {"grad_release", Name(in.grad_release)},
        {"speculative_early_start", in.speculative_early_start},
        {"zero1_sharding", in.zero1_sharding},
        {"fsdp2", in.fsdp2},
        {"placement", Name(in.placement)},
        {"offload_compute", OffloadComputeName(in.offload_compute)},
        {"stream_chunk_bytes", in.stream_chunk_bytes},
        {"stream_slots", in.stream_slots}}},
      {"ranks",
       {{"gpus_per_node", in.gpus_per_node},
        {"nodes", in.nodes},
        {"total", plan.ranks},
        {"shard_size", plan.shard_size},
        {"shard_elements", plan.shard_elements}}},
      {"fsdp2", in.fsdp2 ? json{{"shard_size", plan.shard_size},
                                {"replicas", plan.ranks / plan.shard_size},
                                {"blocks_in_flight", in.fsdp2_blocks_in_flight},
                                {"f32_moment_tensors", plan.f32_moment_tensors},
                                {"f32_moment_elements", plan.f32_moment_elements}}
                         : json(nullptr)},
      {"budgets",
       {{"gpu_bytes", in.gpu_budget},
        {"gpu_headroom_fraction", in.gpu_headroom_fraction},
        {"gpu_headroom_bytes", in.gpu_headroom_bytes},
        {"usable_gpu_bytes", plan.usable_gpu_bytes},
        {"host_bytes_per_node", in.host_budget}}},
      {"activation_bytes", plan.activation_bytes},
      {"activations",
       {{"bytes", plan.activation_bytes},
        {"source", in.activation_bytes_given         ? "given"
                   : in.activation_shape.seq_len > 0 ? "estimated"
                                                     : "none"},
        {"attention", Name(in.activation_shape.attention)},
        {"recompute", Name(in.recompute)},
        {"model", Name(plan.activation_model)},
        // The phases of the transformers model (docs/planner.md "Activations"); null with
        // megatron's.
        {"transformers",
         plan.activation_model == ActivationModel::kTransformers
             ? json{{"peak_in", plan.transformers_activations.where()},
                    {"layer", plan.transformers_activations.layer},
                    {"kept", plan.transformers_activations.kept},
                    {"shared", plan.transformers_activations.shared},
                    {"logits", plan.transformers_activations.logits},
                    {"loss", plan.transformers_activations.loss},
                    {"final_norm", plan.transformers_activations.final_norm},
                    {"mlp", plan.transformers_activations.mlp},
                    {"attention", plan.transformers_activations.attention}}
             : json(nullptr)}}},
      // Counted in every point's GPU bytes as "runtime" (docs/planner.md "Runtime").
      {"runtime",
       {{"cuda_context_bytes", in.cuda_context_bytes},
        {"allocator_round_bytes", in.allocator_round_bytes},
        {"allocator_fragmentation", in.allocator_fragmentation}}},
      {"would_fit", plan.would_fit},
      // What this version of the engine can run; the plan is a what-if where it is used.
      {"available", {{"grad_release", true}, {"zero1_sharding", false}, {"fsdp2", true}}},
      {"training",
       plan.iteration_modelled
           ? json{{"hardware_flops", plan.flops.hardware()},
                  {"model_flops", plan.flops.model()},
                  {"tokens", plan.flops.tokens},
                  {"matmul_params", plan.flops.matmul_params},
                  {"train_tflops", plan.train_tflops},
                  {"train_tflops_source", plan.train_source},
                  {"peak_tflops", plan.peak_tflops},
                  {"peak_tflops_source", plan.peak_source}}
           : json(nullptr)},
      {"gpu_bytes_with_release", plan.gpu_bytes_with_release},
      {"gpu_bytes_without_release", plan.gpu_bytes_without_release},
      {"runnable", plan.runnable},
      {"profile",
       {{"machine", in.profile.machine},
        {"builtin_default", in.profile.builtin_default},
        {"gpu_gparams_per_s", plan.rates.gpu_gparams_per_s},
        {"gpu_rate_source", plan.rates.gpu_source},
        {"host_gparams_per_s", plan.rates.host_gparams_per_s},
        {"host_rate_source", plan.rates.host_source},
        {"bytes_per_element", plan.rates.gpu_bytes_per_element},
        {"stream_bytes_per_element", plan.rates.stream_bytes_per_element},
        {"prepass_gparams_per_s", plan.rates.prepass_gparams_per_s},
        {"prepass_source", plan.rates.prepass_source},
        {"step_overhead",
         {{"engine",
           {{"measured", in.profile.step_overhead.engine.measured},
            {"per_step_ms", in.profile.step_overhead.engine.per_step_ms},
            {"per_tensor_us", in.profile.step_overhead.engine.per_tensor_us},
            {"source", plan.rates.engine_overhead_source}}},
          {"binding",
           {{"measured", in.profile.step_overhead.binding.measured},
            {"per_step_ms", in.profile.step_overhead.binding.per_step_ms},
            {"per_tensor_us", in.profile.step_overhead.binding.per_tensor_us},
            {"source", plan.rates.binding_overhead_source}}}}},
        // The compute-split model's rates (tandem::MachineRates for this rank).
        {"machine_rates",
         {{"h2d_gbps", plan.rates.machine.h2d_gbps},
          {"d2h_gbps", plan.rates.machine.d2h_gbps},
          {"host_gparams", plan.rates.machine.host_gparams},
          {"gpu_gparams", plan.rates.machine.gpu_gparams},
          {"pcie_source", plan.rates.pcie_source},
          {"dram_gbps", plan.rates.dram_gbps},
          {"dram_source", plan.rates.dram_source},
          {"host_source", plan.rates.host_dma_source}}}}},
      {"feasible", plan.feasible},
      {"min_fraction", plan.min_fraction},
      {"max_host_fraction", plan.max_host_fraction},
      {"gpu_short_bytes", plan.gpu_short_bytes},
      {"host_short_bytes", plan.host_short_bytes},
      {"monotone", plan.monotone},
      {"recommended", PointJson(plan.recommended)},
      // The recommended point as tandem.torch's optimizer runs it: its class and keyword
      // arguments (null when the plan does not fit or this version cannot run it).
      {"optimizer_class", OptimizerClassName(in.algorithm)},
      {"optimizer_kwargs", plan.feasible && plan.runnable ? KwargsJson(in, plan.recommended)
                                                          : json(nullptr)},
      {"sweep", sweep},
      {"messages", plan.messages},
  };
  return j.dump(2) + "\n";
}

}  // namespace tandem::planner
