// tandem-plan's command line as a function (tools/plan/cli.h): CLI11 over the options of
// tools/plan/options.h, with their rules from the same tables the Python binding checks.
#include "tools/plan/cli.h"

#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "tandem/error.h"
#include "tandem/planner.h"
#include "tandem/version.h"
#include "tools/common/output_file.h"
#include "tools/plan/options.h"

namespace {

using namespace tandem;
using namespace tandem::planner;

// --svg is checked before the plan is made: a writable place that is none of the inputs.
void CheckSvg(const std::string& svg, const PlanOptions& a) {
  if (svg.empty()) return;
  std::vector<tools::NamedPath> inputs = {
      {"--config", a.config}, {"--params-json", a.params_json}, {"--profile", a.profile}};
  if (!a.config.empty()) inputs.push_back({"--config", a.config + "/config.json"});
  tools::CheckOutputFile("--svg", svg, inputs);
}

}  // namespace

namespace tandem::planner {

int RunPlanCli(const std::vector<std::string>& args, std::string* out, std::string* err) {
  std::ostringstream o, e;
  const int rc = [&]() -> int {
  CLI::App app{"tandem-plan: memory-budget planner for Tandem's hybrid GPU/host optimizer step"};
  PlanOptions a;
  auto* model = app.add_option_group("model", "the model (exactly one)");
  model->add_option("--params", a.params, "parameter count, e.g. 8e9 or 7.5B (one flat tensor)");
  model
      ->add_option("--config", a.config,
                   "Hugging Face config.json or a model directory holding one (Llama, Mistral, "
                   "Qwen2, Qwen3, Gemma 2, Gemma 3, Mixtral, Qwen2-MoE, Qwen3-MoE, "
                   "DeepSeek-V2/V3, GPT-2); with --params-json, the tensor list's shape")
      ->check(CLI::ExistingPath);
  std::string presets;
  for (const std::string& p : PlanPresetNames()) presets += (presets.empty() ? "" : ", ") + p;
  model->add_option("--model", a.model, "preset: " + presets);
  model
      ->add_option("--params-json", a.params_json,
                   "tensor list: JSON [{\"name\", \"shape\", \"dtype\"}, ...] (with --config "
                   "for its transformer shape)")
      ->check(CLI::ExistingFile);
  // One model; --config may also give a tensor list its transformer shape.
  model->require_option(0, 2);
  app.add_flag("--largest", a.largest,
               "instead of a model: the largest Llama-3-shaped model that fits, per width "
               "(docs/planner.md \"The largest model\")");
  app.set_version_flag("--version", std::string("tandem-plan ") + tandem::kVersion);
  app.add_flag("--include-mtp", a.include_mtp,
               "DeepSeek-V3: count the multi-token-prediction modules");
  app.add_option("--pieces", a.pieces, "with --params: split into this many equal tensors");
  app.add_option("--gpu-mem", a.gpu_mem,
                 "GPU memory budget per GPU with a unit (80GiB, 141GB, ...)")
      ->required();
  app.add_option("--headroom", a.headroom,
                 "GPU memory kept free for what the plan does not count (NCCL, other "
                 "processes): a percentage of --gpu-mem (5%) or a size (4GiB)")
      ->capture_default_str();
  app.add_option("--attention", a.attention,
                 "activation estimate: flash (no s x s scores kept) | eager")
      ->capture_default_str();
  app.add_option("--activation-model", a.activation_model,
                 "activation estimate: transformers (Hugging Face transformers' implementation, "
                 "measured) | megatron (Korthikanti's formula) | auto (transformers for a "
                 "--config model, megatron otherwise)")
      ->capture_default_str();
  app.add_option("--host-mem", a.host_mem, "host memory budget per node (512GiB, ...)")->required();
  app.add_option("--activations", a.activations, "activation memory per GPU (20GiB)");
  app.add_option("--batch", a.batch, "micro-batch per GPU for the estimate");
  app.add_option("--seq", a.seq, "sequence length for the activation estimate");
  app.add_option("--recompute", a.recompute, "none | selective | full");
  app.add_option("--algo", a.algo, "adamw | adam | lion | sgd")->capture_default_str();
  app.add_option("--master", a.master, "f32 | bf16 | bf16+ecc8 | bf16+ecc16")
      ->capture_default_str();
  app.add_option("--m", a.m, "first moment: f32 | q8")->capture_default_str();
  app.add_option("--v", a.v, "second moment: f32 | q8")->capture_default_str();
  app.add_option("--param-dtype", a.param_dtype, "f32 | bf16 | f16")->capture_default_str();
  app.add_option("--grad-dtype", a.grad_dtype, "f32 | bf16 | f16")->capture_default_str();
  app.add_option("--momentum", a.momentum, "SGD momentum (0: no buffer)")->capture_default_str();
  app.add_flag("--grad-release{on}", a.grad_release,
               "gradient release (release_grads=True): each gradient leaves the GPU as the "
               "engine takes it in backward; --grad-release=off: never; default auto: the "
               "plan picks where it fits or runs faster");
  // Not available in this version: accepted only to say so (exit status 2).
  app.add_flag("--zero1", a.zero1, "not available in this version (--fsdp2 shards the state)");
  app.add_flag("--speculative-early-start", a.speculative_early_start,
                            "the optimizer speculates during backward (BeginStep): adds its "
                            "host backups and, for streamed chunks, GPU room for their "
                            "parameters");
  app.add_option("--speculative-host-bytes", a.speculative_host_bytes,
                 "speculation budget per rank: host-computed state backed up (default: "
                 "what fits and backward covers, or all without --seq; 0: all, as the engine "
                 "reads it)");
  app.add_option("--speculative-stream-bytes", a.speculative_stream_bytes,
                 "speculation budget per rank: streamed state backed up (default: what fits "
                 "and backward covers, or 1GiB without --seq)");
  app.add_option("--in-place-grad-bytes", a.in_place_grad_bytes,
                 "with --grad-release: handed-over gradient bytes kept on the GPU for the "
                 "speculative kernels to read in place (in_place_grad_bytes; default 0)");
  app.add_option("--fraction", a.fraction,
                 "plan at this offload fraction (a run's own) instead of choosing one");
  app.add_option("--train-tflops", a.train_tflops,
                 "training throughput of forward + backward, TFLOP/s of hardware work "
                 "(default: the profile's, else built-in)");
  app.add_option("--gpus-per-node", a.gpus_per_node, "data-parallel GPUs per node")
      ->capture_default_str();
  app.add_option("--nodes", a.nodes, "nodes")->capture_default_str();
  app.add_flag("--fsdp2", a.fsdp2,
                             "FSDP2: weights, gradients and optimizer state sharded over the "
                             "ranks (per-rank figures; docs/planner.md \"FSDP2\")");
  app.add_option("--shard-size", a.shard_size,
                 "with --fsdp2: ranks each tensor is sharded over (HSDP; a divisor of the "
                 "ranks; default all ranks)");
  app.add_option("--blocks-in-flight", a.blocks_in_flight,
                 "with --fsdp2: blocks whose parameters and gradients are unsharded at once")
      ->capture_default_str();
  app.add_option("--profile", a.profile,
                 "calibration profile (tandem-profile/1 JSON), or a built-in one: h200, "
                 "grace-hopper (published GH200 figures)");
  app.add_option("--policy", a.policy, "backward_order | forward_order | largest_first")
      ->capture_default_str();
  app.add_option("--chunk-elements", a.chunk_elements, "offload pipeline chunk")
      ->capture_default_str();
  app.add_option("--slots", a.slots, "pinned pipeline slots")->capture_default_str();
  app.add_option("--offload-compute", a.offload_compute,
                 "where the offloaded elements are computed: auto (the modelled best split), "
                 "host, gpu (state streamed to the GPU), or a share in [0, 1]")
      ->capture_default_str();
  app.add_option("--stream-chunk", a.stream_chunk,
                 "streaming: the most state bytes one chunk moves each way")
      ->capture_default_str();
  app.add_option("--stream-slots", a.stream_slots, "streaming: GPU slots chunks rotate through")
      ->capture_default_str();
  bool json = false;
  std::string svg;
  app.add_flag("--json", json, "print the plan as JSON instead of text");
  app.add_option("--svg", svg, "write an SVG chart of memory and step time vs fraction");
  // The rules between the options, as the Python binding checks them (tools/plan/options.h).
  auto opt = [&](const char* name) { return app.get_option(std::string("--") + name); };
  for (const OptionNeeds& n : PlanOptionNeeds()) opt(n.option)->needs(opt(n.needs));
  for (const OptionNeeds& x : PlanOptionExcludes()) opt(x.option)->excludes(opt(x.needs));
  for (const OptionRange& r : PlanOptionRanges()) opt(r.option)->check(CLI::Range(r.lo, r.hi));
  for (const OptionChoices& c : PlanOptionChoices()) {
    if (std::string(c.option) == "profile")
      opt(c.option)->check(CLI::IsMember(c.choices) | CLI::ExistingFile);
    else
      opt(c.option)->check(CLI::IsMember(c.choices));
  }
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11's order
    app.parse(reversed);
  } catch (const CLI::ParseError& pe) {
    const int rc = app.exit(pe, o, e);
    return rc == 0 ? 0 : 2;
  }
  for (const std::string& name : PlanOptionNames())
    if (app.count("--" + name) > 0) a.given.insert(name);
  std::string problem = PlanOptionsProblem(a);
  if (problem.empty() && a.largest && !svg.empty())
    problem = "--svg draws one plan; not with --largest";
  if (!problem.empty()) {
    e << "tandem-plan: " << problem << "\n";
    return 2;
  }
  if (a.largest) {
    try {
      const LargestResult r = FindLargest(PlanInputsFrom(a));
      o << (json ? LargestToJson(r) : LargestToText(r));
      return r.best >= 0 ? 0 : 1;
    } catch (const tandem::Error& x) {
      e << "tandem-plan: " << x.what() << "\n";
      return 2;
    }
  }
  PlanResult plan;
  try {
    CheckSvg(svg, a);
    plan = MakePlan(PlanInputsFrom(a));
  } catch (const tandem::Error& x) {
    e << "tandem-plan: " << x.what() << "\n";
    return 2;
  }
  if (!svg.empty()) {
    try {
      tools::WriteFileAtomically(svg, PlanToSvg(plan));
    } catch (const tandem::Error& x) {
      e << "tandem-plan: cannot write the chart: " << x.what() << "\n";
      return 3;
    }
  }
  o << (json ? PlanToJson(plan) : PlanToText(plan));
  if (!svg.empty() && !json) o << "chart written to " << svg << "\n";
  return plan.feasible ? 0 : 1;
  }();
  *out = o.str();
  *err = e.str();
  return rc;
}

}  // namespace tandem::planner
