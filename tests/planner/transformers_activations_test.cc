// The activation model of transformers' implementation (Note [Transformers activations]
// in planner/activations_hf.cc) and the config readers that feed it: Gemma 2 and 3, the
// transformer shape of every family, a tensor list with its config.
#include <string>

#include <gtest/gtest.h>

#include "planner/model_config.h"
#include "planner/plan.h"
#include "tandem/error.h"
#include "tests/planner/temp_dir.h"

namespace tandem::planner {
namespace {

const std::string kConfigs = TANDEM_PLANNER_CONFIGS;

// A small Llama as bench/activation_trace.py traced it: hidden 256, MLP 688, 4 heads of
// 64 (2 key-value heads), vocabulary 32000.
ModelDescription SmallLlama(uint64_t layers, uint64_t vocab) {
  return ModelFromConfigText(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 256,
      "intermediate_size": 688, "num_hidden_layers": )" + std::to_string(layers) + R"(,
      "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": )" +
                                 std::to_string(vocab) + "}",
                             "small llama");
}

ActivationShape Seq(uint64_t s, uint64_t batch = 1) {
  ActivationShape x;
  x.seq_len = s;
  x.batch = batch;
  return x;
}

TEST(TransformersActivations, MatchesTheTracedLlama) {
  // Traced (torch 2.11, transformers 5.23, CPU, bf16): 241,985,544 bytes at the peak of
  // two layers at seq 512, in the loss's backward; the planner leaves out the loss's two
  // 4-byte scalars.
  const TransformersActivations a = EstimateTransformersActivations(
      SmallLlama(2, 32000), Seq(512), Recompute::kNone, DType::kBF16);
  EXPECT_STREQ(a.where(), "loss");
  EXPECT_EQ(a.peak(), 241985536u);
  // Per token: a layer keeps 16 h + 4 (a d) + 4 (kv d) + 8 i + 4 a + 8 = 11160 bytes; the
  // logits 2 V held and 12 V of fp32 loss buffers.
  EXPECT_EQ(a.layer, 11160u * 512);
  EXPECT_EQ(a.kept, 2 * 11160u * 512);
  EXPECT_EQ(a.logits, 14u * 32000 * 512);
  // Gradient checkpointing with a tiny vocabulary: the peak is the last layer rebuilt in
  // backward (traced: 8,110,088 bytes, use_reentrant False).
  const TransformersActivations c = EstimateTransformersActivations(
      SmallLlama(2, 64), Seq(512), Recompute::kFull, DType::kBF16);
  EXPECT_STREQ(c.where(), "MLP backward");
  EXPECT_EQ(c.peak(), 8110080u + 512 * 512);  // + use_reentrant True's copy of the input
  // fp32 parameters: fp32 activations (traced 556,084 bytes per token).
  EXPECT_EQ(EstimateTransformersActivations(SmallLlama(2, 32000), Seq(512), Recompute::kNone,
                                            DType::kF32)
                .peak(),
            556084u * 512);
}

TEST(TransformersActivations, LinearInTokensWithoutEagerAttention) {
  const ModelDescription m = SmallLlama(4, 32000);
  const uint64_t one = EstimateTransformersActivations(m, Seq(1024), Recompute::kFull,
                                                       DType::kBF16).peak();
  EXPECT_EQ(EstimateTransformersActivations(m, Seq(1024, 4), Recompute::kFull, DType::kBF16).peak(),
            4 * one);
  EXPECT_EQ(EstimateTransformersActivations(m, Seq(2048), Recompute::kFull, DType::kBF16).peak(),
            2 * one);
}

TEST(TransformersActivations, RefusesWhatItCannotModel) {
  EXPECT_THROW(EstimateTransformersActivations(SmallLlama(2, 64), Seq(512),
                                               Recompute::kSelective, DType::kBF16),
               Error);
  EXPECT_THROW(EstimateTransformersActivations(SmallLlama(2, 64), Seq(0), Recompute::kNone,
                                               DType::kBF16),
               Error);
  // A preset has the shape too: the transformers model applies when asked.
  EXPECT_GT(EstimateTransformersActivations(ModelFromPreset("llama3-8b"), Seq(2048),
                                            Recompute::kFull, DType::kBF16)
                .peak(),
            0u);
}

TEST(TransformersActivations, Llama8bAt2048IsTheLossNotTheLayers) {
  // With checkpointing the 8B's peak is the loss's backward: 14 bytes per token and
  // vocabulary entry (3.4 GiB), beside each layer's 8 KiB input.
  const TransformersActivations a = EstimateTransformersActivations(
      ModelFromPreset("llama3-8b"), Seq(2048), Recompute::kFull, DType::kBF16);
  EXPECT_STREQ(a.where(), "loss");
  EXPECT_EQ(a.kept, 32u * 2 * 4096 * 2048);
  EXPECT_EQ(a.logits, 14ull * 128256 * 2048);
  // Megatron's formula counts the logits once in fp32 and a whole layer beside them.
  ActivationShape k = Seq(2048);
  k.hidden = 4096, k.layers = 32, k.heads = 32, k.vocab = 128256;
  EXPECT_LT(EstimateActivationBytes(k, Recompute::kFull), a.peak());
}

TEST(TransformersActivations, SlidingWindowMaskFromTheWindowOn) {
  ModelDescription m = SmallLlama(2, 64);
  m.transformer.sliding_window = 256;
  m.transformer.sliding_layers = 2;
  const auto at = [&](uint64_t s) {
    return EstimateTransformersActivations(m, Seq(s), Recompute::kNone, DType::kBF16);
  };
  ModelDescription plain = SmallLlama(2, 64);
  const auto plain_at = [&](uint64_t s) {
    return EstimateTransformersActivations(plain, Seq(s), Recompute::kNone, DType::kBF16);
  };
  // Below the window SDPA runs causal, no mask; from it on, every sliding layer keeps k
  // and v repeated to every head and the float mask (w s).
  EXPECT_EQ(at(128).kept, plain_at(128).kept);
  EXPECT_EQ(at(256).kept, plain_at(256).kept + 2 * (2 * (256 + 256) + 2 * 256) * 256);
  // The boolean mask goes with forward, unless it is the checkpointed layers' input.
  EXPECT_EQ(at(256).shared, plain_at(256).shared);
  const auto full = [&](const ModelDescription& model) {
    return EstimateTransformersActivations(model, Seq(256), Recompute::kFull, DType::kBF16);
  };
  EXPECT_EQ(full(m).shared, full(plain).shared + 256u * 256);
}

TEST(GemmaConfig, CountsMatchTransformers) {
  // transformers 5.23 builds 2,614,341,888 and 999,885,952 parameters from these configs
  // (Gemma-2-2B, Gemma-3-1B: the published 2.6B and 1B).
  const ModelDescription g2 = ModelFromConfigFile(kConfigs + "/gemma-2-2b");
  EXPECT_EQ(g2.total_params(), 2614341888u);
  EXPECT_EQ(g2.architecture, "gemma2");
  EXPECT_TRUE(g2.transformers_config);
  EXPECT_EQ(g2.tensors.back().name, "model.norm.weight");  // tied lm_head
  EXPECT_EQ(g2.tensors[1].name, "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(g2.tensors[6].name, "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(g2.tensors[7].name, "model.layers.0.pre_feedforward_layernorm.weight");
  EXPECT_EQ(g2.tensors[11].name, "model.layers.0.post_feedforward_layernorm.weight");
  const TransformerShape& t2 = g2.transformer;
  EXPECT_TRUE(t2.gemma_norms && t2.eager_attention && t2.attention_softcap && t2.final_softcap);
  EXPECT_EQ(t2.head_dim, 256u);
  EXPECT_EQ(t2.kv_heads, 4u);
  EXPECT_EQ(t2.sliding_layers, 13u);
  EXPECT_EQ(t2.sliding_window, 4096u);

  const ModelDescription g3 = ModelFromConfigFile(kConfigs + "/gemma-3-1b");
  EXPECT_EQ(g3.total_params(), 999885952u);
  EXPECT_EQ(g3.architecture, "gemma3");
  const TransformerShape& t3 = g3.transformer;
  EXPECT_TRUE(t3.gemma_norms && t3.qk_norm);
  EXPECT_FALSE(t3.eager_attention || t3.attention_softcap || t3.final_softcap);
  EXPECT_EQ(t3.sliding_layers, 22u);  // every 6th of 26 layers is global
  EXPECT_EQ(t3.sliding_window, 512u);
  EXPECT_EQ(t3.rope_tables, 2u);
  EXPECT_EQ(g3.tensors[5].name, "model.layers.0.self_attn.q_norm.weight");
}

TEST(GemmaConfig, MultimodalPlansItsLanguageModel) {
  TempDir dir;
  const std::string path = dir.Write("config.json", R"({
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "boi_token_index": 255999, "eoi_token_index": 256000, "image_token_index": 262144,
    "mm_tokens_per_image": 256, "initializer_range": 0.02,
    "text_config": {"model_type": "gemma3_text", "hidden_size": 2560,
      "intermediate_size": 10240, "num_hidden_layers": 34, "num_attention_heads": 8,
      "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 262208,
      "sliding_window": 1024, "query_pre_attn_scalar": 256, "rope_scaling": null},
    "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27}})");
  const ModelDescription m = ModelFromConfigFile(path);
  EXPECT_EQ(m.architecture, "gemma3");
  EXPECT_EQ(m.num_layers, 34u);
  EXPECT_EQ(m.name, path);
  bool noted = false;
  for (const std::string& n : m.notes) noted |= n.find("vision tower") != std::string::npos;
  EXPECT_TRUE(noted);
  // A field of the text config that may change the count is refused there, named.
  TempDir bad;
  const std::string odd = bad.Write("config.json", R"({
    "architectures": ["Gemma3ForConditionalGeneration"],
    "text_config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 2, "vocab_size": 100, "extra_expert_count": 2}})");
  try {
    ModelFromConfigFile(odd);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("text_config: unknown field 'extra_expert_count'"),
              std::string::npos)
        << e.what();
  }
}

TEST(TransformerShape, LlamaFamiliesReadTheirShape) {
  const ModelDescription q = ModelFromConfigFile(kConfigs + "/qwen3-8b");
  EXPECT_TRUE(q.transformers_config);
  EXPECT_EQ(q.transformer.intermediate, 12288u);
  EXPECT_EQ(q.transformer.head_dim, 128u);
  EXPECT_EQ(q.transformer.kv_heads, 8u);
  EXPECT_TRUE(q.transformer.qk_norm);
  EXPECT_EQ(q.transformer.sliding_layers, 0u);  // use_sliding_window false
  // Mistral's sliding window covers every layer.
  const ModelDescription mistral = ModelFromConfigText(
      R"({"architectures": ["MistralForCausalLM"], "hidden_size": 4096,
          "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
          "num_key_value_heads": 8, "vocab_size": 32000, "sliding_window": 4096})",
      "mistral");
  EXPECT_EQ(mistral.transformer.sliding_layers, 32u);
  EXPECT_EQ(mistral.transformer.sliding_window, 4096u);
  // Mixtral and Qwen3-MoE: routed experts, k of them per token.
  const ModelDescription mixtral = ModelFromConfigFile(kConfigs + "/mixtral-8x7b");
  EXPECT_EQ(mixtral.transformer.moe_layers, 32u);
  EXPECT_EQ(mixtral.transformer.experts, 8u);
  EXPECT_EQ(mixtral.transformer.experts_per_token, 2u);
  EXPECT_EQ(mixtral.transformer.expert_intermediate, 14336u);
  // GPT-2 keeps Megatron's estimate (its blocks are not the Llama family's).
  const ModelDescription gpt2 = ModelFromConfigText(
      R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
          "vocab_size": 50257, "n_positions": 1024})",
      "gpt2");
  EXPECT_FALSE(gpt2.transformers_config);
}

