// A model as a list of named tensor shapes ({"name", "shape", "dtype"}), as a Python
// wrapper writes it from a live torch module's named_parameters().
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/model_config.h"
#include "planner/read_file.h"
#include "tandem/error.h"
#include "tandem/planner.h"

namespace tandem::planner {
namespace {

[[noreturn]] void Fail(std::string_view where, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, std::string(where) + ": " + what);
}

// "torch.bfloat16", "bfloat16", "bf16", ... -> DType; false if not a parameter dtype.
bool ParamDType(std::string s, DType* out) {
  if (s.rfind("torch.", 0) == 0) s = s.substr(6);
  if (s == "float32" || s == "float" || s == "f32" || s == "fp32") return *out = DType::kF32, true;
  if (s == "bfloat16" || s == "bf16") return *out = DType::kBF16, true;
  if (s == "float16" || s == "half" || s == "f16" || s == "fp16") return *out = DType::kF16, true;
  return false;
}

// The block index after ".layers.", ".h." or ".blocks." (or at the start), else -1.
int LayerOf(const std::string& name) {
  for (const char* marker : {"layers.", "h.", "blocks."}) {
    for (size_t at = name.find(marker); at != std::string::npos; at = name.find(marker, at + 1)) {
      if (at != 0 && name[at - 1] != '.') continue;
      size_t i = at + std::string_view(marker).size(), n = 0;
      int layer = 0;
      for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) && n < 7;
           ++i, ++n)
        layer = layer * 10 + (name[i] - '0');
      if (n > 0 && (i == name.size() || name[i] == '.')) return layer;
    }
  }
  return -1;
}

}  // namespace

ModelDescription ModelFromParamsJson(std::string_view text, std::string_view where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    Fail(where, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_array()) Fail(where, "expected a JSON list of {\"name\", \"shape\", \"dtype\"}");
  if (j.empty()) Fail(where, "the tensor list is empty");
  ModelDescription m;
  m.name = std::string(where);
  m.architecture = "params";
  bool same_dtype = true;
  size_t empty = 0;
  uint64_t max_layer = 0, params = 0;
  bool any_layer = false;
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& e = j[i];
    const std::string at = "tensor " + std::to_string(i);
    if (!e.is_object()) Fail(where, at + " must be an object, got " + e.dump());
    if (!e.contains("name") || !e.at("name").is_string() || e.at("name").get<std::string>().empty())
      Fail(where, at + ": field 'name' must be a non-empty string");
    const std::string name = e.at("name").get<std::string>();
    const std::string who = at + " ('" + name + "')";
    if (!e.contains("shape") || !e.at("shape").is_array())
      Fail(where, who + ": field 'shape' must be a list of integers");
    std::vector<uint64_t> shape;
    for (const nlohmann::json& d : e.at("shape")) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        Fail(where, who + ": field 'shape' must list integers >= 0, got " + e.at("shape").dump());
      shape.push_back(d.get<uint64_t>());
    }
    const uint64_t numel = CheckModelRoom(where, name, shape, m.tensors.size(), params);
    if (!e.contains("dtype") || !e.at("dtype").is_string())
      Fail(where, who + ": field 'dtype' must be a string");
    DType dt;
    if (!ParamDType(e.at("dtype").get<std::string>(), &dt))
      Fail(where, who + ": dtype '" + e.at("dtype").get<std::string>() +
                      "' is not a parameter dtype (float32, bfloat16, float16)");
    if (m.dtype && *m.dtype != dt) same_dtype = false;
    if (!m.dtype) m.dtype = dt;
    if (numel == 0) {
      ++empty;
      continue;
    }
    const int layer = LayerOf(name);
    if (layer >= 0) any_layer = true, max_layer = std::max<uint64_t>(max_layer, layer);
    m.tensors.push_back({name, numel, layer, std::move(shape)});
    params += numel;
  }
  if (!same_dtype) {
    m.dtype.reset();
    m.notes.push_back("the tensors have mixed dtypes: --param-dtype applies to all of them");
  }
  if (empty > 0) m.notes.push_back(std::to_string(empty) + " empty tensor(s) left out");
  if (m.tensors.empty()) Fail(where, "every tensor is empty");
  if (any_layer) m.num_layers = max_layer + 1;
  return m;
}

ModelDescription ModelFromParamsFile(const std::string& path) {
  return ModelFromParamsJson(ReadWholeFile(path, "tensor list", kMaxTensorListBytes), path);
}

ModelDescription WithConfigShape(ModelDescription t, const ModelDescription& c) {
  // The embedding's width is the hidden size (a vocabulary x hidden table).
  auto ends = [](const std::string& s, std::string_view tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  for (const ModelTensor& x : t.tensors)
    if ((ends(x.name, "embed_tokens.weight") || ends(x.name, "wte.weight")) &&
        x.shape.size() == 2 && x.shape[1] != c.hidden_size)
      Fail(t.name, "tensor '" + x.name + "' is " + std::to_string(x.shape[0]) + " x " +
                       std::to_string(x.shape[1]) + ", but " + c.name + " has hidden size " +
                       std::to_string(c.hidden_size) + ": not this model's config");
  const uint64_t described = c.total_params(), listed = t.total_params();
  t.architecture = c.architecture;
  t.hidden_size = c.hidden_size;
  t.num_layers = c.num_layers;
  t.num_heads = c.num_heads;
  t.vocab_size = c.vocab_size;
  t.transformers_config = c.transformers_config;
  t.transformer = c.transformer;
  // The config's notes about what it counts do not apply to the tensor list; those about
  // the activation estimate do.
  for (const std::string& n : c.notes)
    if (n.find("activation") != std::string::npos) t.notes.push_back(n);
  if (described != listed)
    t.notes.push_back("the tensor list has " + std::to_string(listed) +
                      " trainable parameters, its config describes " + std::to_string(described) +
                      " (frozen, added or tied tensors): the plan places and counts the list's");
  return t;
}

}  // namespace tandem::planner
