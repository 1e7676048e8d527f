#include "planner/model_config.h"

#include <string>

#include <gtest/gtest.h>

#include "tandem/error.h"
#include "tests/planner/temp_dir.h"

namespace tandem::planner {
namespace {

// Expects `f` to throw Error(kind) whose message contains every one of `parts`.
template <typename F>
void ExpectError(F f, ErrorKind kind, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' not in: " << e.what();
  }
}

TEST(ModelPresets, TotalsMatchPublishedCounts) {
  EXPECT_EQ(ModelFromPreset("llama3-1b").total_params(), 1235814400u);
  EXPECT_EQ(ModelFromPreset("llama3-3b").total_params(), 3212749824u);
  EXPECT_EQ(ModelFromPreset("llama3-8b").total_params(), 8030261248u);
  EXPECT_EQ(ModelFromPreset("llama3-70b").total_params(), 70553706496u);
  // Llama 3.1 405B (hidden 16384, 126 layers, FFN 53248, 128 heads, 8 KV heads).
  EXPECT_EQ(ModelFromPreset("llama3-405b").total_params(), 405853388800u);
  EXPECT_EQ(PresetNames().size(), 5u);
}

TEST(ModelPresets, ForwardOrderAndLayers) {
  const ModelDescription m = ModelFromPreset("llama3-8b");
  ASSERT_EQ(m.tensors.size(), 1u + 32 * 9 + 2);
  EXPECT_EQ(m.tensors.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(m.tensors.front().layer, -1);
  EXPECT_EQ(m.tensors[1].name, "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(m.tensors[2].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(m.tensors[2].layer, 0);
  EXPECT_EQ(m.tensors[m.tensors.size() - 2].name, "model.norm.weight");
  EXPECT_EQ(m.tensors.back().name, "lm_head.weight");
  // Largest gradient-release group: embed_tokens (128256 x 4096) beats one block (218M).
  EXPECT_EQ(m.largest_layer_params(), 128256ull * 4096);
  // Tied: no lm_head.
  EXPECT_EQ(ModelFromPreset("llama3-1b").tensors.back().name, "model.norm.weight");
}

TEST(ModelPresets, UnknownNameListsPresets) {
  ExpectError([] { ModelFromPreset("llama3-9b"); }, ErrorKind::kInvalidArgument,
              {"llama3-9b", "llama3-8b"});
}

TEST(ModelConfig, LlamaFileMatchesPreset) {
  TempDir dir;
  const std::string path = dir.Write("config.json", R"({
    "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 128256, "tie_word_embeddings": false, "rope_theta": 500000.0})");
  const ModelDescription m = ModelFromConfigFile(path);
  EXPECT_EQ(m.architecture, "llama");
  EXPECT_EQ(m.total_params(), 8030261248u);
  const ModelDescription p = ModelFromPreset("llama3-8b");
  ASSERT_EQ(m.tensors.size(), p.tensors.size());
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    EXPECT_EQ(m.tensors[i].name, p.tensors[i].name);
    EXPECT_EQ(m.tensors[i].numel, p.tensors[i].numel);
  }
  EXPECT_EQ(m.hidden_size, 4096u);
  EXPECT_EQ(m.num_heads, 32u);
  EXPECT_EQ(m.vocab_size, 128256u);
}

TEST(ModelConfig, MistralAndExplicitHeadDim) {
  // Mistral-7B-v0.1: 7,241,732,096 parameters.
  EXPECT_EQ(ModelFromConfigText(R"({"architectures": ["MistralForCausalLM"],
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
    "tie_word_embeddings": false})",
                                "mistral")
                .total_params(),
            7241732096u);
  // Mistral-Nemo (head_dim 128 != 5120 / 32): 12,247,782,400 parameters.
  EXPECT_EQ(ModelFromConfigText(R"({"architectures": ["MistralForCausalLM"],
    "hidden_size": 5120, "intermediate_size": 14336, "num_hidden_layers": 40,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 131072})",
                                "nemo")
                .total_params(),
            12247782400u);
}