TEST(TransformerShape, Qwen3MoeWithTransformers5Names) {
  // transformers 5 writes num_local_experts (not num_experts) for Qwen3-MoE.
  const ModelDescription m = ModelFromConfigText(
      R"({"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 256,
          "intermediate_size": 688, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "vocab_size": 1000, "num_local_experts": 8,
          "num_experts_per_tok": 2, "moe_intermediate_size": 256})",
      "qwen3 moe");
  EXPECT_EQ(m.transformer.experts, 8u);
  EXPECT_EQ(m.transformer.moe_layers, 2u);
}

TEST(TensorListWithConfig, TheListsTensorsTheConfigsShape) {
  const ModelDescription config = ModelFromPreset("llama3-1b");
  ModelDescription list;
  list.name = "model.params.json";
  list.architecture = "params";
  for (const ModelTensor& t : config.tensors) list.tensors.push_back(t);
  list.tensors.pop_back();  // one tensor frozen
  ModelDescription cfg = config;
  cfg.transformers_config = true;
  const ModelDescription m = WithConfigShape(list, cfg);
  EXPECT_EQ(m.name, "model.params.json");
  EXPECT_EQ(m.architecture, "llama");
  EXPECT_EQ(m.hidden_size, 2048u);
  EXPECT_TRUE(m.transformers_config);
  EXPECT_EQ(m.transformer.intermediate, 8192u);
  EXPECT_EQ(m.total_params(), config.total_params() - 2048);
  ASSERT_FALSE(m.notes.empty());
  EXPECT_NE(m.notes.back().find("its config describes 1235814400"), std::string::npos);
  // Another model's config is refused, naming both.
  ModelDescription wide = cfg;
  wide.name = "other.json";
  wide.hidden_size = 4096;
  try {
    WithConfigShape(list, wide);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.embed_tokens.weight"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("other.json has hidden size 4096"), std::string::npos);
  }
}

}  // namespace
}  // namespace tandem::planner
