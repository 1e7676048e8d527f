// Tensor lists of public Llama-3 models, for benchmarks that step realistic tensor mixes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tandem::bench {

struct TensorShape {
  std::string name;  // Hugging Face parameter name, e.g. "model.layers.3.mlp.up_proj.weight"
  size_t numel;
};

// Presets "llama3-1b", "llama3-3b" (Llama-3.2, tied embeddings), "llama3-8b", "llama3-70b"
// (Llama-3/3.1, separate lm_head), from the published config.json values: per layer
// q, k, v, o, gate, up, down projections and the two RMSNorm weights; then embed_tokens,
// the final norm and, when untied, lm_head. Throws std::invalid_argument for other names.
std::vector<TensorShape> LlamaShapes(const std::string& name);

// Sum of numel.
size_t TotalElements(const std::vector<TensorShape>& shapes);

}  // namespace tandem::bench
