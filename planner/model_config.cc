// Model descriptions: parameter counts, Hugging Face config.json files (dense families
// here, mixtures of experts in model_moe.cc), built-in presets.
#include "planner/model_config.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "planner/read_file.h"
#include "tandem/error.h"

namespace tandem::planner {
namespace {

[[noreturn]] void Fail(std::string_view where, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, std::string(where) + ": " + what);
}

ModelDescription Gpt2Model(ConfigReader* r) {
  const uint64_t h = r->Count("n_embd");
  const uint64_t layers = r->Count("n_layer");
  const uint64_t heads = r->Count("n_head");
  const uint64_t vocab = r->Count("vocab_size");
  const uint64_t positions = r->Count("n_positions");
  const uint64_t inner = r->CountOr("n_inner", 4 * h);
  ModelDescription m;
  m.name = std::string(r->where());
  m.architecture = "gpt2";
  m.hidden_size = h;
  m.num_layers = layers;
  m.num_heads = heads;
  m.vocab_size = vocab;
  Builder b(&m);
  b.Add("transformer.wte.weight", {vocab, h});
  b.Add("transformer.wpe.weight", {positions, h});
  for (uint64_t i = 0; i < layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    const int l = static_cast<int>(i);
    b.Add(p + "ln_1.weight", h, l);
    b.Add(p + "ln_1.bias", h, l);
    b.Add(p + "attn.c_attn.weight", {h, 3 * h}, l);
    b.Add(p + "attn.c_attn.bias", 3 * h, l);
    b.Add(p + "attn.c_proj.weight", {h, h}, l);
    b.Add(p + "attn.c_proj.bias", h, l);
    b.Add(p + "ln_2.weight", h, l);
    b.Add(p + "ln_2.bias", h, l);
    b.Add(p + "mlp.c_fc.weight", {h, inner}, l);
    b.Add(p + "mlp.c_fc.bias", inner, l);
    b.Add(p + "mlp.c_proj.weight", {inner, h}, l);
    b.Add(p + "mlp.c_proj.bias", h, l);
  }
  b.Add("transformer.ln_f.weight", h);
  b.Add("transformer.ln_f.bias", h);
  // lm_head is tied to wte in GPT-2: no tensor of its own.
  return m;
}

// Llama, Mistral, Qwen2, Qwen3: the options each family has.
ModelDescription DenseFromConfig(ConfigReader* r, const std::string& arch) {
  LlamaShape s = ReadLlamaShape(r);
  if (arch == "qwen2") {
    s.qkv_bias = true;  // Qwen2 always has q, k and v biases and no o bias
  } else if (arch == "llama" || arch == "qwen3") {
    s.qkv_bias = s.o_bias = r->FlagOr("attention_bias", false);
  }
  if (arch == "llama") s.mlp_bias = r->FlagOr("mlp_bias", false);
  s.qk_norm = arch == "qwen3";
  ModelDescription m = LlamaModel(s, std::string(r->where()), arch);
  ReadSlidingWindow(r, arch, s.layers, &m.transformer);
  return m;
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

LlamaShape ReadLlamaShape(ConfigReader* r, bool need_intermediate) {
  LlamaShape s;
  s.hidden = r->Count("hidden_size");
  if (need_intermediate)
    s.intermediate = r->Count("intermediate_size");
  else
    s.intermediate = r->CountOr("intermediate_size", 0);
  s.layers = r->Count("num_hidden_layers");
  s.heads = r->Count("num_attention_heads");
  s.kv_heads = r->CountOr("num_key_value_heads", s.heads);
  if (!r->Present("head_dim")) {
    r->Known("head_dim");
    if (s.hidden % s.heads != 0)
      r->Fail("hidden_size " + std::to_string(s.hidden) + " is not a multiple of " +
              "num_attention_heads " + std::to_string(s.heads) + " and there is no 'head_dim'");
    s.head_dim = s.hidden / s.heads;
  } else {
    s.head_dim = r->Count("head_dim");
  }
  s.vocab = r->Count("vocab_size");
  s.tied = r->FlagOr("tie_word_embeddings", false);
  return s;
}

void SetShape(ModelDescription* m, const LlamaShape& s, std::string name, std::string arch) {
  m->name = std::move(name);
  m->architecture = std::move(arch);
  m->hidden_size = s.hidden;
  m->num_layers = s.layers;
  m->num_heads = s.heads;
  m->vocab_size = s.vocab;
  m->transformer.intermediate = s.intermediate;
  m->transformer.kv_heads = s.kv_heads;
  m->transformer.head_dim = s.head_dim;
  m->transformer.qk_norm = s.qk_norm;
  m->transformer.tied_embeddings = s.tied;
}

bool ReadLayerTypes(ConfigReader* r, uint64_t layers, uint64_t* sliding) {
  const std::vector<std::string> types = r->TextList("layer_types");
  if (types.empty()) return false;
  if (types.size() != layers)
    r->Fail("layer_types lists " + std::to_string(types.size()) + " layers, num_hidden_layers " +
            "is " + std::to_string(layers));
  *sliding = static_cast<uint64_t>(
      std::count(types.begin(), types.end(), std::string("sliding_attention")));
  return true;
}

void ReadSlidingWindow(ConfigReader* r, const std::string& arch, uint64_t layers,
                       TransformerShape* t) {
  const uint64_t window = r->CountOr("sliding_window", 0);
  const bool qwen = arch == "qwen2" || arch == "qwen3" || arch == "qwen2_moe" || arch == "qwen3_moe";
  if (!ReadLayerTypes(r, layers, &t->sliding_layers)) {
    if (qwen) {
      // transformers: layer i slides when use_sliding_window and i >= max_window_layers.
      const uint64_t from = r->NaturalOr("max_window_layers", layers);
      if (r->FlagOr("use_sliding_window", false))
        t->sliding_layers = layers - std::min(from, layers);
    } else if (window > 0) {
      t->sliding_layers = layers;  // Mistral, Mixtral: every layer
    }
  }
  r->Known("use_sliding_window");
  r->Known("max_window_layers");
  t->sliding_window = t->sliding_layers > 0 ? window : 0;
  if (t->sliding_layers > 0 && window == 0) t->sliding_layers = 0;
  t->layer_types = t->sliding_layers > 0 && t->sliding_layers < layers ? 2 : 1;
}

void AddGqaAttention(Builder* b, const std::string& p, const LlamaShape& s, int l) {
  const uint64_t h = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  b->Add(p + "self_attn.q_proj.weight", {q, h}, l);
  if (s.qkv_bias) b->Add(p + "self_attn.q_proj.bias", q, l);
  b->Add(p + "self_attn.k_proj.weight", {kv, h}, l);
  if (s.qkv_bias) b->Add(p + "self_attn.k_proj.bias", kv, l);
  b->Add(p + "self_attn.v_proj.weight", {kv, h}, l);
  if (s.qkv_bias) b->Add(p + "self_attn.v_proj.bias", kv, l);
  if (s.qk_norm) {
    b->Add(p + "self_attn.q_norm.weight", s.head_dim, l);
    b->Add(p + "self_attn.k_norm.weight", s.head_dim, l);
  }
  b->Add(p + "self_attn.o_proj.weight", {h, q}, l);
  if (s.o_bias) b->Add(p + "self_attn.o_proj.bias", h, l);
}

void AddGatedMlp(Builder* b, const std::string& p, uint64_t h, uint64_t inter, int l, bool bias) {
  b->Add(p + "gate_proj.weight", {inter, h}, l);
  if (bias) b->Add(p + "gate_proj.bias", inter, l);
  b->Add(p + "up_proj.weight", {inter, h}, l);
  if (bias) b->Add(p + "up_proj.bias", inter, l);
  b->Add(p + "down_proj.weight", {h, inter}, l);
  if (bias) b->Add(p + "down_proj.bias", h, l);
}

void AddDecoderLayer(Builder* b, const std::string& p, uint64_t hidden, int l,
                     const LayerPart& attention, const LayerPart& mlp) {
  b->Add(p + "input_layernorm.weight", hidden, l);
  attention(b, p, l);
  b->Add(p + "post_attention_layernorm.weight", hidden, l);
  mlp(b, p, l);
}

void AddDecoder(Builder* b, uint64_t vocab, uint64_t hidden, uint64_t layers, bool tied,
                const LayerPart& attention, const LayerPart& mlp) {
  b->Add("model.embed_tokens.weight", {vocab, hidden});
  for (uint64_t i = 0; i < layers; ++i)
    AddDecoderLayer(b, "model.layers." + std::to_string(i) + ".", hidden, static_cast<int>(i),
                    attention, mlp);
  b->Add("model.norm.weight", hidden);
  if (!tied) b->Add("lm_head.weight", {vocab, hidden});
}

ModelDescription LlamaDecoderModel(const LlamaShape& s, std::string name, std::string arch,
                                   const LayerPart& mlp) {
  ModelDescription m;
  SetShape(&m, s, std::move(name), std::move(arch));
  Builder builder(&m);
  AddDecoder(
      &builder, s.vocab, s.hidden, s.layers, s.tied,
      [&s](Builder* b, const std::string& p, int l) { AddGqaAttention(b, p, s, l); }, mlp);
  return m;
}

ModelDescription LlamaModel(const LlamaShape& s, std::string name, std::string arch) {
  return LlamaDecoderModel(s, std::move(name), std::move(arch),
                           [&s](Builder* b, const std::string& p, int l) {
                             AddGatedMlp(b, p + "mlp.", s.hidden, s.intermediate, l, s.mlp_bias);
                           });
}

ModelDescription ModelFromJson(const nlohmann::json& j, std::string_view where,
                               const ConfigOptions& options) {
  if (!j.is_object()) Fail(where, "config must be a JSON object");
  // Architecture: "architectures"[0] if present, else "model_type".
  static const std::map<std::string, std::string> kByClass = {
      {"LlamaForCausalLM", "llama"},
      {"MistralForCausalLM", "mistral"},
      {"Qwen2ForCausalLM", "qwen2"},
      {"Qwen3ForCausalLM", "qwen3"},
      {"MixtralForCausalLM", "mixtral"},
      {"Qwen2MoeForCausalLM", "qwen2_moe"},
      {"Qwen3MoeForCausalLM", "qwen3_moe"},
      {"DeepseekV2ForCausalLM", "deepseek_v2"},
      {"DeepseekV3ForCausalLM", "deepseek_v3"},
      {"Gemma2ForCausalLM", "gemma2"},
      {"Gemma3ForCausalLM", "gemma3_text"},
      {"Gemma3ForConditionalGeneration", "gemma3"},
      {"GPT2LMHeadModel", "gpt2"},
      {"GPT2Model", "gpt2"}};
  std::string arch;
  if (j.contains("architectures") && j.at("architectures").is_array() &&
      !j.at("architectures").empty() && j.at("architectures")[0].is_string()) {
    const std::string a = j.at("architectures")[0].get<std::string>();
    auto it = kByClass.find(a);
    if (it == kByClass.end()) {
      std::string list;
      for (const auto& [cls, type] : kByClass)
        if (cls != "GPT2Model") list += (list.empty() ? "" : ", ") + cls;
      Fail(where, "unknown architecture '" + a + "' (supported: " + list + ")");
    }
    arch = it->second;
  } else if (j.contains("model_type") && j.at("model_type").is_string()) {
    arch = j.at("model_type").get<std::string>();
    std::set<std::string> types;
    for (const auto& [cls, type] : kByClass) types.insert(type);
    if (types.count(arch) == 0) {
      std::string list;
      for (const std::string& t : types) list += (list.empty() ? "" : ", ") + t;
      Fail(where, "unknown model_type '" + arch + "' (supported: " + list + ")");
    }
  } else {
    Fail(where, "missing key 'architectures' (or 'model_type')");
  }
  ConfigReader r(j, where);
  ModelDescription m;
  if (arch == "gpt2")
    m = Gpt2Model(&r);
  else if (arch == "llama" || arch == "mistral" || arch == "qwen2" || arch == "qwen3")
    m = DenseFromConfig(&r, arch);
  else if (arch == "gemma2" || arch == "gemma3_text" || arch == "gemma3")
    m = GemmaFromConfig(&r, arch == "gemma2" ? "gemma2" : "gemma3", arch == "gemma3", options);
  else
    m = MoeFromConfig(&r, arch, options);
  // Every family but GPT-2 is modelled as transformers implements it (activations_hf.cc).
  m.transformers_config = arch != "gpt2";
  r.Finish(&m, options.shape_only);
  if (j.contains("quantization_config"))
    m.notes.push_back(
        "quantization_config ignored: tensors are counted at their full shapes, as training "
        "holds them; a quantized checkpoint's scale tensors are not counted");
  return m;
}

ModelDescription ModelFromConfigText(std::string_view json, std::string_view where,
                                     const ConfigOptions& options) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    Fail(where, std::string("not valid JSON: ") + e.what());
  }
  return ModelFromJson(j, where, options);
}

