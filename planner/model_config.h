// Internal: model descriptions from parsed JSON, shared by the file/text readers and tests.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/planner.h"

namespace tandem::planner {

// Reads the top-level fields of one config.json and remembers which it read, so that
// Finish() can refuse the fields it did not (Note [Config fields] in config_fields.cc).
// Every getter marks its key as read, present or not. Errors: Error(kInvalidArgument)
// "<where>: ..." naming the key.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string_view where) : j_(j), where_(where) {}

  // A required integer > 0.
  uint64_t Count(const char* key);
  // An optional integer > 0; `fallback` when absent or null.
  uint64_t CountOr(const char* key, uint64_t fallback);
  // An optional integer >= 0; `fallback` when absent or null.
  uint64_t NaturalOr(const char* key, uint64_t fallback);
  bool FlagOr(const char* key, bool fallback);
  std::string TextOr(const char* key, std::string fallback);
  // An optional list of integers >= 0 (e.g. mlp_only_layers); empty when absent or null.
  std::vector<uint64_t> IndexList(const char* key);
  // An optional list of strings (e.g. layer_types); empty when absent or null.
  std::vector<std::string> TextList(const char* key);
  // An optional number (a soft-capping value); whether it is present and not null.
  bool NumberGiven(const char* key);
  // The object under `key` (Gemma 3's text_config); Fail()s when absent or not an object.
  const nlohmann::json& Object(const char* key);
  // Marks `key` as read without reading it: known to the architecture, no effect on the
  // count (e.g. Qwen3-MoE's intermediate_size when every layer is sparse).
  void Known(const char* key) { used_.insert(key); }
  bool Present(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  [[noreturn]] void Fail(const std::string& what) const;
  // `value` of `key`, refused (Fail) above CountLimit(key).
  uint64_t Bounded(const char* key, uint64_t value) const;
  std::string_view where() const { return where_; }

  // Refuses the first field (in key order) that was not read, is not on the list of
  // fields known not to change the parameter count, and whose name suggests that it
  // does; adds a note to `m` naming the other unread fields, which are ignored. With
  // `shape_only` (the config only gives a tensor list its shape) none is refused: all
  // are named in the note.
  void Finish(ModelDescription* m, bool shape_only = false) const;

 private:
  const nlohmann::json& j_;
  std::string_view where_;
  std::set<std::string, std::less<>> used_;
};

// Whether `key` is on the list of config fields known not to change the parameter count.
bool FieldKnownInert(std::string_view key);
// The fragment of `key`'s name that suggests it changes the count ("expert", "layer",
// ...), or empty.
std::string_view FieldSuggestsCount(std::string_view key);

// The planner's bounds on its inputs (Note [Bounded inputs] in planner/bounds.cc).
inline constexpr uint64_t kMaxConfigCount = uint64_t{1} << 24;
inline constexpr uint64_t kMaxConfigLayerCount = uint64_t{1} << 14;
inline constexpr uint64_t kMaxModelTensors = uint64_t{1} << 17;
inline constexpr uint64_t kMaxModelParams = uint64_t{1} << 42;
// The largest value config field `key` may hold: kMaxConfigLayerCount for a count of
// layers or experts (the name holds "layer" or "expert"), kMaxConfigCount otherwise.
uint64_t CountLimit(std::string_view key);
// The element count of tensor `name` of `shape`, added to a model of `tensors` tensors
// and `params` parameters; Error(kInvalidArgument) "<where>: ..." when the shape
// overflows 64 bits or the model would pass kMaxModelTensors or kMaxModelParams.
uint64_t CheckModelRoom(std::string_view where, const std::string& name,
                        const std::vector<uint64_t>& shape, size_t tensors, uint64_t params);

// Appends tensors in forward order, within the model bounds (CheckModelRoom, naming the
// model by m->name).
class Builder {
 public:
  explicit Builder(ModelDescription* m) : m_(m) {}
  // A 1-D tensor of `numel` elements.
  void Add(std::string name, uint64_t numel, int layer = -1) {
    Add(std::move(name), std::vector<uint64_t>{numel}, layer);
  }
  // A tensor of `shape` as PyTorch holds it (a Linear weight is {out, in}).
  void Add(std::string name, std::vector<uint64_t> shape, int layer = -1) {
    const uint64_t numel = CheckModelRoom(m_->name, name, shape, m_->tensors.size(), params_);
    params_ += numel;
    m_->tensors.push_back({std::move(name), numel, layer, std::move(shape)});
  }

