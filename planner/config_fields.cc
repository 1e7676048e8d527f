// Reading config.json fields, and the policy for the fields a reader does not read.
//
// Note [Config fields]
// A config.json field the reader ignores may change the parameter count (a new kind of
// expert, a LoRA rank, a bias): ignoring it would give a plausible but wrong plan. So
// every top-level field is one of: read by the architecture's reader (ConfigReader marks
// it); on kInertFields below, known not to change the count; or unknown. An unknown field
// whose name holds a fragment of kSuggestive ("expert", "layer", "head", ...) is an
// error naming it; any other unknown field is ignored and named in a note. Adding an
// architecture means reading its fields, or adding the ones that do not matter to
// kInertFields with the reason in the comment.
#include <algorithm>
#include <array>

#include "planner/model_config.h"
#include "tandem/error.h"

namespace tandem::planner {
namespace {

// Fields known not to change the parameter count of any supported architecture.
constexpr std::array<std::string_view, 80> kInertFields = {
    // Bookkeeping and tokenizer ids.
    "_name_or_path", "architectures", "model_type", "transformers_version", "torch_dtype", "dtype",
    "auto_map", "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id",
    "decoder_start_token_id", "return_dict", "output_attentions", "output_hidden_states",
    "use_return_dict", "task_specific_params", "pretraining_tp", "use_cache", "is_decoder",
    "is_encoder_decoder", "cache_implementation",
    // Numerics and initialisation.
    "hidden_act", "activation_function", "initializer_range", "initializer_factor", "rms_norm_eps",
    "layer_norm_eps", "layer_norm_epsilon", "attention_dropout", "attn_pdrop", "embd_pdrop",
    "resid_pdrop", "hidden_dropout", "hidden_dropout_prob", "dropout", "scale_attn_weights",
    "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
    // Positions: RoPE has no parameters (GPT-2's learned table is n_positions).
    "max_position_embeddings", "rope_theta", "rope_scaling", "rope_parameters", "rope_interleave",
    "partial_rotary_factor", "n_ctx",
    // Attention windows: which tokens attend, not how many weights.
    "sliding_window", "use_sliding_window", "max_window_layers", "layer_types",
    // Routing: how many experts a token uses and how they are scored, not how many exist.
    "num_experts_per_tok", "norm_topk_prob", "output_router_logits", "router_aux_loss_coef",
    "router_jitter_noise", "aux_loss_alpha", "seq_aux", "scoring_func", "routed_scaling_factor",
    "n_group", "topk_group", "ep_size",
    // Storage format of a checkpoint (fp8 blocks): the trainable tensors are the same.
    "quantization_config",
    // GPT-2 double-heads summary (not part of GPT2LMHeadModel).
    "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type",
    "summary_use_proj",
    // Generation defaults and tokenizer hints.
    "tokenizer_class", "max_length", "temperature", "top_p", "top_k", "do_sample",
    "chunk_size_feed_forward", "tie_encoder_decoder", "add_cross_attention", "problem_type",
    "id2label", "label2id"};

// Fragments of a field name that suggest it changes the parameter count.
constexpr std::array<std::string_view, 23> kSuggestive = {
    "expert", "lora",   "rank", "head",  "layer",  "intermediate", "vocab", "hidden",
    "embed",  "dim",    "size", "bias",  "norm",   "proj",         "moe",   "mlp",
    "num_",   "shared", "kv",   "dense", "sparse", "tie",          "block"};

}  // namespace

bool FieldKnownInert(std::string_view key) {
  return std::find(kInertFields.begin(), kInertFields.end(), key) != kInertFields.end();
}

std::string_view FieldSuggestsCount(std::string_view key) {
  for (std::string_view f : kSuggestive)
    if (key.find(f) != std::string_view::npos) return f;
  return {};
}

void ConfigReader::Fail(const std::string& what) const {
  throw Error(ErrorKind::kInvalidArgument, std::string(where_) + ": " + what);
}

uint64_t ConfigReader::Count(const char* key) {
  used_.insert(key);
  if (!Present(key)) Fail(std::string("missing key '") + key + "'");
  const nlohmann::json& v = j_.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0)
    Fail(std::string("key '") + key + "' must be a positive integer, got " + v.dump());
  return Bounded(key, v.get<uint64_t>());
}

