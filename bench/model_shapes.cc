#include "bench/model_shapes.h"

#include <stdexcept>

namespace tandem::bench {
namespace {

struct LlamaConfig {
  size_t hidden, intermediate, layers, heads, kv_heads, head_dim, vocab;
  bool tied;
};

// hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads, head_dim, vocab_size, tie_word_embeddings (config.json of
// meta-llama/Llama-3.2-1B, Llama-3.2-3B, Meta-Llama-3-8B, Meta-Llama-3-70B).
LlamaConfig ConfigFor(const std::string& name) {
  if (name == "llama3-1b") return {2048, 8192, 16, 32, 8, 64, 128256, true};
  if (name == "llama3-3b") return {3072, 8192, 28, 24, 8, 128, 128256, true};
  if (name == "llama3-8b") return {4096, 14336, 32, 32, 8, 128, 128256, false};
  if (name == "llama3-70b") return {8192, 28672, 80, 64, 8, 128, 128256, false};
  throw std::invalid_argument("unknown model preset '" + name +
                              "' (llama3-1b, llama3-3b, llama3-8b, llama3-70b)");
}

}  // namespace

std::vector<TensorShape> LlamaShapes(const std::string& name) {
  const LlamaConfig c = ConfigFor(name);
  const size_t q_out = c.heads * c.head_dim, kv_out = c.kv_heads * c.head_dim;
  std::vector<TensorShape> out;
  out.push_back({"model.embed_tokens.weight", c.vocab * c.hidden});
  for (size_t l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    out.push_back({p + "self_attn.q_proj.weight", q_out * c.hidden});
    out.push_back({p + "self_attn.k_proj.weight", kv_out * c.hidden});
    out.push_back({p + "self_attn.v_proj.weight", kv_out * c.hidden});
    out.push_back({p + "self_attn.o_proj.weight", c.hidden * q_out});
    out.push_back({p + "mlp.gate_proj.weight", c.intermediate * c.hidden});
    out.push_back({p + "mlp.up_proj.weight", c.intermediate * c.hidden});
    out.push_back({p + "mlp.down_proj.weight", c.hidden * c.intermediate});
    out.push_back({p + "input_layernorm.weight", c.hidden});
    out.push_back({p + "post_attention_layernorm.weight", c.hidden});
  }
  out.push_back({"model.norm.weight", c.hidden});
  if (!c.tied) out.push_back({"lm_head.weight", c.vocab * c.hidden});
  return out;
}

size_t TotalElements(const std::vector<TensorShape>& shapes) {
  size_t total = 0;
  for (const TensorShape& s : shapes) total += s.numel;
  return total;
}

}  // namespace tandem::bench
