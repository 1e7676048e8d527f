// Mixture-of-experts and Qwen3 configs: the real config.json files in configs/ must give
// the published parameter totals, and unknown fields that may change the count must be
// refused.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "planner/model_config.h"
#include "tandem/error.h"
#include "tests/planner/temp_dir.h"

namespace tandem::planner {
namespace {

std::string Config(const std::string& model) {
  return std::string(TANDEM_PLANNER_CONFIGS) + "/" + model + "/config.json";
}

// The published figure, in billions, to the digits it is published with.
void ExpectPublished(uint64_t count, double billions, double digits) {
  EXPECT_NEAR(count / 1e9, billions, 0.5 * std::pow(10.0, -digits)) << count;
}

// Checked-in config `model`'s description, after expecting its architecture, its exact
// total and that the total is the published figure (ExpectPublished).
ModelDescription Published(const std::string& model, const std::string& arch, uint64_t total,
                           double billions, double digits) {
  SCOPED_TRACE(model);
  ModelDescription m = ModelFromConfigFile(Config(model));
  EXPECT_EQ(m.architecture, arch);
  EXPECT_EQ(m.total_params(), total);
  ExpectPublished(m.total_params(), billions, digits);
  return m;
}

// Expects `f` to throw Error(kInvalidArgument) whose message has every one of `parts`.
template <typename F>
void ExpectInvalid(F f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' not in: " << e.what();
  }
}

uint64_t Sum(const ModelDescription& m, const std::string& part) {
  uint64_t n = 0;
  for (const ModelTensor& t : m.tensors)
    if (t.name.find(part) != std::string::npos) n += t.numel;
  return n;
}

TEST(ModelMoe, Mixtral8x7bIs46_7B) {
  const ModelDescription m = Published("mixtral-8x7b", "mixtral", 46702792704u, 46.7, 1);
  // 8 experts x 3 matrices of 4096 x 14336 in each of 32 layers, plus the routers.
  EXPECT_EQ(Sum(m, ".experts."), 32ull * 8 * 3 * 4096 * 14336);
  EXPECT_EQ(Sum(m, "block_sparse_moe.gate."), 32ull * 8 * 4096);
  EXPECT_EQ(m.tensors.size(), 1u + 32 * (2 + 4 + 1 + 8 * 3) + 2);  // norms, attention, router
  EXPECT_EQ(m.num_layers, 32u);
  EXPECT_EQ(m.largest_layer_params(), (46702792704u - 2 * 32000ull * 4096 - 4096) / 32);
}

TEST(ModelMoe, Qwen3_30bA3bIs30_5B) {
  const ModelDescription m = Published("qwen3-30b-a3b", "qwen3_moe", 30532122624u, 30.5, 1);
  EXPECT_EQ(Sum(m, ".experts."), 48ull * 128 * 3 * 2048 * 768);
  EXPECT_EQ(Sum(m, "q_norm"), 48ull * 128);
  EXPECT_EQ(Sum(m, "mlp.gate_proj"), 0u);  // no dense layer
}

TEST(ModelMoe, Qwen3_8bIs8_2B) {
  const ModelDescription m = Published("qwen3-8b", "qwen3", 8190735360u, 8.2, 1);
  EXPECT_EQ(Sum(m, "self_attn.q_norm.weight") + Sum(m, "self_attn.k_norm.weight"), 36ull * 2 * 128);
  EXPECT_EQ(m.tensors.back().name, "lm_head.weight");
  EXPECT_TRUE(m.notes.empty());
}

TEST(ModelMoe, DeepseekV3Is671BWithoutItsMtpModule) {
  const ModelDescription m = Published("deepseek-v3", "deepseek_v3", 671026419200u, 671, 0);
  EXPECT_EQ(m.num_layers, 61u);
  // 3 dense layers, 58 with 256 routed experts, one shared expert and a scoring bias.
  EXPECT_EQ(Sum(m, "mlp.experts."), 58ull * 256 * 3 * 7168 * 2048);
  EXPECT_EQ(Sum(m, "shared_experts"), 58ull * 3 * 7168 * 2048);
  EXPECT_EQ(Sum(m, "e_score_correction_bias"), 58ull * 256);
  EXPECT_EQ(Sum(m, "mlp.gate_proj"), 3ull * 7168 * 18432);
  // Multi-head latent attention.
  EXPECT_EQ(Sum(m, "layers.0.self_attn."), 7168ull * 1536 + 1536 + 1536ull * 128 * 192 +
                                               7168ull * 576 + 512 + 512ull * 128 * 256 +
                                               128ull * 128 * 7168);
  EXPECT_EQ(Sum(m, "layers.61."), 0u);
  ASSERT_FALSE(m.notes.empty());
  EXPECT_NE(m.notes[0].find("11610068224 parameters more with --include-mtp"), std::string::npos)
      << m.notes[0];

  ConfigOptions with_mtp;
  with_mtp.include_mtp = true;
  const ModelDescription t = ModelFromConfigFile(Config("deepseek-v3"), with_mtp);
  EXPECT_EQ(t.total_params(), 671026419200u + 11610068224u);
  EXPECT_EQ(Sum(t, "layers.61."), 11610068224u);
  EXPECT_EQ(Sum(t, "layers.61.eh_proj"), 2ull * 7168 * 7168);
  EXPECT_EQ(t.tensors.back().name.rfind("model.layers.61.", 0), 0u);
}

TEST(ModelMoe, Qwen3_06bTiesItsEmbedding) {
  // Qwen3-0.6B: 0.6B, 0.44B without the embedding (its model card); tied head.
  const ModelDescription m = ModelFromConfigText(R"({"architectures": ["Qwen3ForCausalLM"],
    "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
    "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960,
    "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16,
    "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})",
                                                 "qwen3-0.6b");
  EXPECT_EQ(m.total_params(), 596049920u);
  ExpectPublished(m.total_params() - 151936ull * 1024, 0.44, 2);
  EXPECT_EQ(m.tensors.back().name, "model.norm.weight");
  EXPECT_TRUE(m.notes.empty());
}

TEST(ModelMoe, RealDenseConfigsHaveNoUnknownFields) {
  // Llama-3.1-8B's config.json, with its rope_scaling object: nothing refused or ignored.
  const ModelDescription l = ModelFromConfigText(R"({"architectures": ["LlamaForCausalLM"],
    "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072,
    "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
    "rope_type": "llama3"}, "rope_theta": 500000.0, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "transformers_version": "4.43.0.dev0", "use_cache": true,
    "vocab_size": 128256})",
                                                 "llama-3.1-8b");
  EXPECT_EQ(l.total_params(), 8030261248u);
  EXPECT_TRUE(l.notes.empty());
  // GPT-2's config.json.
  const ModelDescription g = ModelFromConfigText(R"({"activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1, "bos_token_id": 50256,
    "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768,
    "n_head": 12, "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1,
    "summary_activation": null, "summary_first_dropout": 0.1, "summary_proj_to_labels": true,
    "summary_type": "cls_index", "summary_use_proj": true,
    "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
    "vocab_size": 50257})",
                                                 "gpt2");
  EXPECT_EQ(g.total_params(), 124439808u);
  EXPECT_TRUE(g.notes.empty());
}