ModelDescription ModelFromConfigFile(const std::string& given, const ConfigOptions& options) {
  std::error_code ec;
  const std::string path =
      std::filesystem::is_directory(given, ec) ? given + "/config.json" : given;
  return ModelFromConfigText(ReadWholeFile(path, "model config"), path, options);
}

ModelDescription ModelFromParamCount(uint64_t params, uint32_t pieces) {
  if (params == 0) Fail("--params", "parameter count must be > 0");
  if (params > kMaxModelParams)
    Fail("--params", std::to_string(params) + " parameters is more than the planner's limit of " +
                         std::to_string(kMaxModelParams) + " (2^42; docs/planner.md, \"Limits\")");
  const uint64_t most = std::min<uint64_t>(params, kMaxModelTensors);
  if (pieces == 0 || pieces > most)
    Fail("--params",
         "pieces must be in [1, " + std::to_string(most) + "], got " + std::to_string(pieces));
  ModelDescription m;
  m.name = std::to_string(params) + " parameters";
  m.architecture = "flat";
  if (params < 1000000)  // "--params 8" meant 8 billion, surely
    m.notes.push_back("--params " + std::to_string(params) + " plans a model of " +
                      std::to_string(params) + " parameters; --params takes the count " +
                      "itself (8e9 or 8B for 8 billion)");
  const uint64_t each = params / pieces;
  for (uint32_t i = 0; i < pieces; ++i) {
    const uint64_t n = i + 1 == pieces ? params - each * (pieces - 1) : each;
    m.tensors.push_back({"flat." + std::to_string(i), n, -1, {n}});
  }
  return m;
}

std::vector<std::string> PresetNames() {
  return {"llama3-1b", "llama3-3b", "llama3-8b", "llama3-70b", "llama3-405b"};
}

LlamaShape PresetShape(std::string_view name) {
  // Published Llama 3 / 3.1 / 3.2 shapes (vocabulary 128256, head_dim = hidden / heads).
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
  } else if (name == "llama3-405b") {
    s.hidden = 16384, s.intermediate = 53248, s.layers = 126, s.heads = 128, s.tied = false;
  } else {
    std::string list;
    for (const std::string& p : PresetNames()) list += (list.empty() ? "" : ", ") + p;
    Fail("--model", "unknown preset '" + std::string(name) + "' (presets: " + list + ")");
  }
  s.head_dim = s.hidden / s.heads;
  return s;
}

ModelDescription ModelFromPreset(std::string_view name) {
  return LlamaModel(PresetShape(name), std::string(name), "llama");
}

}  // namespace tandem::planner
