// tandem-plan's options as data (tools/plan/options.h).
#include "tools/plan/options.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "tandem/error.h"

namespace tandem::planner {
namespace {

// "fp32"/"float32" are accepted for the library's "f32".
std::string Canon(std::string s) {
  if (s == "fp32" || s == "float32") return "f32";
  if (s == "bfloat16") return "bf16";
  if (s == "fp16" || s == "float16") return "f16";
  return s;
}

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
// the Python binding's options (tandem/_options.py) where it has the same option.
void CheckNumbers(const PlanOptions& a) {
  auto bad = [](const std::string& m) { throw Error(ErrorKind::kInvalidArgument, m); };
  if (a.chunk_elements < 32 || a.chunk_elements % 32 != 0)
    bad("--chunk-elements must be a positive multiple of 32, got " + std::to_string(a.chunk_elements));
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
  if (a.given.count("fraction") && !(a.fraction >= 0 && a.fraction <= 1))
    bad("--fraction must be in [0, 1], got " + std::to_string(a.fraction));
  if (a.given.count("train-tflops") && !(a.train_tflops > 0 && std::isfinite(a.train_tflops)))
    bad("--train-tflops must be a finite number > 0, got " + std::to_string(a.train_tflops));
}

template <typename T>
void Convert(const std::string& name, const std::string& text, T* out) {
  if (!CLI::detail::lexical_cast(text, *out))
    throw Error(ErrorKind::kInvalidArgument, "Could not convert: --" + name + " = " + text);
}

bool Given(const PlanOptions& o, const std::string& name) { return o.given.count(name) > 0; }

[[noreturn]] void Bad(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, message);
}

}  // namespace

std::vector<std::string> PlanPresetNames() {
  return {"llama3-1b", "llama3-3b", "llama3-8b", "llama3-70b"};
}

