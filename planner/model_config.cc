// Model descriptions: parameter counts, Hugging Face config.json files, built-in presets.
#include "planner/model_config.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tandem/error.h"

namespace tandem::planner {
namespace {

[[noreturn]] void Fail(std::string_view where, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, std::string(where) + ": " + what);
}

// A required positive integer key.
uint64_t Count(const nlohmann::json& j, const char* key, std::string_view where) {
  if (!j.contains(key)) Fail(where, std::string("missing key '") + key + "'");
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0)
    Fail(where, std::string("key '") + key + "' must be a positive integer, got " + v.dump());
  return v.get<uint64_t>();
}

// An optional positive integer key; `fallback` when absent or null.
uint64_t CountOr(const nlohmann::json& j, const char* key, uint64_t fallback,
                 std::string_view where) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  return Count(j, key, where);
}

bool FlagOr(const nlohmann::json& j, const char* key, bool fallback, std::string_view where) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  if (!j.at(key).is_boolean())
    Fail(where, std::string("key '") + key + "' must be true or false, got " + j.at(key).dump());
  return j.at(key).get<bool>();
}

class Builder {
 public:
  explicit Builder(ModelDescription* m) : m_(m) {}
  void Add(std::string name, uint64_t numel, int layer = -1) {
    m_->tensors.push_back({std::move(name), numel, layer});
  }

 private:
  ModelDescription* m_;
};

ModelDescription Gpt2Model(const nlohmann::json& j, std::string_view where) {
  const uint64_t h = Count(j, "n_embd", where);
  const uint64_t layers = Count(j, "n_layer", where);
  const uint64_t heads = Count(j, "n_head", where);
  const uint64_t vocab = Count(j, "vocab_size", where);
  const uint64_t positions = Count(j, "n_positions", where);
  const uint64_t inner = CountOr(j, "n_inner", 4 * h, where);
  ModelDescription m;
  m.name = std::string(where);
  m.architecture = "gpt2";
  m.hidden_size = h;
  m.num_layers = layers;
  m.num_heads = heads;
  m.vocab_size = vocab;
  Builder b(&m);
  b.Add("transformer.wte.weight", vocab * h);
  b.Add("transformer.wpe.weight", positions * h);
  for (uint64_t i = 0; i < layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    const int l = static_cast<int>(i);
    b.Add(p + "ln_1.weight", h, l);
    b.Add(p + "ln_1.bias", h, l);
    b.Add(p + "attn.c_attn.weight", h * 3 * h, l);
    b.Add(p + "attn.c_attn.bias", 3 * h, l);
    b.Add(p + "attn.c_proj.weight", h * h, l);
    b.Add(p + "attn.c_proj.bias", h, l);
    b.Add(p + "ln_2.weight", h, l);
    b.Add(p + "ln_2.bias", h, l);
    b.Add(p + "mlp.c_fc.weight", h * inner, l);
    b.Add(p + "mlp.c_fc.bias", inner, l);
    b.Add(p + "mlp.c_proj.weight", inner * h, l);
    b.Add(p + "mlp.c_proj.bias", h, l);
  }
  b.Add("transformer.ln_f.weight", h);
  b.Add("transformer.ln_f.bias", h);
  // lm_head is tied to wte in GPT-2: no tensor of its own.
  return m;
}

ModelDescription LlamaFromJson(const nlohmann::json& j, std::string_view where,
                               const std::string& arch) {
  LlamaShape s;
  s.hidden = Count(j, "hidden_size", where);
  s.intermediate = Count(j, "intermediate_size", where);
  s.layers = Count(j, "num_hidden_layers", where);
  s.heads = Count(j, "num_attention_heads", where);
  s.kv_heads = CountOr(j, "num_key_value_heads", s.heads, where);
  if (!j.contains("head_dim") || j.at("head_dim").is_null()) {
    if (s.hidden % s.heads != 0)
      Fail(where, "hidden_size " + std::to_string(s.hidden) +
                      " is not a multiple of num_attention_heads " + std::to_string(s.heads) +
                      " and there is no 'head_dim'");
    s.head_dim = s.hidden / s.heads;
  } else {
    s.head_dim = Count(j, "head_dim", where);
  }
  s.vocab = Count(j, "vocab_size", where);
  s.tied = FlagOr(j, "tie_word_embeddings", false, where);
  s.qkv_bias = arch == "qwen2";
  return LlamaModel(s, std::string(where), arch);
}

}  // namespace

uint64_t ModelDescription::total_params() const {
  uint64_t n = 0;
  for (const ModelTensor& t : tensors) n += t.numel;
  return n;
}

uint64_t ModelDescription::largest_layer_params() const {
  std::map<int, uint64_t> per_layer;
  uint64_t largest = 0;
  for (const ModelTensor& t : tensors) {
    if (t.layer < 0)
      largest = std::max(largest, t.numel);
    else
      per_layer[t.layer] += t.numel;
  }
  for (const auto& [layer, n] : per_layer) largest = std::max(largest, n);
  return largest;
}

