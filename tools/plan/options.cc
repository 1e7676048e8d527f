// tandem-plan's options as data (tools/plan/options.h).
#include "tools/plan/options.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <filesystem>
#include <string>
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

std::vector<std::string> PlanOptionNames() {
  return {"params", "config", "model", "params-json", "largest", "include-mtp", "pieces",
          "gpu-mem", "headroom", "attention", "activation-model", "host-mem", "activations",
          "batch", "seq", "recompute", "algo", "master", "m", "v", "param-dtype", "grad-dtype",
          "momentum", "grad-release", "zero1", "speculative-early-start",
          "speculative-host-bytes", "speculative-stream-bytes", "in-place-grad-bytes",
          "fraction", "train-tflops", "gpus-per-node", "nodes", "fsdp2", "shard-size",
          "blocks-in-flight", "profile", "policy", "chunk-elements", "slots",
          "offload-compute", "stream-chunk", "stream-slots"};
}

bool IsPlanFlag(const std::string& name) {
  return name == "largest" || name == "include-mtp" || name == "zero1" ||
         name == "speculative-early-start" || name == "fsdp2";
}

void SetPlanOption(PlanOptions* o, const std::string& name, const std::string& text) {
  if (IsPlanFlag(name)) {
    bool on = false;
    if (text == "true") {
      on = true;
    } else if (text != "false") {
      Bad("--" + name + " is a flag: it takes true or false, got " + text);
    }
    if (name == "largest") o->largest = on;
    if (name == "include-mtp") o->include_mtp = on;
    if (name == "zero1") o->zero1 = on;
    if (name == "speculative-early-start") o->speculative_early_start = on;
    if (name == "fsdp2") o->fsdp2 = on;
    if (on) o->given.insert(name);
    return;
  }
  std::string* text_field = nullptr;
  if (name == "params") text_field = &o->params;
  else if (name == "config") text_field = &o->config;
  else if (name == "model") text_field = &o->model;
  else if (name == "params-json") text_field = &o->params_json;
  else if (name == "gpu-mem") text_field = &o->gpu_mem;
  else if (name == "host-mem") text_field = &o->host_mem;
  else if (name == "headroom") text_field = &o->headroom;
  else if (name == "attention") text_field = &o->attention;
  else if (name == "activation-model") text_field = &o->activation_model;
  else if (name == "activations") text_field = &o->activations;
  else if (name == "recompute") text_field = &o->recompute;
  else if (name == "algo") text_field = &o->algo;
  else if (name == "master") text_field = &o->master;
  else if (name == "m") text_field = &o->m;
  else if (name == "v") text_field = &o->v;
  else if (name == "param-dtype") text_field = &o->param_dtype;
  else if (name == "grad-dtype") text_field = &o->grad_dtype;
  else if (name == "grad-release") text_field = &o->grad_release;
  else if (name == "speculative-host-bytes") text_field = &o->speculative_host_bytes;
  else if (name == "speculative-stream-bytes") text_field = &o->speculative_stream_bytes;
  else if (name == "in-place-grad-bytes") text_field = &o->in_place_grad_bytes;
  else if (name == "profile") text_field = &o->profile;
  else if (name == "policy") text_field = &o->policy;
  else if (name == "offload-compute") text_field = &o->offload_compute;
  else if (name == "stream-chunk") text_field = &o->stream_chunk;
  if (text_field != nullptr) *text_field = text;
  else if (name == "pieces") Convert(name, text, &o->pieces);
  else if (name == "batch") Convert(name, text, &o->batch);
  else if (name == "seq") Convert(name, text, &o->seq);
  else if (name == "momentum") Convert(name, text, &o->momentum);
  else if (name == "fraction") Convert(name, text, &o->fraction);
  else if (name == "train-tflops") Convert(name, text, &o->train_tflops);
  else if (name == "gpus-per-node") Convert(name, text, &o->gpus_per_node);
  else if (name == "nodes") Convert(name, text, &o->nodes);
  else if (name == "shard-size") Convert(name, text, &o->shard_size);
  else if (name == "blocks-in-flight") Convert(name, text, &o->blocks_in_flight);
  else if (name == "chunk-elements") Convert(name, text, &o->chunk_elements);
  else if (name == "slots") Convert(name, text, &o->slots);
  else if (name == "stream-slots") Convert(name, text, &o->stream_slots);
  else Bad("tandem-plan has no option --" + name);
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
    const uint32_t v = name == "pieces"          ? o.pieces
                       : name == "gpus-per-node" ? o.gpus_per_node
                       : name == "nodes"         ? o.nodes
                       : name == "shard-size"    ? o.shard_size
                                                 : o.blocks_in_flight;
    if (v < r.lo || v > r.hi)
      Bad("--" + name + ": Value " + std::to_string(v) + " not in range " +
          std::to_string(r.lo) + " to " + std::to_string(r.hi));
  }
  for (const OptionChoices& c : PlanOptionChoices()) {
    if (!Given(o, c.option)) continue;
    const std::string name = c.option;
    const std::string& v = name == "attention"          ? o.attention
                           : name == "activation-model" ? o.activation_model
                           : name == "recompute"        ? o.recompute
                                                        : o.profile;
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