const std::vector<PlanOptionSpec>& PlanOptionSpecs() {
  using K = PlanOptionSpec::Kind;
  using P = PlanOptions;
  static const std::vector<PlanOptionSpec> specs = [] {
    std::string presets;
    for (const std::string& p : PlanPresetNames()) presets += (presets.empty() ? "" : ", ") + p;
    return std::vector<PlanOptionSpec>{
        {"params", &P::params, K::kModel, "parameter count, e.g. 8e9 or 7.5B (one flat tensor)"},
        {"config", &P::config, K::kModel,
         "Hugging Face config.json or a model directory holding one (Llama, Mistral, Qwen2, "
         "Qwen3, Gemma 2, Gemma 3, Mixtral, Qwen2-MoE, Qwen3-MoE, DeepSeek-V2/V3, GPT-2); with "
         "--params-json, the tensor list's shape"},
        {"model", &P::model, K::kModel, "preset: " + presets},
        {"params-json", &P::params_json, K::kModel,
         "tensor list: JSON [{\"name\", \"shape\", \"dtype\"}, ...] (with --config for its "
         "transformer shape)"},
        {"largest", &P::largest, K::kFlag,
         "instead of a model: the largest Llama-3-shaped model that fits, per width "
         "(docs/planner.md \"The largest model\")"},
        {"include-mtp", &P::include_mtp, K::kFlag,
         "DeepSeek-V3: count the multi-token-prediction modules"},
        {"pieces", &P::pieces, K::kOption, "with --params: split into this many equal tensors"},
        {"gpu-mem", &P::gpu_mem, K::kRequired,
         "GPU memory budget per GPU with a unit (80GiB, 141GB, ...)"},
        {"headroom", &P::headroom, K::kShowDefault,
         "GPU memory kept free for what the plan does not count (NCCL, other processes): a "
         "percentage of --gpu-mem (5%) or a size (4GiB)"},
        {"attention", &P::attention, K::kShowDefault,
         "activation estimate: flash (no s x s scores kept) | eager"},
        {"activation-model", &P::activation_model, K::kShowDefault,
         "activation estimate: transformers (Hugging Face transformers' implementation, "
         "measured) | megatron (Korthikanti's formula) | auto (transformers for a --config "
         "model, megatron otherwise)"},
        {"host-mem", &P::host_mem, K::kRequired, "host memory budget per node (512GiB, ...)"},
        {"activations", &P::activations, K::kOption, "activation memory per GPU (20GiB)"},
        {"batch", &P::batch, K::kOption, "micro-batch per GPU for the estimate"},
        {"seq", &P::seq, K::kOption, "sequence length for the activation estimate"},
        {"recompute", &P::recompute, K::kOption, "none | selective | full"},
        {"algo", &P::algo, K::kShowDefault, "adamw | adam | lion | sgd"},
        {"master", &P::master, K::kShowDefault, "f32 | bf16 | bf16+ecc8 | bf16+ecc16"},
        {"m", &P::m, K::kShowDefault, "first moment: f32 | q8"},
        {"v", &P::v, K::kShowDefault, "second moment: f32 | q8"},
        {"param-dtype", &P::param_dtype, K::kShowDefault, "f32 | bf16 | f16"},
        {"grad-dtype", &P::grad_dtype, K::kShowDefault, "f32 | bf16 | f16"},
        {"momentum", &P::momentum, K::kShowDefault, "SGD momentum (0: no buffer)"},
        {"grad-release", &P::grad_release, K::kFlagOn,
         "gradient release (release_grads=True): each gradient leaves the GPU as the engine "
         "takes it in backward; --grad-release=off: never; default auto: the plan picks where "
         "it fits or runs faster"},
        // Not available in this version: accepted only to say so (exit status 2).
        {"zero1", &P::zero1, K::kFlag, "not available in this version (--fsdp2 shards the state)"},
        {"speculative-early-start", &P::speculative_early_start, K::kFlag,
         "the optimizer speculates during backward (BeginStep): adds its host backups and, for "
         "streamed chunks, GPU room for their parameters"},
        {"speculative-host-bytes", &P::speculative_host_bytes, K::kOption,
         "speculation budget per rank: host-computed state backed up (default: what fits and "
         "backward covers, or all without --seq; 0: all, as the engine reads it)"},
        {"speculative-stream-bytes", &P::speculative_stream_bytes, K::kOption,
         "speculation budget per rank: streamed state backed up (default: what fits and "
         "backward covers, or 1GiB without --seq)"},
        {"in-place-grad-bytes", &P::in_place_grad_bytes, K::kOption,
         "with --grad-release: handed-over gradient bytes kept on the GPU for the speculative "
         "kernels to read in place (in_place_grad_bytes; default 0)"},
        {"fraction", &P::fraction, K::kOption,
         "plan at this offload fraction (a run's own) instead of choosing one"},
        {"train-tflops", &P::train_tflops, K::kOption,
         "training throughput of forward + backward, TFLOP/s of hardware work (default: the "
         "profile's, else built-in)"},
        {"gpus-per-node", &P::gpus_per_node, K::kShowDefault, "data-parallel GPUs per node"},
        {"nodes", &P::nodes, K::kShowDefault, "nodes"},
        {"fsdp2", &P::fsdp2, K::kFlag,
         "FSDP2: weights, gradients and optimizer state sharded over the ranks (per-rank "
         "figures; docs/planner.md \"FSDP2\")"},
        {"shard-size", &P::shard_size, K::kOption,
         "with --fsdp2: ranks each tensor is sharded over (HSDP; a divisor of the ranks; "
         "default all ranks)"},
        {"blocks-in-flight", &P::blocks_in_flight, K::kShowDefault,
         "with --fsdp2: blocks whose parameters and gradients are unsharded at once"},
        {"profile", &P::profile, K::kOption,
         "calibration profile (tandem-profile/1 JSON), or a built-in one: h200, grace-hopper "
         "(published GH200 figures)"},
        {"policy", &P::policy, K::kShowDefault, "backward_order | forward_order | largest_first"},
        {"chunk-elements", &P::chunk_elements, K::kShowDefault, "offload pipeline chunk"},
        {"slots", &P::slots, K::kShowDefault, "pinned pipeline slots"},
        {"offload-compute", &P::offload_compute, K::kShowDefault,
         "where the offloaded elements are computed: auto (the modelled best split), host, gpu "
         "(state streamed to the GPU), or a share in [0, 1]"},
        {"stream-chunk", &P::stream_chunk, K::kShowDefault,
         "streaming: the most state bytes one chunk moves each way"},
        {"stream-slots", &P::stream_slots, K::kShowDefault,
         "streaming: GPU slots chunks rotate through"}};
  }();
  return specs;
}