TEST(ModelMoe, Qwen3MoeSharedExpertWhenPresent) {
  const std::string base = R"("architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64,
    "moe_intermediate_size": 32, "num_experts": 4, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100)";
  const uint64_t plain = ModelFromConfigText("{" + base + "}", "p").total_params();
  const ModelDescription shared =
      ModelFromConfigText("{" + base + R"(, "shared_expert_intermediate_size": 48})", "s");
  // Per layer: a SwiGLU of width 48 and the shared expert's 1 x 64 gate.
  EXPECT_EQ(shared.total_params() - plain, 4u * (3 * 64 * 48 + 64));
  EXPECT_EQ(Sum(shared, "layers.2.mlp.shared_expert_gate.weight"), 64u);
}

TEST(ModelMoe, ModelDirectoryReadsItsConfig) {
  const std::string dir = std::string(TANDEM_PLANNER_CONFIGS) + "/qwen3-8b";
  EXPECT_EQ(ModelFromConfigFile(dir).total_params(), 8190735360u);
  TempDir empty;
  try {
    ModelFromConfigFile(empty.path());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIO);
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

TEST(ModelMoe, Qwen15MoeSharedExpertAndDeepseekV2Lite) {
  // Qwen1.5-MoE-A2.7B (Qwen2MoeForCausalLM): 14.3B, with a shared expert and its gate.
  const ModelDescription q = ModelFromConfigText(R"({"architectures": ["Qwen2MoeForCausalLM"],
    "hidden_size": 2048, "intermediate_size": 5632, "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632, "num_experts": 60, "num_experts_per_tok": 4,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "num_hidden_layers": 24,
    "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 151936,
    "tie_word_embeddings": false})",
                                                 "qwen1.5-moe");
  EXPECT_EQ(q.total_params(), 14315784192u);
  EXPECT_EQ(Sum(q, "shared_expert_gate"), 24ull * 2048);
  // DeepSeek-V2-Lite: 15.7B, full-rank q_proj (q_lora_rank null), no scoring bias.
  const ModelDescription d = ModelFromConfigText(R"({"architectures": ["DeepseekV2ForCausalLM"],
    "hidden_size": 2048, "intermediate_size": 10944, "moe_intermediate_size": 1408,
    "num_hidden_layers": 27, "num_attention_heads": 16, "num_key_value_heads": 16,
    "n_routed_experts": 64, "n_shared_experts": 2, "first_k_dense_replace": 1,
    "moe_layer_freq": 1, "q_lora_rank": null, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 102400, "topk_method": "greedy",
    "tie_word_embeddings": false})",
                                                 "deepseek-v2-lite");
  EXPECT_EQ(d.total_params(), 15706484224u);
  EXPECT_EQ(Sum(d, "q_proj"), 27ull * 2048 * 16 * 192);
}

