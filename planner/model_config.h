// Internal: model descriptions from parsed JSON, shared by the file/text readers and tests.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "tandem/planner.h"

namespace tandem::planner {

// Shape of a Llama-family decoder (Llama, Mistral, Qwen2).
struct LlamaShape {
  uint64_t hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  uint64_t vocab = 0;
  bool tied = false;
  bool qkv_bias = false;  // Qwen2
};

// Tensors of a Llama-family model in forward order: embed_tokens; per layer
// input_layernorm, q, k, v (+ biases), o, post_attention_layernorm, gate, up, down;
// norm; lm_head unless tied.
ModelDescription LlamaModel(const LlamaShape& s, std::string name, std::string arch);

// From a parsed config.json; `where` names it in errors.
ModelDescription ModelFromJson(const nlohmann::json& j, std::string_view where);

}  // namespace tandem::planner