ModelDescription LlamaModel(const LlamaShape& s, std::string name, std::string arch) {
  ModelDescription m;
  m.name = std::move(name);
  m.architecture = std::move(arch);
  m.hidden_size = s.hidden;
  m.num_layers = s.layers;
  m.num_heads = s.heads;
  m.vocab_size = s.vocab;
  const uint64_t h = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  Builder b(&m);
  b.Add("model.embed_tokens.weight", s.vocab * h);
  for (uint64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const int l = static_cast<int>(i);
    b.Add(p + "input_layernorm.weight", h, l);
    b.Add(p + "self_attn.q_proj.weight", h * q, l);
    if (s.qkv_bias) b.Add(p + "self_attn.q_proj.bias", q, l);
    b.Add(p + "self_attn.k_proj.weight", h * kv, l);
    if (s.qkv_bias) b.Add(p + "self_attn.k_proj.bias", kv, l);
    b.Add(p + "self_attn.v_proj.weight", h * kv, l);
    if (s.qkv_bias) b.Add(p + "self_attn.v_proj.bias", kv, l);
    b.Add(p + "self_attn.o_proj.weight", q * h, l);
    b.Add(p + "post_attention_layernorm.weight", h, l);
    b.Add(p + "mlp.gate_proj.weight", h * s.intermediate, l);
    b.Add(p + "mlp.up_proj.weight", h * s.intermediate, l);
    b.Add(p + "mlp.down_proj.weight", s.intermediate * h, l);
  }
  b.Add("model.norm.weight", h);
  if (!s.tied) b.Add("lm_head.weight", s.vocab * h);
  return m;
}

ModelDescription ModelFromJson(const nlohmann::json& j, std::string_view where) {
  if (!j.is_object()) Fail(where, "config must be a JSON object");
  // Architecture: "architectures"[0] if present, else "model_type".
  std::string arch;
  if (j.contains("architectures") && j.at("architectures").is_array() &&
      !j.at("architectures").empty() && j.at("architectures")[0].is_string()) {
    const std::string a = j.at("architectures")[0].get<std::string>();
    static const std::map<std::string, std::string> kByClass = {{"LlamaForCausalLM", "llama"},
                                                                {"MistralForCausalLM", "mistral"},
                                                                {"Qwen2ForCausalLM", "qwen2"},
                                                                {"GPT2LMHeadModel", "gpt2"},
                                                                {"GPT2Model", "gpt2"}};
    auto it = kByClass.find(a);
    if (it == kByClass.end())
      Fail(where, "unknown architecture '" + a +
                      "' (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                      "GPT2LMHeadModel)");
    arch = it->second;
  } else if (j.contains("model_type") && j.at("model_type").is_string()) {
    arch = j.at("model_type").get<std::string>();
    if (arch != "llama" && arch != "mistral" && arch != "qwen2" && arch != "gpt2")
      Fail(where, "unknown model_type '" + arch + "' (supported: llama, mistral, qwen2, gpt2)");
  } else {
    Fail(where, "missing key 'architectures' (or 'model_type')");
  }
  if (arch == "gpt2") return Gpt2Model(j, where);
  return LlamaFromJson(j, where, arch);
}

ModelDescription ModelFromConfigText(std::string_view json, std::string_view where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    Fail(where, std::string("not valid JSON: ") + e.what());
  }
  return ModelFromJson(j, where);
}

ModelDescription ModelFromConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIO, path + ": cannot open model config");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorKind::kIO, path + ": read failed");
  return ModelFromConfigText(text.str(), path);
}

ModelDescription ModelFromParamCount(uint64_t params, uint32_t pieces) {
  if (params == 0) Fail("--params", "parameter count must be > 0");
  if (pieces == 0 || pieces > params)
    Fail("--params",
         "pieces must be in [1, " + std::to_string(params) + "], got " + std::to_string(pieces));
  ModelDescription m;
  m.name = std::to_string(params) + " parameters";
  m.architecture = "flat";
  const uint64_t each = params / pieces;
  for (uint32_t i = 0; i < pieces; ++i) {
    const uint64_t n = i + 1 == pieces ? params - each * (pieces - 1) : each;
    m.tensors.push_back({"flat." + std::to_string(i), n, -1});
  }
  return m;
}

std::vector<std::string> PresetNames() {
  return {"llama3-1b", "llama3-3b", "llama3-8b", "llama3-70b"};
}

ModelDescription ModelFromPreset(std::string_view name) {
  // Published Llama 3 / 3.2 shapes (vocabulary 128256, head_dim = hidden / heads).
  LlamaShape s;
  s.vocab = 128256;
  s.kv_heads = 8;
  if (name == "llama3-1b") {
    s.hidden = 2048, s.intermediate = 8192, s.layers = 16, s.heads = 32, s.tied = true;
  } else if (name == "llama3-3b") {
    s.hidden = 3072, s.intermediate = 8192, s.layers = 28, s.heads = 24, s.tied = true;
  } else if (name == "llama3-8b") {
    s.hidden = 4096, s.intermediate = 14336, s.layers = 32, s.heads = 32, s.tied = false;
  } else if (name == "llama3-70b") {
    s.hidden = 8192, s.intermediate = 28672, s.layers = 80, s.heads = 64, s.tied = false;
  } else {
    std::string list;
    for (const std::string& p : PresetNames()) list += (list.empty() ? "" : ", ") + p;
    Fail("--model", "unknown preset '" + std::string(name) + "' (presets: " + list + ")");
  }
  s.head_dim = s.hidden / s.heads;
  return LlamaModel(s, std::string(name), "llama");
}

}  // namespace tandem::planner