TEST(ModelMoe, SparseStepAndMlpOnlyLayersMakeDenseLayers) {
  const std::string base = R"("architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64,
    "intermediate_size": 256, "moe_intermediate_size": 32, "num_experts": 4,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "vocab_size": 100, "tie_word_embeddings": true)";
  const ModelDescription all = ModelFromConfigText("{" + base + "}", "all");
  const ModelDescription step2 =
      ModelFromConfigText("{" + base + R"(, "decoder_sparse_step": 2})", "step2");
  const ModelDescription only =
      ModelFromConfigText("{" + base + R"(, "mlp_only_layers": [0, 3]})", "only");
  EXPECT_EQ(Sum(all, "mlp.gate_proj"), 0u);
  // decoder_sparse_step 2: layers 1 and 3 sparse, 0 and 2 dense.
  EXPECT_EQ(Sum(step2, "mlp.gate_proj"), 2ull * 64 * 256);
  EXPECT_EQ(Sum(step2, "layers.0.mlp.experts"), 0u);
  EXPECT_GT(Sum(step2, "layers.1.mlp.experts"), 0u);
  EXPECT_EQ(Sum(only, "layers.0.mlp.gate_proj") + Sum(only, "layers.3.mlp.gate_proj"),
            2ull * 64 * 256);
  EXPECT_EQ(Sum(only, "layers.1.mlp.gate_proj"), 0u);
  // A dense layer needs intermediate_size.
  std::string no_inter = base;
  no_inter.replace(no_inter.find("\"intermediate_size\": 256,"), 26, "");
  EXPECT_NO_THROW(ModelFromConfigText("{" + no_inter + "}", "x"));
  ExpectInvalid([&] { ModelFromConfigText("{" + no_inter + R"(, "mlp_only_layers": [2]})", "x"); },
                {"intermediate_size", "layer 2"});
}