const PlanOptionSpec* FindPlanOption(const std::string& name) {
  for (const PlanOptionSpec& s : PlanOptionSpecs())
    if (name == s.name) return &s;
  return nullptr;
}

bool IsPlanFlag(const std::string& name) {
  const PlanOptionSpec* s = FindPlanOption(name);
  return s != nullptr && s->kind == PlanOptionSpec::Kind::kFlag;
}

void SetPlanOption(PlanOptions* o, const std::string& name, const std::string& text) {
  const PlanOptionSpec* spec = FindPlanOption(name);
  if (spec == nullptr) Bad("tandem-plan has no option --" + name);
  if (spec->kind == PlanOptionSpec::Kind::kFlag) {
    bool on = false;
    if (text == "true") {
      on = true;
    } else if (text != "false") {
      Bad("--" + name + " is a flag: it takes true or false, got " + text);
    }
    o->*std::get<bool PlanOptions::*>(spec->field) = on;
    if (on) o->given.insert(name);
    return;
  }
  std::visit(
      [&](auto field) {
        using T = std::remove_reference_t<decltype(o->*field)>;
        if constexpr (std::is_same_v<T, std::string>)
          o->*field = text;
        else
          Convert(name, text, &(o->*field));
      },
      spec->field);
  o->given.insert(name);
}

const std::vector<OptionNeeds>& PlanOptionNeeds() {
  static const std::vector<OptionNeeds> needs = {
      {"batch", "seq"},
      {"recompute", "seq"},
      {"speculative-host-bytes", "speculative-early-start"},
      {"speculative-stream-bytes", "speculative-early-start"},
      {"in-place-grad-bytes", "speculative-early-start"},
      {"shard-size", "fsdp2"},
      {"blocks-in-flight", "fsdp2"}};
  return needs;
}

const std::vector<OptionNeeds>& PlanOptionExcludes() {
  static const std::vector<OptionNeeds> excludes = {
      {"activations", "batch"}, {"activations", "seq"}, {"activations", "recompute"}};
  return excludes;
}

const std::vector<OptionRange>& PlanOptionRanges() {
  static const std::vector<OptionRange> ranges = {{"pieces", 1, 1000000},
                                                  {"gpus-per-node", 1, 1024},
                                                  {"nodes", 1, 100000},
                                                  {"shard-size", 1, 100000000},
                                                  {"blocks-in-flight", 1, 1000}};
  return ranges;
}

const std::vector<OptionChoices>& PlanOptionChoices() {
  static const std::vector<OptionChoices> choices = {
      {"attention", {"flash", "eager"}},
      {"activation-model", {"auto", "transformers", "megatron"}},
      {"recompute", {"none", "selective", "full"}},
      {"profile", {"h200", "grace-hopper"}}};
  return choices;
}

