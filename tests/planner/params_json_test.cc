// Models from tensor lists ({"name", "shape", "dtype"}), as a Python wrapper writes them.
#include <string>

#include <gtest/gtest.h>

#include "tandem/error.h"
#include "tandem/planner.h"
#include "tests/planner/temp_dir.h"

namespace tandem::planner {
namespace {

TEST(ParamsJson, ShapesLayersAndDtype) {
  const ModelDescription m = ModelFromParamsJson(R"([
    {"name": "model.embed_tokens.weight", "shape": [100, 64], "dtype": "torch.bfloat16"},
    {"name": "model.layers.0.mlp.up_proj.weight", "shape": [128, 64], "dtype": "torch.bfloat16"},
    {"name": "model.layers.11.self_attn.q_proj.bias", "shape": [64], "dtype": "bfloat16"},
    {"name": "transformer.h.3.ln_1.weight", "shape": [64], "dtype": "bf16"},
    {"name": "scale", "shape": [], "dtype": "torch.bfloat16"},
    {"name": "layers_extra.weight", "shape": [2, 3], "dtype": "torch.bfloat16"},
    {"name": "lm_head.weight", "shape": [100, 64], "dtype": "torch.bfloat16"}])",
                                                 "p.json");
  ASSERT_EQ(m.tensors.size(), 7u);
  EXPECT_EQ(m.architecture, "params");
  EXPECT_EQ(m.total_params(), 100u * 64 * 2 + 128 * 64 + 64 + 64 + 1 + 6);
  EXPECT_EQ(m.tensors[0].layer, -1);
  EXPECT_EQ(m.tensors[1].layer, 0);
  EXPECT_EQ(m.tensors[2].layer, 11);
  EXPECT_EQ(m.tensors[3].layer, 3);
  EXPECT_EQ(m.tensors[4].numel, 1u);  // a scalar
  EXPECT_EQ(m.tensors[5].layer, -1);
  EXPECT_EQ(m.num_layers, 12u);
  ASSERT_TRUE(m.dtype.has_value());
  EXPECT_EQ(*m.dtype, DType::kBF16);
  EXPECT_TRUE(m.notes.empty());
}

TEST(ParamsJson, MixedDtypesAndEmptyTensors) {
  const ModelDescription m = ModelFromParamsJson(R"([
    {"name": "a", "shape": [4], "dtype": "torch.float32"},
    {"name": "b", "shape": [0, 8], "dtype": "torch.float32"},
    {"name": "c", "shape": [4], "dtype": "torch.float16"}])",
                                                 "p");
  EXPECT_EQ(m.tensors.size(), 2u);
  EXPECT_FALSE(m.dtype.has_value());
  ASSERT_EQ(m.notes.size(), 2u);
  EXPECT_NE(m.notes[0].find("mixed dtypes"), std::string::npos);
  EXPECT_NE(m.notes[1].find("1 empty tensor"), std::string::npos);
}

TEST(ParamsJson, FileAndErrorsNameTheEntry) {
  TempDir dir;
  const std::string path =
      dir.Write("params.json", R"([{"name": "w", "shape": [3, 5], "dtype": "float32"}])");
  const ModelDescription m = ModelFromParamsFile(path);
  EXPECT_EQ(m.total_params(), 15u);
  EXPECT_EQ(m.name, path);
  EXPECT_EQ(*m.dtype, DType::kF32);
  struct Case {
    const char* json;
    const char* expect;
  } cases[] = {
      {"{}", "JSON list"},
      {"[]", "empty"},
      {"[1]", "tensor 0 must be an object"},
      {R"([{"shape": [1], "dtype": "float32"}])", "'name'"},
      {R"([{"name": "w", "shape": 3, "dtype": "float32"}])", "tensor 0 ('w'): field 'shape'"},
      {R"([{"name": "w", "shape": [1]}, {"name": "v", "shape": [-2], "dtype": "float32"}])",
       "tensor 0 ('w'): field 'dtype'"},
      {R"([{"name": "w", "shape": [1], "dtype": "float32"},
           {"name": "v", "shape": [-2], "dtype": "float32"}])",
       "tensor 1 ('v'): field 'shape'"},
      {R"([{"name": "w", "shape": [1], "dtype": "torch.int64"}])", "torch.int64"},
      {R"([{"name": "w", "shape": [0], "dtype": "float32"}])", "every tensor is empty"},
      {R"([{"name": "w", "shape": [4294967296, 4294967296], "dtype": "float32"}])", "overflows"},
      {"[{", "not valid JSON"},
  };
  for (const Case& c : cases) {
    try {
      ModelFromParamsJson(c.json, "list.json");
      ADD_FAILURE() << c.json;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("list.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(ModelFromParamsFile(dir.path() + "/absent.json"), Error);
}

}  // namespace
}  // namespace tandem::planner