 private:
  ModelDescription* m_;
  uint64_t params_ = 0;  // of the tensors this builder added
};

// Shape of a Llama-family decoder (Llama, Mistral, Qwen2, Qwen3, Gemma, and the attention
// and dense blocks of Mixtral and Qwen-MoE).
struct LlamaShape {
  uint64_t hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  uint64_t vocab = 0;
  bool tied = false;
  bool qkv_bias = false;  // Qwen2, or attention_bias
  bool o_bias = false;    // attention_bias (Llama, Qwen3)
  bool mlp_bias = false;  // Llama's mlp_bias
  bool qk_norm = false;   // Qwen3: RMSNorm of head_dim on q and k
};

// Adds one part of decoder layer `layer` (its attention or its MLP) under `prefix`
// ("model.layers.<layer>.").
using LayerPart = std::function<void(Builder* b, const std::string& prefix, int layer)>;

// One decoder layer in forward order: input_layernorm, `attention`,
// post_attention_layernorm, `mlp`.
void AddDecoderLayer(Builder* b, const std::string& prefix, uint64_t hidden, int layer,
                     const LayerPart& attention, const LayerPart& mlp);
// The decoder skeleton every Llama-style reader shares, in forward order: embed_tokens
// (vocab x hidden); layers 0 .. layers-1 (AddDecoderLayer under "model.layers.<i>.");
// norm; lm_head unless `tied`.
void AddDecoder(Builder* b, uint64_t vocab, uint64_t hidden, uint64_t layers, bool tied,
                const LayerPart& attention, const LayerPart& mlp);
// A Llama-family model (SetShape, then AddDecoder with AddGqaAttention) whose per-layer
// MLP is `mlp`: dense, routed experts, shared experts, as the architecture has them.
ModelDescription LlamaDecoderModel(const LlamaShape& s, std::string name, std::string arch,
                                   const LayerPart& mlp);
// Tensors of a Llama-family model in forward order: embed_tokens; per layer
// input_layernorm, q, k, v (+ biases), (q_norm, k_norm), o, post_attention_layernorm,
// gate, up, down; norm; lm_head unless tied.
ModelDescription LlamaModel(const LlamaShape& s, std::string name, std::string arch);
// One layer's grouped-query attention (q, k, v, o and their options) under `prefix`.
void AddGqaAttention(Builder* b, const std::string& prefix, const LlamaShape& s, int layer);
// A SwiGLU MLP: `prefix` + gate_proj, up_proj, down_proj (h x inter each).
void AddGatedMlp(Builder* b, const std::string& prefix, uint64_t hidden, uint64_t inter, int layer,
                 bool bias = false);
// The shape fields every Llama-family reader shares (hidden_size, intermediate_size when
// `need_intermediate`, num_hidden_layers, num_attention_heads, num_key_value_heads,
// head_dim, vocab_size, tie_word_embeddings).
LlamaShape ReadLlamaShape(ConfigReader* r, bool need_intermediate = true);
// The shape of a built-in preset (PresetNames()); Error(kInvalidArgument) listing them
// for another name.
LlamaShape PresetShape(std::string_view name);
// A preset's shape with `layers` decoder layers (largest.cc), named "<preset> x N layers".
ModelDescription PresetWithLayers(const std::string& preset, uint64_t layers);
// Fills name, architecture and the shape fields of the description, its TransformerShape
// among them (intermediate, kv_heads, head_dim, qk_norm).
void SetShape(ModelDescription* m, const LlamaShape& s, std::string name, std::string arch);
// A config's layer_types list: false when it has none; else the layers it marks
// "sliding_attention" into `sliding`. Fail()s when it does not list `layers` layers.
bool ReadLayerTypes(ConfigReader* r, uint64_t layers, uint64_t* sliding);
// The sliding-window attention of a Llama-family config (Mistral's sliding_window; Qwen2's
// and Qwen3's use_sliding_window from max_window_layers on; or a layer_types list) into
// `t`, reading those fields.
void ReadSlidingWindow(ConfigReader* r, const std::string& arch, uint64_t layers,
                       TransformerShape* t);

// The Gemma readers (model_gemma.cc): "gemma2", "gemma3" (Gemma3ForCausalLM, model_type
// gemma3_text) and Gemma3ForConditionalGeneration's text_config ("gemma3" with
// `multimodal`).
ModelDescription GemmaFromConfig(ConfigReader* r, const std::string& arch, bool multimodal,
                                 const ConfigOptions& options);

// The mixture-of-experts readers (model_moe.cc): "mixtral", "qwen2_moe", "qwen3_moe",
// "deepseek_v2", "deepseek_v3".
ModelDescription MoeFromConfig(ConfigReader* r, const std::string& arch,
                               const ConfigOptions& options);

// From a parsed config.json; `where` names it in errors.
ModelDescription ModelFromJson(const nlohmann::json& j, std::string_view where,
                               const ConfigOptions& options = {});

}  // namespace tandem::planner
