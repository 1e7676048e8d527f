// Mixture-of-experts config.json readers: Mixtral, Qwen2-MoE / Qwen3-MoE and
// DeepSeek-V2 / V3 (multi-head latent attention). docs/planner.md "Model descriptions"
// lists the tensors each writes; the tests check the published totals.
#include <algorithm>
#include <string>

#include "planner/model_config.h"

namespace tandem::planner {
namespace {

// Routed experts under `prefix` ("...experts."), each a SwiGLU MLP of width `inter`.
void AddExperts(Builder* b, const std::string& prefix, uint64_t experts, uint64_t h, uint64_t inter,
                int l) {
  for (uint64_t e = 0; e < experts; ++e)
    AddGatedMlp(b, prefix + std::to_string(e) + ".", h, inter, l);
}

ModelDescription Mixtral(ConfigReader* r) {
  const LlamaShape s = ReadLlamaShape(r);  // intermediate_size is each expert's width
  const uint64_t experts = r->Count("num_local_experts");
  ModelDescription m = LlamaDecoderModel(
      s, std::string(r->where()), "mixtral", [&](Builder* b, const std::string& p, int l) {
        const uint64_t h = s.hidden;
        b->Add(p + "block_sparse_moe.gate.weight", {experts, h}, l);
        for (uint64_t e = 0; e < experts; ++e) {
          const std::string x = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
          b->Add(x + "w1.weight", {s.intermediate, h}, l);
          b->Add(x + "w3.weight", {s.intermediate, h}, l);
          b->Add(x + "w2.weight", {h, s.intermediate}, l);
        }
      });
  TransformerShape& t = m.transformer;
  t.moe_layers = s.layers;
  t.experts = experts;
  t.experts_per_token = r->CountOr("num_experts_per_tok", 2);
  t.expert_intermediate = s.intermediate;
  t.intermediate = 0;
  ReadSlidingWindow(r, "mixtral", s.layers, &t);
  return m;
}

// Qwen2-MoE and Qwen3-MoE: layer i is sparse unless listed in mlp_only_layers or
// (i + 1) is not a multiple of decoder_sparse_step; dense layers use intermediate_size.
ModelDescription QwenMoe(ConfigReader* r, const std::string& arch) {
  LlamaShape s = ReadLlamaShape(r, /*need_intermediate=*/false);
  if (arch == "qwen2_moe") {
    s.qkv_bias = true;
  } else {
    s.qkv_bias = s.o_bias = r->FlagOr("attention_bias", false);
    s.qk_norm = true;
  }
  // transformers 5 names it num_local_experts, as Mixtral; earlier configs num_experts.
  const uint64_t experts = r->NaturalOr("num_experts", r->NaturalOr("num_local_experts", 0));
  const uint64_t expert_inter = experts > 0 ? r->Count("moe_intermediate_size") : 0;
  r->Known("moe_intermediate_size");
  const uint64_t step = r->CountOr("decoder_sparse_step", 1);
  const std::vector<uint64_t> mlp_only = r->IndexList("mlp_only_layers");
  const uint64_t shared = r->NaturalOr("shared_expert_intermediate_size", 0);
  auto sparse = [&](uint64_t i) {
    return experts > 0 && (i + 1) % step == 0 &&
           std::find(mlp_only.begin(), mlp_only.end(), i) == mlp_only.end();
  };
  for (uint64_t i = 0; i < s.layers; ++i)
    if (!sparse(i) && s.intermediate == 0)
      r->Fail("missing key 'intermediate_size' (layer " + std::to_string(i) +
              " is dense: mlp_only_layers or decoder_sparse_step)");
  ModelDescription m = LlamaDecoderModel(
      s, std::string(r->where()), arch, [&](Builder* b, const std::string& p, int l) {
        const uint64_t h = s.hidden;
        if (!sparse(static_cast<uint64_t>(l))) {
          AddGatedMlp(b, p + "mlp.", h, s.intermediate, l);
          return;
        }
        b->Add(p + "mlp.gate.weight", {experts, h}, l);
        AddExperts(b, p + "mlp.experts.", experts, h, expert_inter, l);
        if (shared > 0) {
          AddGatedMlp(b, p + "mlp.shared_expert.", h, shared, l);
          b->Add(p + "mlp.shared_expert_gate.weight", {1, h}, l);
        }
      });
  TransformerShape& t = m.transformer;
  for (uint64_t i = 0; i < s.layers; ++i) t.moe_layers += sparse(i) ? 1 : 0;
  t.experts = experts;
  t.experts_per_token = experts > 0 ? r->CountOr("num_experts_per_tok", 1) : 0;
  t.expert_intermediate = expert_inter;
  t.shared_intermediate = shared;
  ReadSlidingWindow(r, arch, s.layers, &t);
  return m;
}

struct MlaShape {
  uint64_t hidden = 0, inter = 0, heads = 0, q_lora = 0, kv_lora = 0, nope = 0, rope = 0, v = 0;
  uint64_t routed = 0, shared = 0, expert_inter = 0, first_dense = 0, freq = 1;
  bool attention_bias = false, score_bias = false;
  bool Sparse(uint64_t i) const { return routed > 0 && i >= first_dense && i % freq == 0; }
};

// DeepSeek's multi-head latent attention (q through a low-rank q_a/q_b pair unless
// q_lora_rank is null, k and v from one low-rank kv_a/kv_b pair).
void AddMlaAttention(Builder* b, const std::string& p, const MlaShape& s, int l) {
  const uint64_t h = s.hidden, qk = s.nope + s.rope;
  if (s.q_lora > 0) {
    b->Add(p + "self_attn.q_a_proj.weight", {s.q_lora, h}, l);
    if (s.attention_bias) b->Add(p + "self_attn.q_a_proj.bias", s.q_lora, l);
    b->Add(p + "self_attn.q_a_layernorm.weight", s.q_lora, l);
    b->Add(p + "self_attn.q_b_proj.weight", {s.heads * qk, s.q_lora}, l);
  } else {
    b->Add(p + "self_attn.q_proj.weight", {s.heads * qk, h}, l);
  }
  b->Add(p + "self_attn.kv_a_proj_with_mqa.weight", {s.kv_lora + s.rope, h}, l);
  if (s.attention_bias) b->Add(p + "self_attn.kv_a_proj_with_mqa.bias", s.kv_lora + s.rope, l);
  b->Add(p + "self_attn.kv_a_layernorm.weight", s.kv_lora, l);
  b->Add(p + "self_attn.kv_b_proj.weight", {s.heads * (s.nope + s.v), s.kv_lora}, l);
  b->Add(p + "self_attn.o_proj.weight", {h, s.heads * s.v}, l);
  if (s.attention_bias) b->Add(p + "self_attn.o_proj.bias", h, l);
}

// DeepSeek's MLP for layer `l`: dense, or routed experts plus shared experts.
void AddDeepseekMlp(Builder* b, const std::string& p, const MlaShape& s, int l) {
  const uint64_t h = s.hidden;
  if (!s.Sparse(static_cast<uint64_t>(l))) {
    AddGatedMlp(b, p + "mlp.", h, s.inter, l);
    return;
  }
  b->Add(p + "mlp.gate.weight", {s.routed, h}, l);
  if (s.score_bias) b->Add(p + "mlp.gate.e_score_correction_bias", s.routed, l);
  AddExperts(b, p + "mlp.experts.", s.routed, h, s.expert_inter, l);
  if (s.shared > 0) AddGatedMlp(b, p + "mlp.shared_experts.", h, s.expert_inter * s.shared, l);
}

LayerPart MlaAttention(const MlaShape& s) {
  return [&s](Builder* b, const std::string& p, int l) { AddMlaAttention(b, p, s, l); };
}
LayerPart DeepseekMlp(const MlaShape& s) {
  return [&s](Builder* b, const std::string& p, int l) { AddDeepseekMlp(b, p, s, l); };
}

// A multi-token-prediction module (DeepSeek-V3 section 2.2) as block `i`: enorm, hnorm,
// eh_proj (2h -> h), a decoder block, shared_head.norm. Its embedding and output head
// are the main model's.
void AddMtpModule(Builder* b, const MlaShape& s, uint64_t i) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  const int l = static_cast<int>(i);
  b->Add(p + "enorm.weight", s.hidden, l);
  b->Add(p + "hnorm.weight", s.hidden, l);
  b->Add(p + "eh_proj.weight", {s.hidden, 2 * s.hidden}, l);
  AddDecoderLayer(b, p, s.hidden, l, MlaAttention(s), DeepseekMlp(s));
  b->Add(p + "shared_head.norm.weight", s.hidden, l);
}

ModelDescription Deepseek(ConfigReader* r, const std::string& arch, const ConfigOptions& opt) {
  MlaShape s;
  s.hidden = r->Count("hidden_size");
  s.inter = r->Count("intermediate_size");
  const uint64_t layers = r->Count("num_hidden_layers");
  s.heads = r->Count("num_attention_heads");
  r->Known("num_key_value_heads");  // MLA: keys and values come from kv_b_proj per head
  r->Known("head_dim");             // transformers sets it to qk_rope_head_dim
  r->Known("qk_head_dim");          // transformers 5: qk_nope_head_dim + qk_rope_head_dim
  const uint64_t vocab = r->Count("vocab_size");
  const bool tied = r->FlagOr("tie_word_embeddings", false);
  s.q_lora = r->NaturalOr("q_lora_rank", 0);  // null: a full-rank q_proj (V2-Lite)
  s.kv_lora = r->Count("kv_lora_rank");
  s.nope = r->Count("qk_nope_head_dim");
  s.rope = r->Count("qk_rope_head_dim");
  s.v = r->Count("v_head_dim");
  s.routed = r->NaturalOr("n_routed_experts", 0);
  s.shared = r->NaturalOr("n_shared_experts", 0);
  s.expert_inter = s.routed > 0 ? r->Count("moe_intermediate_size") : 0;
  r->Known("moe_intermediate_size");
  s.first_dense = r->NaturalOr("first_k_dense_replace", 0);
  s.freq = r->CountOr("moe_layer_freq", 1);
  s.attention_bias = r->FlagOr("attention_bias", false);
  s.score_bias = r->TextOr("topk_method", "greedy") == "noaux_tc";
  const uint64_t mtp = r->NaturalOr("num_nextn_predict_layers", 0);

  ModelDescription m;
  m.name = std::string(r->where());
  m.architecture = arch;
  m.hidden_size = s.hidden;
  m.num_layers = layers;
  m.num_heads = s.heads;
  m.vocab_size = vocab;
  Builder b(&m);
  AddDecoder(&b, vocab, s.hidden, layers, tied, MlaAttention(s), DeepseekMlp(s));
  // The MTP modules run after the main model, on its last hidden states.
  ModelDescription extra;
  Builder mtp_builder(opt.include_mtp ? &m : &extra);
  for (uint64_t k = 0; k < mtp; ++k) AddMtpModule(&mtp_builder, s, layers + k);
  if (mtp > 0) {
    const std::string n = std::to_string(mtp) + " multi-token-prediction module(s)";
    m.notes.push_back(opt.include_mtp
                          ? n + " counted (--include-mtp); they share the embedding and head"
                          : n + " (num_nextn_predict_layers) not counted: " +
                                std::to_string(extra.total_params()) +
                                " parameters more with --include-mtp");
  }
  // Multi-head latent attention as transformers runs it: every head has its own key
  // (nope + rope dims) and value (v_head_dim) after kv_b_proj.
  TransformerShape& t = m.transformer;
  t.intermediate = s.inter;
  t.tied_embeddings = tied;
  t.kv_heads = s.heads;
  t.head_dim = s.nope + s.rope;
  t.v_head_dim = s.v;
  for (uint64_t i = 0; i < layers; ++i) t.moe_layers += s.Sparse(i) ? 1 : 0;
  t.experts = s.routed;
  t.experts_per_token = s.routed > 0 ? r->CountOr("num_experts_per_tok", 1) : 0;
  t.expert_intermediate = s.expert_inter;
  t.shared_intermediate = s.expert_inter * s.shared;
  m.notes.push_back(
      "multi-head latent attention: the transformers activation estimate counts its keys and "
      "values per head after kv_b_proj, not its low-rank norms (not measured)");
  return m;
}

}  // namespace

ModelDescription MoeFromConfig(ConfigReader* r, const std::string& arch,
                               const ConfigOptions& options) {
  if (arch == "mixtral") return Mixtral(r);
  if (arch == "qwen2_moe" || arch == "qwen3_moe") return QwenMoe(r, arch);
  return Deepseek(r, arch, options);
}

}  // namespace tandem::planner
