// Gemma 2 and Gemma 3 config.json readers (docs/planner.md "Model descriptions"): a
// Llama-style decoder with grouped-query attention whose layers have four RMSNorms
// (input, post-attention, pre- and post-feedforward), a GeGLU MLP, tied embeddings by
// default, an explicit head_dim, sliding-window layers, and (Gemma 2) tanh soft-capping
// of the attention and output logits; Gemma 3 adds RMSNorms on queries and keys.
#include <string>

#include "planner/model_config.h"

namespace tandem::planner {
namespace {

// Gemma 3's layer types when the config has no layer_types list: every
// sliding_window_pattern-th layer attends globally, the others within the window.
uint64_t Gemma3SlidingLayers(ConfigReader* r, uint64_t layers) {
  uint64_t pattern = r->CountOr("sliding_window_pattern", 0);
  pattern = r->CountOr("_sliding_window_pattern", pattern != 0 ? pattern : 6);
  uint64_t sliding = 0;
  for (uint64_t i = 0; i < layers; ++i) sliding += (i + 1) % pattern != 0 ? 1 : 0;
  return sliding;
}

ModelDescription GemmaText(ConfigReader* r, const std::string& arch) {
  const bool gemma3 = arch == "gemma3";
  LlamaShape s = ReadLlamaShape(r);
  if (!r->Present("tie_word_embeddings")) s.tied = true;  // Gemma's default
  s.qkv_bias = s.o_bias = r->FlagOr("attention_bias", false);
  s.qk_norm = gemma3;
  // Known, not counted: the activation and its scaling of the queries.
  r->Known("hidden_activation");
  r->Known("query_pre_attn_scalar");
  r->Known("use_bidirectional_attention");  // which tokens attend, not how many weights
  ModelDescription m = LlamaDecoderModel(
      s, std::string(r->where()), arch, [&s](Builder* b, const std::string& p, int l) {
        b->Add(p + "pre_feedforward_layernorm.weight", s.hidden, l);
        AddGatedMlp(b, p + "mlp.", s.hidden, s.intermediate, l);
        b->Add(p + "post_feedforward_layernorm.weight", s.hidden, l);
      });
  TransformerShape& t = m.transformer;
  t.gemma_norms = true;
  const uint64_t window = r->CountOr("sliding_window", 4096);
  if (!ReadLayerTypes(r, s.layers, &t.sliding_layers))
    t.sliding_layers = gemma3 ? Gemma3SlidingLayers(r, s.layers)
                              : (s.layers + 1) / 2;  // Gemma 2: the even layers
  r->Known("sliding_window_pattern");
  r->Known("_sliding_window_pattern");
  t.sliding_window = t.sliding_layers > 0 ? window : 0;
  t.layer_types = 2;  // transformers builds a mask for each kind, used or not
  // Gemma 3's local and global layers rotate with their own base frequency.
  t.rope_tables = gemma3 ? 2 : 1;
  t.attention_softcap = r->NumberGiven("attn_logit_softcapping");
  t.final_softcap = r->NumberGiven("final_logit_softcapping");
  // transformers' Gemma 2 has no SDPA path (it cannot soft-cap): it runs eager attention.
  t.eager_attention = !gemma3;
  if (gemma3) r->Known("rope_local_base_freq");
  return m;
}

}  // namespace

ModelDescription GemmaFromConfig(ConfigReader* r, const std::string& arch, bool multimodal,
                                 const ConfigOptions& options) {
  if (!multimodal) return GemmaText(r, arch);
  // Gemma3ForConditionalGeneration: its language model is text_config's Gemma 3.
  const std::string where = std::string(r->where()) + ": text_config";
  ConfigReader text(r->Object("text_config"), where);
  ModelDescription m = GemmaText(&text, "gemma3");
  text.Finish(&m, options.shape_only);
  m.name = std::string(r->where());
  for (const char* k : {"vision_config", "mm_tokens_per_image", "boi_token_index",
                        "eoi_token_index", "image_token_index", "initializer_range",
                        "tie_word_embeddings"})
    r->Known(k);
  m.notes.push_back(
      "Gemma3ForConditionalGeneration: its language model (text_config) only; the vision "
      "tower (vision_config) and the multimodal projector are not counted: plan the live "
      "module (tandem.plan(model)) to count every trainable tensor");
  return m;
}

}  // namespace tandem::planner