void CheckPlanOptionRules(const PlanOptions& o) {
  namespace fs = std::filesystem;
  for (const OptionNeeds& n : PlanOptionNeeds())
    if (Given(o, n.option) && !Given(o, n.needs))
      Bad(std::string("--") + n.option + " requires --" + n.needs);
  for (const OptionNeeds& x : PlanOptionExcludes())
    if (Given(o, x.option) && Given(o, x.needs))
      Bad(std::string("--") + x.option + " excludes --" + x.needs);
  for (const OptionRange& r : PlanOptionRanges()) {
    if (!Given(o, r.option)) continue;
    const std::string name = r.option;
    const uint32_t v = o.*std::get<uint32_t PlanOptions::*>(FindPlanOption(name)->field);
    if (v < r.lo || v > r.hi)
      Bad("--" + name + ": Value " + std::to_string(v) + " not in range " +
          std::to_string(r.lo) + " to " + std::to_string(r.hi));
  }
  for (const OptionChoices& c : PlanOptionChoices()) {
    if (!Given(o, c.option)) continue;
    const std::string name = c.option;
    const std::string& v = o.*std::get<std::string PlanOptions::*>(FindPlanOption(name)->field);
    bool member = false;
    std::string set;
    for (const std::string& choice : c.choices) {
      member = member || v == choice;
      set += (set.empty() ? "" : ",") + choice;
    }
    if (member) continue;
    if (name != "profile") Bad("--" + name + ": " + v + " not in {" + set + "}");
    std::error_code ec;
    if (!fs::is_regular_file(v, ec))
      Bad("--profile: (" + v + " not in {" + set + "}) OR (File does not exist: " + v + ")");
  }
  std::error_code ec;
  if (Given(o, "config") && !fs::exists(o.config, ec))
    Bad("--config: Path does not exist: " + o.config);
  if (Given(o, "params-json") && !fs::is_regular_file(o.params_json, ec))
    Bad("--params-json: File does not exist: " + o.params_json);
}

std::string PlanOptionsProblem(const PlanOptions& a) {
  if (a.zero1)
    return "--zero1 is not available in this version (--fsdp2 plans FSDP2, which shards the "
           "optimizer state); plan without it";
  const int models = !a.params.empty() + !a.config.empty() + !a.model.empty() +
                     !a.params_json.empty();
  if (models == 2 && (a.config.empty() || a.params_json.empty()))
    return "give one model: --model, --config, --params or --params-json (only --config may "
           "come with --params-json, giving the tensor list its shape)";
  try {
    CheckNumbers(a);
  } catch (const Error& x) {
    return x.what();
  }
  if ((models > 0) == a.largest)
    return a.largest ? "--largest searches the model: give no --model, --config, --params or "
                       "--params-json with it"
                     : "give the model: --model, --config, --params or --params-json (or "
                       "--largest)";
  return "";
}

PlanInputs PlanInputsFrom(const PlanOptions& a) {
  const bool param_dtype_given = a.given.count("param-dtype") > 0;
  const bool grad_dtype_given = a.given.count("grad-dtype") > 0;
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
  if (!param_dtype_given && in.model.dtype) in.param_dtype = *in.model.dtype;
  in.grad_dtype = ParseDType(Canon(a.grad_dtype));
  if (!grad_dtype_given && in.model.dtype) in.grad_dtype = *in.model.dtype;
  in.hyper.momentum = in.algorithm == Algorithm::kSGD ? a.momentum : 0.0;
  in.speculative_early_start = a.speculative_early_start;
  try {
    in.grad_release = ParseChoice(a.grad_release);
  } catch (const Error&) {
    throw Error(ErrorKind::kInvalidArgument,
                "--grad-release '" + a.grad_release + "': expected on, off or auto");
  }
  if (!a.speculative_host_bytes.empty())
    in.speculative_host_bytes = ParseBytes(a.speculative_host_bytes);
  if (!a.speculative_stream_bytes.empty())
    in.speculative_stream_bytes = ParseBytes(a.speculative_stream_bytes);
  if (!a.in_place_grad_bytes.empty()) in.in_place_grad_bytes = ParseBytes(a.in_place_grad_bytes);
  in.gpus_per_node = a.gpus_per_node;
  in.nodes = a.nodes;
  in.fsdp2 = a.fsdp2;
  in.shard_size = a.shard_size;
  in.fsdp2_blocks_in_flight = a.blocks_in_flight;
  in.placement = ParsePlacementPolicy(a.policy);
  in.chunk_elements = a.chunk_elements;
  in.pipeline_slots = a.slots;
  in.offload_compute = ParseOffloadCompute(a.offload_compute);
  in.stream_chunk_bytes = ParseBytes(a.stream_chunk);
  in.stream_slots = a.stream_slots;
  in.profile = a.profile.empty() ? DefaultProfile() : ProfileByNameOrPath(a.profile);
  if (a.train_tflops > 0) in.profile.gpu.train_tflops = a.train_tflops;
  in.fraction = a.fraction;
  return in;
}


}  // namespace tandem::planner
