// tandem-plan's command line as a function (tools/plan/cli.h): the executable and the
// Python entry point tandem.plan run the same code.
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

namespace {

using namespace tandem;
using namespace tandem::planner;

// "fp32"/"float32" are accepted for the library's "f32".
std::string Canon(std::string s) {
  if (s == "fp32" || s == "float32") return "f32";
  if (s == "bfloat16") return "bf16";
  if (s == "fp16" || s == "float16") return "f16";
  return s;
}

struct Args {
  std::string params, config, model, params_json;
  bool include_mtp = false;
  std::string headroom = "5%", attention = "flash", activation_model = "auto";
  uint32_t pieces = 1;
  std::string gpu_mem, host_mem, activations;
  uint64_t batch = 1, seq = 0;
  std::string recompute = "none";
  std::string algo = "adamw", master = "bf16+ecc8", m = "q8", v = "q8";
  std::string param_dtype = "bf16", grad_dtype = "bf16";
  double momentum = 0.9;
  bool speculative = false;
  std::string grad_release = "auto";
  std::string spec_host, spec_stream, in_place;
  double train_tflops = -1;  // -1: not given
  bool largest = false;
  double fraction = -1;  // -1: choose one
  bool train_tflops_given = false, fraction_given = false;
  uint32_t gpus_per_node = 1, nodes = 1;
  bool fsdp2 = false;
  uint32_t shard_size = 0, blocks_in_flight = 2;
  std::string profile, policy = "backward_order";
  uint64_t chunk = 1 << 21;
  int slots = 4;
  std::string offload_compute = "auto", stream_chunk = "32MiB";
  int stream_slots = 3;
  bool json = false;
  std::string svg;
};

// "10%" -> a fraction of the budget; "4GiB" -> bytes.
void ParseHeadroom(const std::string& text, PlanInputs* in) {
  if (!text.empty() && text.back() == '%') {
    size_t used = 0;
    double pct = -1;
    try {
      pct = std::stod(text.substr(0, text.size() - 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size() - 1 || !(pct >= 0 && pct < 100))
      throw Error(ErrorKind::kInvalidArgument,
                  "--headroom '" + text + "': expected a percentage in [0%, 100%) or a size");
    in->gpu_headroom_fraction = pct / 100;
    in->gpu_headroom_bytes = 0;
  } else {
    size_t used = 0;
    try {
      std::stod(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used > 0 && used == text.size())
      throw Error(ErrorKind::kInvalidArgument, "--headroom '" + text +
                                                   "' has no unit: write a percentage ('" + text +
                                                   "%') or a size ('" + text + "GiB')");
    in->gpu_headroom_fraction = 0;
    in->gpu_headroom_bytes = ParseBytes(text);
  }
}

// The largest --batch and --seq the activation estimate takes.
constexpr uint64_t kMaxBatch = uint64_t{1} << 16, kMaxSeq = uint64_t{1} << 24;

// The numeric options, checked before anything is read or planned, with the messages of
// the Python binding's options (tandem/_core/options.py) where it has the same option.
void CheckNumbers(const Args& a) {
  auto bad = [](const std::string& m) { throw Error(ErrorKind::kInvalidArgument, m); };
  if (a.chunk < 32 || a.chunk % 32 != 0)
    bad("--chunk-elements must be a positive multiple of 32, got " + std::to_string(a.chunk));
  if (a.slots < 2) bad("--slots must be an integer >= 2, got " + std::to_string(a.slots));
  if (a.stream_slots < 2)
    bad("--stream-slots must be an integer >= 2, got " + std::to_string(a.stream_slots));
  if (a.batch < 1) bad("--batch must be an integer >= 1, got " + std::to_string(a.batch));
  // The activation estimate's bounds (docs/planner.md, "Limits").
  if (a.batch > kMaxBatch)
    bad("--batch " + std::to_string(a.batch) + " is more than the planner's limit of " +
        std::to_string(kMaxBatch));
  if (a.seq > kMaxSeq)
    bad("--seq " + std::to_string(a.seq) + " is more than the planner's limit of " +
        std::to_string(kMaxSeq) + " tokens");
  if (!(a.momentum >= 0 && a.momentum <= 1))
    bad("--momentum must be in [0, 1], got " + std::to_string(a.momentum));
  if (a.fraction_given && !(a.fraction >= 0 && a.fraction <= 1))
    bad("--fraction must be in [0, 1], got " + std::to_string(a.fraction));
  if (a.train_tflops_given && !(a.train_tflops > 0 && std::isfinite(a.train_tflops)))
    bad("--train-tflops must be a finite number > 0, got " + std::to_string(a.train_tflops));
}

// --svg is checked before the plan is made: a writable place that is none of the inputs.
void CheckSvg(const Args& a) {
  if (a.svg.empty()) return;
  std::vector<tools::NamedPath> inputs = {
      {"--config", a.config}, {"--params-json", a.params_json}, {"--profile", a.profile}};
  if (!a.config.empty()) inputs.push_back({"--config", a.config + "/config.json"});
  tools::CheckOutputFile("--svg", a.svg, inputs);
}

PlanInputs ToInputs(const Args& a, std::pair<bool, bool> dtypes_given) {
  PlanInputs in;
  ConfigOptions options;
  options.include_mtp = a.include_mtp;
  options.shape_only = !a.params_json.empty();  // the tensor list counts
  if (a.largest) in.model = ModelFromPreset("llama3-1b");  // FindLargest sets each shape
  if (!a.params.empty()) in.model = ModelFromParamCount(ParseCount(a.params), a.pieces);
  if (!a.config.empty()) in.model = ModelFromConfigFile(a.config, options);
  if (!a.model.empty()) in.model = ModelFromPreset(a.model);
  // A tensor list with its config: the list's tensors, the config's transformer shape.
  if (!a.params_json.empty())
    in.model = a.config.empty() ? ModelFromParamsFile(a.params_json)
                                : WithConfigShape(ModelFromParamsFile(a.params_json), in.model);
  in.gpu_budget = ParseBytes(a.gpu_mem);
  in.host_budget = ParseBytes(a.host_mem);
  ParseHeadroom(a.headroom, &in);
  if (in.gpu_headroom_bytes >= in.gpu_budget && in.gpu_headroom_bytes > 0)
    throw Error(ErrorKind::kInvalidArgument,
                "--headroom " + a.headroom + " is not less than --gpu-mem " + a.gpu_mem +
                    ": no GPU memory would be left to plan with");
  in.activation_shape.attention = ParseAttention(a.attention);
  in.activation_model = ParseActivationModel(a.activation_model);
  if (!a.activations.empty()) {
    in.activation_bytes_given = true;
    in.activation_bytes = ParseBytes(a.activations);
  } else if (a.seq > 0) {
    in.activation_shape.batch = a.batch;
    in.activation_shape.seq_len = a.seq;
    in.recompute = ParseRecompute(a.recompute);
  }
  in.algorithm = ParseAlgorithm(a.algo);
  in.formats.master = ParseMasterFormat(Canon(a.master));
  in.formats.momentum = ParseMomentFormat(Canon(a.m));
  in.formats.variance = ParseMomentFormat(Canon(a.v));
  in.param_dtype = ParseDType(Canon(a.param_dtype));
  // A tensor list says its dtype; PyTorch's gradients have their parameter's.
  if (!dtypes_given.first && in.model.dtype) in.param_dtype = *in.model.dtype;
  in.grad_dtype = ParseDType(Canon(a.grad_dtype));
  if (!dtypes_given.second && in.model.dtype) in.grad_dtype = *in.model.dtype;
  in.hyper.momentum = in.algorithm == Algorithm::kSGD ? a.momentum : 0.0;
  in.speculative_early_start = a.speculative;
  try {
    in.grad_release = ParseChoice(a.grad_release);
  } catch (const Error&) {
    throw Error(ErrorKind::kInvalidArgument,
                "--grad-release '" + a.grad_release + "': expected on, off or auto");
  }
  if (!a.spec_host.empty()) in.speculative_host_bytes = ParseBytes(a.spec_host);
  if (!a.spec_stream.empty()) in.speculative_stream_bytes = ParseBytes(a.spec_stream);
  if (!a.in_place.empty()) in.in_place_grad_bytes = ParseBytes(a.in_place);
  in.gpus_per_node = a.gpus_per_node;
  in.nodes = a.nodes;
  in.fsdp2 = a.fsdp2;
  in.shard_size = a.shard_size;
  in.fsdp2_blocks_in_flight = a.blocks_in_flight;
  in.placement = ParsePlacementPolicy(a.policy);
  in.chunk_elements = a.chunk;
  in.pipeline_slots = a.slots;
  in.offload_compute = ParseOffloadCompute(a.offload_compute);
  in.stream_chunk_bytes = ParseBytes(a.stream_chunk);
  in.stream_slots = a.stream_slots;
  in.profile = a.profile.empty() ? DefaultProfile() : ProfileByNameOrPath(a.profile);
  if (a.train_tflops > 0) in.profile.gpu.train_tflops = a.train_tflops;
  in.fraction = a.fraction;
  return in;
}

}  // namespace

namespace tandem::planner {

int RunPlanCli(const std::vector<std::string>& args, std::string* out, std::string* err) {
  std::ostringstream o, e;
  const int rc = [&]() -> int {
  CLI::App app{"tandem-plan: memory-budget planner for Tandem's hybrid GPU/host optimizer step"};
  Args a;
  auto* model = app.add_option_group("model", "the model (exactly one)");
  model->add_option("--params", a.params, "parameter count, e.g. 8e9 or 7.5B (one flat tensor)");
  model
      ->add_option("--config", a.config,
                   "Hugging Face config.json or a model directory holding one (Llama, Mistral, "
                   "Qwen2, Qwen3, Gemma 2, Gemma 3, Mixtral, Qwen2-MoE, Qwen3-MoE, "
                   "DeepSeek-V2/V3, GPT-2); with --params-json, the tensor list's shape")
      ->check(CLI::ExistingPath);
  model->add_option("--model", a.model, "preset: llama3-1b, llama3-3b, llama3-8b, llama3-70b");
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
  app.add_option("--pieces", a.pieces, "with --params: split into this many equal tensors")
      ->check(CLI::Range(1u, 1000000u));
  app.add_option("--gpu-mem", a.gpu_mem,
                 "GPU memory budget per GPU with a unit (80GiB, 141GB, ...)")
      ->required();
  app.add_option("--headroom", a.headroom,
                 "GPU memory kept free for what the plan does not count (NCCL, other "
                 "processes): a percentage of --gpu-mem (5%) or a size (4GiB)")
      ->capture_default_str();
  app.add_option("--attention", a.attention,
                 "activation estimate: flash (no s x s scores kept) | eager")
      ->check(CLI::IsMember({"flash", "eager"}))
      ->capture_default_str();
  app.add_option("--activation-model", a.activation_model,
                 "activation estimate: transformers (Hugging Face transformers' implementation, "
                 "measured) | megatron (Korthikanti's formula) | auto (transformers for a "
                 "--config model, megatron otherwise)")
      ->check(CLI::IsMember({"auto", "transformers", "megatron"}))
      ->capture_default_str();
  app.add_option("--host-mem", a.host_mem, "host memory budget per node (512GiB, ...)")->required();
  auto* act = app.add_option("--activations", a.activations, "activation memory per GPU (20GiB)");
  auto* batch = app.add_option("--batch", a.batch, "micro-batch per GPU for the estimate");
  auto* seq = app.add_option("--seq", a.seq, "sequence length for the activation estimate");
  auto* rec = app.add_option("--recompute", a.recompute, "none | selective | full")
                  ->check(CLI::IsMember({"none", "selective", "full"}));
  act->excludes(batch)->excludes(seq)->excludes(rec);
  batch->needs(seq);
  rec->needs(seq);
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
  bool zero1 = false;
  app.add_flag("--zero1", zero1, "not available in this version (--fsdp2 shards the state)");
  auto* spec = app.add_flag("--speculative-early-start", a.speculative,
                            "the optimizer speculates during backward (BeginStep): adds its "
                            "host backups and, for streamed chunks, GPU room for their "
                            "parameters");
  app.add_option("--speculative-host-bytes", a.spec_host,
                 "speculation budget per rank: host-computed state backed up (default: "
                 "what fits and backward covers, or all without --seq; 0: all, as the engine "
                 "reads it)")
      ->needs(spec);
  app.add_option("--speculative-stream-bytes", a.spec_stream,
                 "speculation budget per rank: streamed state backed up (default: what fits "
                 "and backward covers, or 1GiB without --seq)")
      ->needs(spec);
  app.add_option("--in-place-grad-bytes", a.in_place,
                 "with --grad-release: handed-over gradient bytes kept on the GPU for the "
                 "speculative kernels to read in place (in_place_grad_bytes; default 0)")
      ->needs(spec);
  app.add_option("--fraction", a.fraction,
                 "plan at this offload fraction (a run's own) instead of choosing one");
  app.add_option("--train-tflops", a.train_tflops,
                 "training throughput of forward + backward, TFLOP/s of hardware work "
                 "(default: the profile's, else built-in)");
  app.add_option("--gpus-per-node", a.gpus_per_node, "data-parallel GPUs per node")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  app.add_option("--nodes", a.nodes, "nodes")
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  auto* fsdp2 = app.add_flag("--fsdp2", a.fsdp2,
                             "FSDP2: weights, gradients and optimizer state sharded over the "
                             "ranks (per-rank figures; docs/planner.md \"FSDP2\")");
  app.add_option("--shard-size", a.shard_size,
                 "with --fsdp2: ranks each tensor is sharded over (HSDP; a divisor of the "
                 "ranks; default all ranks)")
      ->check(CLI::Range(1u, 100000000u))
      ->needs(fsdp2);
  app.add_option("--blocks-in-flight", a.blocks_in_flight,
                 "with --fsdp2: blocks whose parameters and gradients are unsharded at once")
      ->check(CLI::Range(1u, 1000u))
      ->needs(fsdp2)
      ->capture_default_str();
  app.add_option("--profile", a.profile,
                 "calibration profile (tandem-profile/1 JSON), or a built-in one: h200, "
                 "grace-hopper (published GH200 figures)")
      ->check(CLI::IsMember({"h200", "grace-hopper"}) | CLI::ExistingFile);
  app.add_option("--policy", a.policy, "backward_order | forward_order | largest_first")
      ->capture_default_str();
  app.add_option("--chunk-elements", a.chunk, "offload pipeline chunk")->capture_default_str();
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
  app.add_flag("--json", a.json, "print the plan as JSON instead of text");
  app.add_option("--svg", a.svg, "write an SVG chart of memory and step time vs fraction");
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11's order
    app.parse(reversed);
  } catch (const CLI::ParseError& pe) {
    const int rc = app.exit(pe, o, e);
    return rc == 0 ? 0 : 2;
  }
  if (zero1) {
    e << "tandem-plan: --zero1 is not available in this version (--fsdp2 plans FSDP2, which "
         "shards the optimizer state); plan without it\n";
    return 2;
  }
  const int models = !a.params.empty() + !a.config.empty() + !a.model.empty() +
                     !a.params_json.empty();
  if (models == 2 && (a.config.empty() || a.params_json.empty())) {
    e << "tandem-plan: give one model: --model, --config, --params or --params-json (only "
         "--config may come with --params-json, giving the tensor list its shape)\n";
    return 2;
  }
  const bool has_model = models > 0;
  a.train_tflops_given = app.count("--train-tflops") > 0;
  a.fraction_given = app.count("--fraction") > 0;
  try {
    CheckNumbers(a);
  } catch (const tandem::Error& x) {
    e << "tandem-plan: " << x.what() << "\n";
    return 2;
  }
  if (has_model == a.largest) {
    e << "tandem-plan: " << (a.largest ? "--largest searches the model: give no --model, "
                                         "--config, --params or --params-json with it"
                                       : "give the model: --model, --config, --params or "
                                         "--params-json (or --largest)")
      << "\n";
    return 2;
  }
  if (a.largest) {
    if (!a.svg.empty()) {
      e << "tandem-plan: --svg draws one plan; not with --largest\n";
      return 2;
    }
    try {
      const LargestResult r =
          FindLargest(ToInputs(a, {app.count("--param-dtype") > 0, app.count("--grad-dtype") > 0}));
      o << (a.json ? LargestToJson(r) : LargestToText(r));
      return r.best >= 0 ? 0 : 1;
    } catch (const tandem::Error& x) {
      e << "tandem-plan: " << x.what() << "\n";
      return 2;
    }
  }
  PlanResult plan;
  try {
    CheckSvg(a);
    plan = MakePlan(ToInputs(a, {app.count("--param-dtype") > 0, app.count("--grad-dtype") > 0}));
  } catch (const tandem::Error& x) {
    e << "tandem-plan: " << x.what() << "\n";
    return 2;
  }
  if (!a.svg.empty()) {
    try {
      tools::WriteFileAtomically(a.svg, PlanToSvg(plan));
    } catch (const tandem::Error& x) {
      e << "tandem-plan: cannot write the chart: " << x.what() << "\n";
      return 3;
    }
  }
  o << (a.json ? PlanToJson(plan) : PlanToText(plan));
  if (!a.svg.empty() && !a.json) o << "chart written to " << a.svg << "\n";
  return plan.feasible ? 0 : 1;
  }();
  *out = o.str();
  *err = e.str();
  return rc;
}

}  // namespace tandem::planner