uint64_t ConfigReader::Bounded(const char* key, uint64_t value) const {
  if (value > CountLimit(key))
    Fail(std::string("key '") + key + "' is " + std::to_string(value) +
         ", more than the planner's limit of " + std::to_string(CountLimit(key)) +
         " (docs/planner.md, \"Limits\")");
  return value;
}

uint64_t ConfigReader::CountOr(const char* key, uint64_t fallback) {
  used_.insert(key);
  return Present(key) ? Count(key) : fallback;
}

uint64_t ConfigReader::NaturalOr(const char* key, uint64_t fallback) {
  used_.insert(key);
  if (!Present(key)) return fallback;
  const nlohmann::json& v = j_.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    Fail(std::string("key '") + key + "' must be an integer >= 0, got " + v.dump());
  return Bounded(key, v.get<uint64_t>());
}

bool ConfigReader::FlagOr(const char* key, bool fallback) {
  used_.insert(key);
  if (!Present(key)) return fallback;
  if (!j_.at(key).is_boolean())
    Fail(std::string("key '") + key + "' must be true or false, got " + j_.at(key).dump());
  return j_.at(key).get<bool>();
}

std::string ConfigReader::TextOr(const char* key, std::string fallback) {
  used_.insert(key);
  if (!Present(key)) return fallback;
  if (!j_.at(key).is_string())
    Fail(std::string("key '") + key + "' must be a string, got " + j_.at(key).dump());
  return j_.at(key).get<std::string>();
}

std::vector<uint64_t> ConfigReader::IndexList(const char* key) {
  used_.insert(key);
  std::vector<uint64_t> out;
  if (!Present(key)) return out;
  const nlohmann::json& v = j_.at(key);
  if (!v.is_array()) Fail(std::string("key '") + key + "' must be a list, got " + v.dump());
  for (const nlohmann::json& e : v) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0)
      Fail(std::string("key '") + key + "' must list integers >= 0, got " + v.dump());
    out.push_back(Bounded(key, e.get<uint64_t>()));
  }
  return out;
}

std::vector<std::string> ConfigReader::TextList(const char* key) {
  used_.insert(key);
  std::vector<std::string> out;
  if (!Present(key)) return out;
  const nlohmann::json& v = j_.at(key);
  if (!v.is_array()) Fail(std::string("key '") + key + "' must be a list, got " + v.dump());
  for (const nlohmann::json& e : v) {
    if (!e.is_string())
      Fail(std::string("key '") + key + "' must list strings, got " + v.dump());
    out.push_back(e.get<std::string>());
  }
  return out;
}

bool ConfigReader::NumberGiven(const char* key) {
  used_.insert(key);
  if (!Present(key)) return false;
  if (!j_.at(key).is_number())
    Fail(std::string("key '") + key + "' must be a number or null, got " + j_.at(key).dump());
  return true;
}

const nlohmann::json& ConfigReader::Object(const char* key) {
  used_.insert(key);
  if (!Present(key)) Fail(std::string("missing key '") + key + "'");
  if (!j_.at(key).is_object())
    Fail(std::string("key '") + key + "' must be an object, got " + j_.at(key).dump());
  return j_.at(key);
}

void ConfigReader::Finish(ModelDescription* m, bool shape_only) const {
  std::string ignored;
  for (const auto& [key, value] : j_.items()) {
    if (used_.count(key) != 0 || FieldKnownInert(key)) continue;
    const std::string_view hint = FieldSuggestsCount(key);
    if (!hint.empty() && !shape_only)
      Fail("unknown field '" + key + "' (its name has '" + std::string(hint) +
           "', so it may change the parameter count, which this reader would not count). "
           "If it does not, it belongs on the list of fields known not to change the count "
           "in planner/config_fields.cc; docs/planner.md \"Config fields\"");
    ignored += (ignored.empty() ? "" : ", ") + key;
  }
  if (!ignored.empty())
    m->notes.push_back("config fields ignored (not known to change the parameter count): " +
                       ignored);
}

}  // namespace tandem::planner