TEST(ModelConfig, Qwen2HasQkvBiases) {
  // Qwen2-0.5B: 494,032,768 parameters.
  const ModelDescription m = ModelFromConfigText(R"({"architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
    "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
    "tie_word_embeddings": true})",
                                                 "qwen");
  EXPECT_EQ(m.architecture, "qwen2");
  EXPECT_EQ(m.total_params(), 494032768u);
  EXPECT_EQ(m.tensors[3].name, "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(m.tensors[3].numel, 896u);
}

TEST(ModelConfig, Gpt2Small) {
  TempDir dir;
  const std::string path = dir.Write("gpt2.json", R"({"architectures": ["GPT2LMHeadModel"],
    "model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257,
    "n_positions": 1024, "n_ctx": 1024, "n_inner": null})");
  const ModelDescription m = ModelFromConfigFile(path);
  EXPECT_EQ(m.architecture, "gpt2");
  EXPECT_EQ(m.total_params(), 124439808u);
  EXPECT_EQ(m.tensors.front().name, "transformer.wte.weight");
  EXPECT_EQ(m.tensors.back().name, "transformer.ln_f.bias");
  EXPECT_EQ(m.tensors.size(), 2u + 12 * 12 + 2);
}

TEST(ModelConfig, ModelTypeWithoutArchitectures) {
  EXPECT_EQ(ModelFromConfigText(R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12,
    "n_head": 12, "vocab_size": 50257, "n_positions": 1024})",
                                "x")
                .total_params(),
            124439808u);
}

TEST(ModelConfig, BadConfigsNameTheKeyAndFile) {
  TempDir dir;
  const std::string missing = dir.Write("missing.json", R"({"architectures":
    ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "vocab_size": 128256})");
  ExpectError([&] { ModelFromConfigFile(missing); }, ErrorKind::kInvalidArgument,
              {missing, "intermediate_size"});
  const std::string unknown = dir.Write("unknown.json", R"({"architectures":
    ["FalconForCausalLM"], "hidden_size": 4096})");
  ExpectError([&] { ModelFromConfigFile(unknown); }, ErrorKind::kInvalidArgument,
              {unknown, "FalconForCausalLM"});
  const std::string notjson = dir.Write("broken.json", "{\"hidden_size\": ");
  ExpectError([&] { ModelFromConfigFile(notjson); }, ErrorKind::kInvalidArgument,
              {notjson, "JSON"});
  const std::string negative = dir.Write("neg.json", R"({"model_type": "gpt2", "n_embd": -768,
    "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024})");
  ExpectError([&] { ModelFromConfigFile(negative); }, ErrorKind::kInvalidArgument,
              {"n_embd", "positive"});
  const std::string no_arch = dir.Write("noarch.json", R"({"hidden_size": 4096})");
  ExpectError([&] { ModelFromConfigFile(no_arch); }, ErrorKind::kInvalidArgument,
              {"architectures"});
  const std::string bad_tie = dir.Write("tie.json", R"({"model_type": "llama",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
    "num_attention_heads": 4, "vocab_size": 10, "tie_word_embeddings": "yes"})");
  ExpectError([&] { ModelFromConfigFile(bad_tie); }, ErrorKind::kInvalidArgument,
              {"tie_word_embeddings"});
  ExpectError([&] { ModelFromConfigFile(dir.path() + "/absent.json"); }, ErrorKind::kIO,
              {"absent.json"});
}

TEST(ModelParamCount, FlatAndPieces) {
  const ModelDescription one = ModelFromParamCount(1000);
  ASSERT_EQ(one.tensors.size(), 1u);
  EXPECT_EQ(one.total_params(), 1000u);
  EXPECT_EQ(one.largest_layer_params(), 1000u);
  const ModelDescription three = ModelFromParamCount(1000, 3);
  ASSERT_EQ(three.tensors.size(), 3u);
  EXPECT_EQ(three.tensors[0].numel, 333u);
  EXPECT_EQ(three.tensors[2].numel, 334u);
  EXPECT_EQ(three.total_params(), 1000u);
  EXPECT_EQ(three.largest_layer_params(), 334u);
  EXPECT_THROW(ModelFromParamCount(0), Error);
  EXPECT_THROW(ModelFromParamCount(2, 3), Error);
}

}  // namespace
}  // namespace tandem::planner