TEST(ConfigFields, UnknownCountChangingFieldIsAnError) {
  const std::string llama = R"("architectures": ["LlamaForCausalLM"], "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "vocab_size": 100)";
  // Each of these may change the count and no Llama reader reads it.
  for (const char* field : {"num_experts", "lora_rank", "n_routed_experts", "num_heads_extra",
                            "extra_layers", "shared_intermediate_size", "vocab_padding",
                            "hidden_size_per_head", "embed_scale_dim", "moe_layer_freq"}) {
    const std::string text = "{" + llama + ", \"" + field + "\": 8}";
    ExpectInvalid([&] { ModelFromConfigText(text, "cfg.json"); },
                  {"cfg.json", std::string("unknown field '") + field + "'"});
  }
  // A field of another architecture is refused too: Qwen3's attention_bias is read by the
  // Qwen3 and Llama readers, not by Mistral's.
  ExpectInvalid(
      [&] {
        ModelFromConfigText(R"({"architectures": ["MistralForCausalLM"], "hidden_size": 64,
          "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
          "vocab_size": 100, "attention_bias": true})",
                            "m");
      },
      {"attention_bias"});
}

TEST(ConfigFields, InertAndHarmlessFields) {
  // Known not to change the count: accepted silently.
  const ModelDescription a = ModelFromConfigText(R"({"architectures": ["LlamaForCausalLM"],
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "vocab_size": 100, "rope_theta": 1e4, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 4096, "layer_types": ["full_attention", "full_attention"],
    "num_experts_per_tok": 2, "torch_dtype": "bfloat16"})",
                                                 "a");
  EXPECT_TRUE(a.notes.empty());
  // Unknown but harmless by name: accepted, and named in a note.
  const ModelDescription b = ModelFromConfigText(R"({"architectures": ["LlamaForCausalLM"],
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "vocab_size": 100, "fancy_flag": true, "greeting": "hi"})",
                                                 "b");
  EXPECT_EQ(b.total_params(), a.total_params());
  ASSERT_EQ(b.notes.size(), 1u);
  EXPECT_NE(b.notes[0].find("fancy_flag, greeting"), std::string::npos) << b.notes[0];
  // The lists themselves.
  for (const char* inert : {"rope_theta", "num_experts_per_tok", "max_position_embeddings",
                            "quantization_config", "sliding_window"})
    EXPECT_TRUE(FieldKnownInert(inert)) << inert;
  for (const char* suggestive :
       {"expert", "lora", "rank", "head", "layer", "intermediate", "vocab", "hidden", "embed"})
    EXPECT_FALSE(FieldSuggestsCount(std::string("x_") + suggestive + "_y").empty()) << suggestive;
  EXPECT_TRUE(FieldSuggestsCount("greeting").empty());
}

TEST(ConfigFields, AttentionAndMlpBiasesCount) {
  const std::string base = R"("hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "vocab_size": 100)";
  const uint64_t plain =
      ModelFromConfigText(R"({"architectures": ["LlamaForCausalLM"], )" + base + "}", "p")
          .total_params();
  const uint64_t biased = ModelFromConfigText(R"({"architectures": ["LlamaForCausalLM"], )" + base +
                                                  R"(, "attention_bias": true,
    "mlp_bias": true})",
                                              "b")
                              .total_params();
  // Per layer: q 64 + k 32 + v 32 + o 64, and gate 128 + up 128 + down 64.
  EXPECT_EQ(biased - plain, 2u * (64 + 32 + 32 + 64 + 128 + 128 + 64));
}

TEST(ConfigFields, DeepseekNeedsItsLatentRanks) {
  ExpectInvalid(
      [] {
        ModelFromConfigText(R"({"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 64,
          "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
          "vocab_size": 100, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8})",
                            "ds.json");
      },
      {"ds.json", "kv_lora_rank"});
}

}  // namespace
}  // namespace tandem::planner
