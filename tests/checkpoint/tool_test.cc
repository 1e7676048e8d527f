// tandem-ckpt: exit statuses 0 (good), 1 (damaged), 2 (usage/IO) and the main outputs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/atomic_file.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tandem/version.h"
#include "tests/checkpoint/golden_snapshot.h"
#include "tests/checkpoint/test_util.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

class ToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_ckpt_tool_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    file_ = (dir_ / "c.ckpt").string();
    snap_ = testing::MakeSnapshot(Algorithm::kAdamW,
                                  {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}, 21);
    SaveCheckpoint(snap_, file_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the tool with `args`; returns its exit status, output in *out.
  int Run(const std::string& args, std::string* out) {
    const std::string log = (dir_ / "out.txt").string();
    const int rc = std::system((std::string(TANDEM_CKPT_TOOL) + " " + args + " > " + log + " 2>&1").c_str());
    std::ifstream f(log);
    std::stringstream ss;
    ss << f.rdbuf();
    *out = ss.str();
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }

  // to-torch and verify (exit status 1, a damaged file) and LoadCheckpoint (kCorruption)
  // refuse checkpoint `ckpt` with `message`; to-torch writes no `st`.
  void ExpectRefusedAlike(const std::string& ckpt, const std::string& st,
                          const std::string& message) {
    std::string out;
    ASSERT_EQ(Run("to-torch " + ckpt + " " + st, &out), 1) << out;
    EXPECT_NE(out.find(message), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(st));
    ASSERT_EQ(Run("verify " + ckpt, &out), 1) << out;
    EXPECT_NE(out.find(message), std::string::npos) << out;
    try {
      LoadCheckpoint(ckpt);
      ADD_FAILURE() << "LoadCheckpoint accepted it";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kCorruption);
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }

  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  fs::path dir_;
  std::string file_;
  OptimizerSnapshot snap_;
};

// The JSON header of a safetensors file.
nlohmann::json SafetensorsHeader(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  std::string text(n, '\0');
  f.read(text.data(), static_cast<std::streamsize>(n));
  return nlohmann::json::parse(text);
}

// A safetensors file of F32 tensors (name, shape, values) with the given __metadata__.
std::string Safetensors(const std::vector<std::tuple<std::string, std::vector<uint64_t>, std::vector<float>>>& ts,
                        const nlohmann::json& meta) {
  nlohmann::json h = {{"__metadata__", meta}};
  std::string data;
  for (const auto& [name, shape, v] : ts) {
    h[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {data.size(), data.size() + 4 * v.size()}}};
    data.append(reinterpret_cast<const char*>(v.data()), 4 * v.size());
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + text + data;
}

TEST_F(ToolTest, Version) {
  std::string out;
  EXPECT_EQ(Run("--version", &out), 0) << out;
  EXPECT_EQ(out, std::string("tandem-ckpt ") + TANDEM_VERSION_STRING + "\n");
}

TEST_F(ToolTest, InspectShowsShapeAndStepOfEachTensor) {
  std::string out;
  EXPECT_EQ(Run("inspect " + file_, &out), 0) << out;
  ASSERT_EQ(snap_.tensors[5].shape, (std::vector<uint64_t>{25, 2, 4}));
  for (const TensorSnapshot& t : snap_.tensors) {
    // " [25,2,4] " and " 21 " as words of the tensor's row.
    std::string shape = " [";
    for (uint64_t d : t.shape.empty() ? std::vector<uint64_t>{t.numel} : t.shape) {
      if (shape.size() > 2) shape += ',';
      shape += std::to_string(d);
    }
    shape += "] ";
    std::string step = " ";
    step += std::to_string(t.step);
    step += ' ';
    const size_t line = out.find(t.name);
    ASSERT_NE(line, std::string::npos) << out;
    const std::string row = out.substr(line, out.find('\n', line) - line);
    EXPECT_NE(row.find(shape), std::string::npos) << row;
    EXPECT_NE(row.find(step), std::string::npos) << row;
  }
  EXPECT_NE(out.find("metadata   " + std::to_string(snap_.metadata.size()) + " bytes"), std::string::npos) << out;
}

TEST_F(ToolTest, VerifyRunsTheChecksOfALoad) {
  std::string out;
  const std::pair<std::string, std::string> files[] = {
      {testing::DuplicateNameFile(), "duplicate name"},
      {testing::StepOverflowFile(), "snapshot step 9223372036854775807"},
      {testing::NaNMasterFile(), "master_f32[5] is NaN"}};
  for (const auto& [bytes, needle] : files) {
    const std::string path = Write("bad.ckpt", bytes);
    EXPECT_EQ(Run("verify " + path, &out), 1) << out;
    EXPECT_NE(out.find("DAMAGED"), std::string::npos) << out;
    EXPECT_NE(out.find(needle), std::string::npos) << out;
    EXPECT_EQ(Run("export " + path + " " + (dir_ / "x.safetensors").string(), &out), 1) << out;
  }
}

TEST_F(ToolTest, InspectPrintsTensorsAndFormats) {
  std::string out;
  EXPECT_EQ(Run("inspect " + file_, &out), 0) << out;
  EXPECT_NE(out.find("master=bf16+ecc8,m=q8,v=q8"), std::string::npos) << out;
  EXPECT_NE(out.find("layer.5.weight"), std::string::npos) << out;
  EXPECT_NE(out.find("step       " + std::to_string(snap_.step)), std::string::npos) << out;
}

TEST_F(ToolTest, VerifyGoodDamagedMissingUsage) {
  std::string out;
  EXPECT_EQ(Run("verify " + file_, &out), 0) << out;
  {
    std::fstream f(file_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  EXPECT_EQ(Run("verify " + file_, &out), 1) << out;
  EXPECT_NE(out.find("DAMAGED"), std::string::npos) << out;
  EXPECT_EQ(Run("verify " + (dir_ / "missing").string(), &out), 2) << out;
  EXPECT_EQ(Run("verify", &out), 2) << out;
  EXPECT_EQ(Run("frobnicate x", &out), 2) << out;
  EXPECT_EQ(Run("--help", &out), 0) << out;
}

TEST_F(ToolTest, ExportWritesSafetensors) {
  std::string out;
  const std::string st = (dir_ / "w.safetensors").string();
  EXPECT_EQ(Run("export " + file_ + " " + st, &out), 0) << out;
  const auto m = ImportSafetensorsMasters(st);
  ASSERT_EQ(m.size(), snap_.tensors.size());
  for (const auto& t : snap_.tensors) EXPECT_EQ(m.at(t.name).size(), t.numel);
  fs::resize_file(file_, 100);
  EXPECT_EQ(Run("export " + file_ + " " + st, &out), 1) << out;
}

TEST_F(ToolTest, ExportKeepsTheOriginalShapes) {
  std::string out;
  const std::string st = (dir_ / "w.safetensors").string();
  ASSERT_EQ(Run("export " + file_ + " " + st, &out), 0) << out;
  const nlohmann::json h = SafetensorsHeader(st);
  EXPECT_EQ(h["__metadata__"]["format"], "pt");
  for (const TensorSnapshot& t : snap_.tensors) {
    EXPECT_EQ(h[t.name]["dtype"], "F32");
    EXPECT_EQ(h[t.name]["shape"].get<std::vector<uint64_t>>(),
              t.shape.empty() ? std::vector<uint64_t>{t.numel} : t.shape) << t.name;
  }
}

// to-torch then from-torch gives the original state, bit for bit, for fp32 formats.
TEST_F(ToolTest, TorchLayoutRoundTripIsExactForFp32Formats) {
  uint32_t seed = 40;
  for (Algorithm algo : {Algorithm::kAdamW, Algorithm::kAdam, Algorithm::kLion, Algorithm::kSGD}) {
    SCOPED_TRACE(Name(algo));
    const OptimizerSnapshot s = testing::MakeSnapshot(algo, {}, seed++);
    const std::string ckpt = (dir_ / "a.ckpt").string(), st = (dir_ / "a.safetensors").string(),
                      back = (dir_ / "b.ckpt").string();
    SaveCheckpoint(s, ckpt);
    std::string out;
    ASSERT_EQ(Run("to-torch " + ckpt + " " + st, &out), 0) << out;
    ASSERT_EQ(Run("from-torch " + st + " " + back + " --force", &out), 0) << out;
    EXPECT_TRUE(testing::SameBits(LoadCheckpoint(back), s));
    // The layout itself: names, shapes and metadata keys.
    const nlohmann::json h = SafetensorsHeader(st);
    const nlohmann::json& meta = h["__metadata__"];
    EXPECT_EQ(meta["format"], "pt");
    EXPECT_EQ(meta["tandem_algorithm"], Name(algo));
    EXPECT_EQ(meta["tandem_step"], std::to_string(s.step));
    EXPECT_EQ(meta["tandem_metadata"], s.metadata);
    const auto steps = nlohmann::json::parse(meta["tandem_tensor_steps"].get<std::string>());
    const auto groups = nlohmann::json::parse(meta["tandem_groups"].get<std::string>());
    ASSERT_EQ(groups.size(), s.groups.size());
    EXPECT_EQ(groups[1]["lr_scale"], s.groups[1].lr_scale);
    const auto tgroups = nlohmann::json::parse(meta["tandem_tensor_groups"].get<std::string>());
    for (size_t i = 0; i < s.tensors.size(); ++i) {
      const TensorSnapshot& t = s.tensors[i];
      EXPECT_EQ(steps[i], t.step);
      EXPECT_EQ(tgroups[i], t.group);
      const auto shape = t.shape.empty() ? std::vector<uint64_t>{t.numel} : t.shape;
      EXPECT_EQ(h[t.name]["shape"].get<std::vector<uint64_t>>(), shape);
      const bool adam = algo == Algorithm::kAdamW || algo == Algorithm::kAdam;
      const bool sgd_m = algo == Algorithm::kSGD && HasMomentum(algo, s.groups[t.group]);
      EXPECT_EQ(h.contains(t.name + ".exp_avg"), algo != Algorithm::kSGD);
      EXPECT_EQ(h.contains(t.name + ".exp_avg_sq"), adam);
      EXPECT_EQ(h.contains(t.name + ".momentum_buffer"), sgd_m);
      if (h.contains(t.name + ".exp_avg")) {
        EXPECT_EQ(h[t.name + ".exp_avg"]["shape"].get<std::vector<uint64_t>>(), shape);
      }
    }
  }
}

TEST_F(ToolTest, ToTorchDecodesAndFromTorchEncodes) {
  // Quantised state goes out as the fp32 values the kernels decode, and comes back in the
  // formats asked for, through ConvertSnapshot. (Random q8 state can decode past the fp32
  // range, so this uses the golden snapshot's moderate scales.)
  std::string out;
  const OptimizerSnapshot q = testing::GoldenSnapshot(Algorithm::kAdamW, snap_.formats);
  const std::string ckpt = (dir_ / "g.ckpt").string(), st = (dir_ / "q.safetensors").string(),
                    back = (dir_ / "q.ckpt").string();
  SaveCheckpoint(q, ckpt);
  ASSERT_EQ(Run("to-torch " + ckpt + " " + st, &out), 0) << out;
  ASSERT_EQ(Run("from-torch " + st + " " + back + " --master bf16+ecc8 --momentum q8 --variance q8", &out), 0) << out;
  const OptimizerSnapshot got = LoadCheckpoint(back);
  const StateFormats f32{};
  EXPECT_TRUE(testing::SameBits(got, ConvertSnapshot(ConvertSnapshot(q, f32), q.formats)));
  ASSERT_EQ(Run("from-torch " + st + " " + back + " --algorithm lion --force", &out), 2) << out;
  EXPECT_NE(out.find("contradicts"), std::string::npos) << out;
}

// A q8 variance that decodes past the fp32 range (the largest finite scale, code 255: the
// step squares 3.39e38) is refused by to-torch, verify and LoadCheckpoint with one message
// naming the tensor, the scale and the code (HybridOptimizer::Restore gives it too:
// tests/offload/hybrid_host_test.cc).
TEST_F(ToolTest, VarianceThatCannotBeSteppedIsRefusedAlike) {
  OptimizerSnapshot s = testing::GoldenSnapshot(Algorithm::kAdamW, snap_.formats);
  s.tensors[1].v_scales[0] = 0x7F7F;
  for (int i = 0; i < kQuantGroup && i < static_cast<int>(s.tensors[1].numel); ++i)
    s.tensors[1].v_codes[i] = 0;  // zero decodes to zero whatever the scale
  s.tensors[1].v_codes[3] = 255;
  const std::string ckpt = (dir_ / "x.ckpt").string(), st = (dir_ / "x.safetensors").string();
  SaveCheckpoint(s, ckpt);  // the format holds it: save accepts it
  const std::string message = "tensor '" + s.tensors[1].name +
                              "': v_scales[0] = 3.38953139e+38 with v_codes[3] = 255 decodes to "
                              "sqrt(v) = 3.38953139e+38, whose square (the variance the step "
                              "uses) is infinite: the state cannot survive one step";
  ExpectRefusedAlike(ckpt, st, message);
  std::string out;
  // One code lower at that scale still squares to infinity; a scale below 2^64 does not.
  s.tensors[1].v_codes[3] = 254;
  EXPECT_THROW(ValidateRestorable(s), Error);
  s.tensors[1].v_scales[0] = 0x5F7F;
  s.tensors[1].v_codes[3] = 255;
  EXPECT_NO_THROW(ValidateRestorable(s));
  SaveCheckpoint(s, ckpt);
  ASSERT_EQ(Run("to-torch " + ckpt + " " + st, &out), 0) << out;
}

// A q8 first moment at the largest finite scale with code 127 decodes to 3.39e38, finite,
// but AdamW's next step divides it by sqrt(v) + eps: over a zero variance the update is
// infinite whatever the gradient and learning rate. verify and LoadCheckpoint refuse it
// as they refuse the variance above, naming the scale, the code and the quotient.
TEST_F(ToolTest, MomentThatCannotBeSteppedIsRefusedAlike) {
  OptimizerSnapshot s = testing::GoldenSnapshot(Algorithm::kAdamW, snap_.formats);
  ASSERT_EQ(s.tensors[1].formats.momentum, MomentFormat::kQ8);
  ASSERT_EQ(s.tensors[1].formats.variance, MomentFormat::kQ8);
  for (int i = 0; i < kQuantGroup; ++i) {  // group 0: v = 0, and m = 0 but element 3
    s.tensors[1].v_codes[i] = 0;
    s.tensors[1].m_codes[i] = 0;
  }
  s.tensors[1].m_scales[0] = 0x7F7F;
  s.tensors[1].m_codes[3] = 127;
  const std::string ckpt = (dir_ / "m.ckpt").string(), st = (dir_ / "m.safetensors").string();
  SaveCheckpoint(s, ckpt);
  const std::string message = "tensor '" + s.tensors[1].name +
                              "': m_scales[0] = 3.38953139e+38 with m_codes[3] = 127 decodes "
                              "to m = 3.38953139e+38, which the next step divides by sqrt(v) "
                              "+ eps with v = 0 and eps = ";
  ExpectRefusedAlike(ckpt, st, message);
  ExpectRefusedAlike(ckpt, st, "the quotient is infinite: the state cannot survive one step");
  // f32 moments alike; a moment of 2^64 over the same zero variance is stepped.
  OptimizerSnapshot f = ConvertSnapshot(s, StateFormats{});
  EXPECT_THROW(ValidateRestorable(f), Error);
  for (int i = 0; i < kQuantGroup; ++i) f.tensors[1].m_f32[i] = i == 3 ? 0x1p64f : 0.0f;
  EXPECT_NO_THROW(ValidateRestorable(f));
  f.tensors[1].m_f32[3] = -3e38f;
  try {
    ValidateRestorable(f);
    ADD_FAILURE() << "accepted m_f32[3] = -3e38";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m_f32[3] decodes to m = -3.00000001e+38"),
              std::string::npos) << e.what();
  }
  // At a scale of 2^64 the same code is stepped.
  s.tensors[1].m_scales[0] = 0x5F80;
  EXPECT_NO_THROW(ValidateRestorable(s));
}

// A checkpoint whose tensors have formats of their own: inspect lists them, verify
// passes, to-torch and export decode each tensor with its own formats.
TEST_F(ToolTest, MixedFormatsDecodeTensorByTensor) {
  const OptimizerSnapshot q = testing::V2Golden(testing::kGoldenOverride);
  const std::string ckpt = (dir_ / "m.ckpt").string(), st = (dir_ / "m.safetensors").string(),
                    ex = (dir_ / "m_masters.safetensors").string();
  SaveCheckpoint(q, ckpt);
  std::string out;
  ASSERT_EQ(Run("inspect " + ckpt, &out), 0) << out;
  EXPECT_NE(out.find("formats of tensor 1 ('layer.0.w'): " + Name(testing::kGoldenOverride)),
            std::string::npos) << out;
  ASSERT_EQ(Run("verify " + ckpt, &out), 0) << out;
  ASSERT_EQ(Run("to-torch " + ckpt + " " + st, &out), 0) << out;
  const OptimizerSnapshot want = ConvertSnapshot(q, StateFormats{}, ConvertTensors::kAll);
  const auto values = ImportSafetensorsMasters(st);
  for (const TensorSnapshot& t : want.tensors) {
    EXPECT_EQ(values.at(t.name), t.master_f32) << t.name;
    EXPECT_EQ(values.at(t.name + ".exp_avg"), t.m_f32) << t.name;
    EXPECT_EQ(values.at(t.name + ".exp_avg_sq"), t.v_f32) << t.name;
  }
  // The override's master is bf16+ecc16: decoded with its own format, not the default's.
  EXPECT_EQ(values.at("layer.0.w"), DecodeMasterF32(q.tensors[1], testing::kGoldenOverride));
  ASSERT_EQ(Run("export " + ckpt + " " + ex, &out), 0) << out;
  const auto masters = ImportSafetensorsMasters(ex);
  for (const TensorSnapshot& t : want.tensors) EXPECT_EQ(masters.at(t.name), t.master_f32);
  // from-torch gives one format set again, every tensor in it.
  const std::string back = (dir_ / "m_back.ckpt").string();
  ASSERT_EQ(Run("from-torch " + st + " " + back, &out), 0) << out;
  const OptimizerSnapshot got = LoadCheckpoint(back);
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (size_t i = 0; i < got.tensors.size(); ++i) {
    EXPECT_EQ(got.tensors[i].formats, StateFormats{});
    EXPECT_EQ(got.tensors[i].master_f32, want.tensors[i].master_f32);
    EXPECT_EQ(got.tensors[i].m_f32, want.tensors[i].m_f32);
  }
}

TEST_F(ToolTest, ToTorchRefusesAParameterNamedLikeAState) {
  OptimizerSnapshot s = testing::MakeSnapshot(Algorithm::kAdamW, {}, 3, {2, 2});
  s.tensors[0].name = "w";
  s.tensors[1].name = "w.exp_avg";
  const std::string ckpt = (dir_ / "n.ckpt").string(), st = (dir_ / "n.safetensors").string();
  SaveCheckpoint(s, ckpt);
  std::string out;
  EXPECT_EQ(Run("to-torch " + ckpt + " " + st, &out), 2) << out;
  EXPECT_NE(out.find("'w.exp_avg' is reserved or used twice"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(st));
}

TEST_F(ToolTest, FromTorchWithoutTandemMetadata) {
  const std::vector<float> w = {1, 2, 3, 4, 5, 6}, m = {0.1f, 0, 0, 0, 0, -0.1f}, v = {1, 0, 0, 0, 0, 2};
  const std::string in = Write("plain.safetensors",
                               Safetensors({{"fc.weight", {2, 3}, w}, {"fc.weight.exp_avg", {2, 3}, m},
                                            {"fc.weight.exp_avg_sq", {2, 3}, v}, {"fc.bias", {1}, {0.5f}},
                                            {"fc.bias.exp_avg", {1}, {0}}, {"fc.bias.exp_avg_sq", {1}, {0}}},
                                           {{"format", "pt"}}));
  const std::string ckpt = (dir_ / "p.ckpt").string();
  std::string out;
  EXPECT_EQ(Run("from-torch " + in + " " + ckpt, &out), 2) << out;  // no algorithm anywhere
  EXPECT_NE(out.find("--algorithm"), std::string::npos) << out;
  ASSERT_EQ(Run("from-torch " + in + " " + ckpt + " --algorithm adamw --beta1 0.8 --weight-decay 0.1 --param-dtype bf16", &out), 0) << out;
  const OptimizerSnapshot s = LoadCheckpoint(ckpt);
  EXPECT_EQ(s.algo, Algorithm::kAdamW);
  ASSERT_EQ(s.groups.size(), 1u);
  EXPECT_EQ(s.groups[0].beta1, 0.8);
  EXPECT_EQ(s.groups[0].weight_decay, 0.1);
  EXPECT_EQ(s.groups[0].beta2, HyperParams{}.beta2);
  EXPECT_EQ(s.step, 0);
  EXPECT_TRUE(s.metadata.empty());
  ASSERT_EQ(s.tensors.size(), 2u);
  EXPECT_EQ(s.tensors[0].name, "fc.weight");  // the order of the data
  EXPECT_EQ(s.tensors[0].shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(s.tensors[0].param_dtype, DType::kBF16);
  EXPECT_EQ(s.tensors[0].master_f32, w);
  EXPECT_EQ(s.tensors[0].m_f32, m);
  EXPECT_EQ(s.tensors[0].v_f32, v);
  EXPECT_TRUE(s.tensors[1].shape.empty());  // 1-D: no shape
  // Steps from tandem_step alone.
  const std::string in2 = Write("step.safetensors",
                                Safetensors({{"w", {2}, {1, 2}}, {"w.exp_avg", {2}, {0, 0}}},
                                            {{"format", "pt"}, {"tandem_algorithm", "lion"}, {"tandem_step", "17"}}));
  ASSERT_EQ(Run("from-torch " + in2 + " " + ckpt + " --force", &out), 0) << out;
  const OptimizerSnapshot l = LoadCheckpoint(ckpt);
  EXPECT_EQ(l.algo, Algorithm::kLion);
  EXPECT_EQ(l.step, 17);
  EXPECT_EQ(l.tensors[0].step, 17);
}

TEST_F(ToolTest, FromTorchRefusesMissingExtraOrMisshapenState) {
  std::string out;
  const std::string ckpt = (dir_ / "p.ckpt").string();
  const nlohmann::json meta = {{"format", "pt"}, {"tandem_algorithm", "adamw"}};
  std::string in = Write("a.safetensors", Safetensors({{"w", {2}, {1, 2}}, {"w.exp_avg", {2}, {0, 0}}}, meta));
  EXPECT_EQ(Run("from-torch " + in + " " + ckpt, &out), 2) << out;
  EXPECT_NE(out.find("no tensor 'w.exp_avg_sq'"), std::string::npos) << out;
  in = Write("b.safetensors", Safetensors({{"w", {2}, {1, 2}}, {"w.exp_avg", {2}, {0, 0}},
                                           {"w.exp_avg_sq", {2}, {0, 0}}, {"w.momentum_buffer", {2}, {0, 0}}}, meta));
  EXPECT_EQ(Run("from-torch " + in + " " + ckpt, &out), 2) << out;
  EXPECT_NE(out.find("'w.momentum_buffer' is neither a parameter"), std::string::npos) << out;
  in = Write("c.safetensors", Safetensors({{"w", {2, 1}, {1, 2}}, {"w.exp_avg", {2}, {0, 0}},
                                           {"w.exp_avg_sq", {2}, {0, 0}}}, meta));
  EXPECT_EQ(Run("from-torch " + in + " " + ckpt, &out), 2) << out;
  EXPECT_NE(out.find("another shape"), std::string::npos) << out;
  in = Write("d.safetensors", Safetensors({{"w", {2}, {1, -2}}, {"w.exp_avg", {2}, {0, 0}},
                                           {"w.exp_avg_sq", {2}, {0, -1}}}, meta));
  EXPECT_EQ(Run("from-torch " + in + " " + ckpt, &out), 2) << out;
  EXPECT_NE(out.find("v_f32[1] is negative"), std::string::npos) << out;
  in = Write("e.safetensors", Safetensors({{"w", {2}, {1, 2}}, {"w.exp_avg", {2}, {0, 0}}},
                                          {{"format", "pt"}, {"tandem_algorithm", "lion"}}));
  EXPECT_EQ(Run("from-torch " + in + " " + ckpt + " --variance q8", &out), 2) << out;
  EXPECT_NE(out.find("lion keeps no variance"), std::string::npos) << out;
  EXPECT_EQ(Run("from-torch " + in + " " + ckpt + " --master bf17", &out), 2) << out;
  // Hyper-parameter options are checked before the file is read, naming what is wrong.
  EXPECT_EQ(Run("from-torch " + (dir_ / "none.safetensors").string() + " " + ckpt +
                    " --algorithm sgd --nesterov",
                &out),
            2)
      << out;
  EXPECT_NE(out.find("from-torch options: momentum = 0.000000 must be > 0 when nesterov is set"),
            std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(ckpt));
  in = Write("g.safetensors", Safetensors({{"w", {2}, {1, 2}}, {"w.exp_avg", {2}, {0, 0}},
                                           {"v", {2}, {1, 2}}, {"v.exp_avg", {2}, {0, 0}}},
                                          {{"format", "pt"}, {"tandem_algorithm", "lion"},
                                           {"tandem_tensor_steps", "[1]"}}));
  EXPECT_EQ(Run("from-torch " + in + " " + ckpt, &out), 2) << out;
  EXPECT_NE(out.find("tandem_tensor_steps is not a JSON list of 2 entries"), std::string::npos) << out;
  in = Write("f.safetensors", "garbage that is not safetensors");
  EXPECT_EQ(Run("from-torch " + in + " " + ckpt, &out), 1) << out;
}

// Every option is checked first, always: a bad hyper-parameter option is refused naming
// it when the file's own groups would leave it unused, and before a missing input is
// noticed; an existing OUT is replaced only with --force.
TEST_F(ToolTest, FromTorchChecksEveryOptionFirstAndKeepsAnExistingOutput) {
  const OptimizerSnapshot s = testing::MakeSnapshot(Algorithm::kAdamW, {}, 41);
  const std::string ckpt = (dir_ / "o.ckpt").string(), st = (dir_ / "o.safetensors").string(),
                    back = (dir_ / "o_back.ckpt").string(),
                    missing = (dir_ / "missing.safetensors").string();
  SaveCheckpoint(s, ckpt);
  std::string out;
  ASSERT_EQ(Run("to-torch " + ckpt + " " + st, &out), 0) << out;  // has tandem_groups
  for (const auto& [option, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--beta1 1.5", "beta1 = 1.500000 must be in [0, 1)"},
           {"--beta1 nan", "beta1 = nan must be in [0, 1)"},
           {"--eps -1", "eps = -1.000000 must be finite and > 0"},
           {"--sgd-momentum 2", "momentum = 2.000000 must be in [0, 1]"}}) {
    for (const std::string& in : {st, missing}) {
      EXPECT_EQ(Run("from-torch " + in + " " + back + " " + option, &out), 2) << option << out;
      EXPECT_NE(out.find("from-torch options: " + needle), std::string::npos) << option << out;
      EXPECT_FALSE(fs::exists(back));
    }
  }
  // An existing output: kept without --force, replaced with it.
  ASSERT_EQ(Run("from-torch " + st + " " + back, &out), 0) << out;
  SaveCheckpoint(testing::MakeSnapshot(Algorithm::kSGD, {}, 42), ckpt);
  ASSERT_EQ(Run("to-torch " + ckpt + " " + (dir_ / "sgd.safetensors").string(), &out), 0) << out;
  EXPECT_EQ(Run("from-torch " + (dir_ / "sgd.safetensors").string() + " " + back, &out), 2) << out;
  EXPECT_NE(out.find("OUT '" + back + "' exists; pass --force to replace it"), std::string::npos)
      << out;
  EXPECT_EQ(LoadCheckpoint(back).algo, Algorithm::kAdamW) << "the existing file was kept";
  ASSERT_EQ(Run("from-torch " + (dir_ / "sgd.safetensors").string() + " " + back + " --force",
                &out),
            0)
      << out;
  EXPECT_EQ(LoadCheckpoint(back).algo, Algorithm::kSGD);
}

// The bytes of a file.
std::string Bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// An output that is the input, by the same path, a hard link or a symlink, is refused
// before anything is written: the checkpoint (or the safetensors input) stays as it was.
TEST_F(ToolTest, AnOutputThatIsTheInputIsRefused) {
  const std::string before = Bytes(file_);
  const std::string hard = (dir_ / "hard.ckpt").string(), soft = (dir_ / "soft.ckpt").string();
  fs::create_hard_link(file_, hard);
  fs::create_symlink(file_, soft);
  std::string out;
  for (const char* cmd : {"export", "to-torch"})
    for (const std::string& target : {file_, hard, soft}) {
      EXPECT_EQ(Run(std::string(cmd) + " " + file_ + " " + target, &out), 2) << cmd << " " << out;
      EXPECT_NE(out.find("is the same file as FILE"), std::string::npos) << out;
      EXPECT_EQ(Bytes(file_), before) << cmd << " " << target;
      EXPECT_FALSE(fs::exists(target + ".tmp")) << target;
    }
  // The input given through the link, the output by its own name.
  EXPECT_EQ(Run("export " + soft + " " + file_, &out), 2) << out;
  EXPECT_EQ(Bytes(file_), before);
  EXPECT_EQ(Run("verify " + file_, &out), 0) << out;
  // from-torch: the user's safetensors file is the input (an fp32 state's torch layout).
  const std::string f32 = (dir_ / "f32.ckpt").string(), st = (dir_ / "s.safetensors").string();
  SaveCheckpoint(testing::MakeSnapshot(Algorithm::kAdamW, {}, 40), f32);
  ASSERT_EQ(Run("to-torch " + f32 + " " + st, &out), 0) << out;
  const std::string st_before = Bytes(st);
  EXPECT_EQ(Run("from-torch " + st + " " + st, &out), 2) << out;
  EXPECT_NE(out.find("OUT '" + st + "': is the same file as IN"), std::string::npos) << out;
  EXPECT_EQ(Bytes(st), st_before);
  // An output in a directory that does not exist: refused before the input is read.
  EXPECT_EQ(Run("export " + file_ + " " + (dir_ / "no" / "w.safetensors").string(), &out), 2);
  EXPECT_NE(out.find("does not exist"), std::string::npos) << out;
}

// Outputs go through a temporary that is renamed into place: none is left behind.
TEST_F(ToolTest, OutputsLeaveNoTemporary) {
  std::string out;
  const std::string st = (dir_ / "w.safetensors").string(), t = (dir_ / "t.safetensors").string();
  const std::string f32 = (dir_ / "f32.ckpt").string(), back = (dir_ / "back.ckpt").string();
  SaveCheckpoint(testing::MakeSnapshot(Algorithm::kAdamW, {}, 40), f32);
  ASSERT_EQ(Run("export " + file_ + " " + st, &out), 0) << out;
  ASSERT_EQ(Run("to-torch " + f32 + " " + t, &out), 0) << out;
  ASSERT_EQ(
      Run("from-torch " + t + " " + back + " --master bf16+ecc8 --momentum q8 --variance q8", &out),
      0)
      << out;
  for (const std::string& p : {st, t, back}) EXPECT_FALSE(fs::exists(p + ".tmp")) << p;
}

// A save killed before its rename leaves path.tmp; the next save to the same path removes
// it, and writes a new file even when the stale temporary is a link to another file.
TEST_F(ToolTest, ALaterSaveRemovesAStaleTemporary) {
  const std::string tmp = ckpt::TemporaryPath(file_);
  EXPECT_EQ(tmp, file_ + ".tmp");
  std::ofstream(tmp, std::ios::binary) << "half a checkpoint";
  SaveCheckpoint(snap_, file_);
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_EQ(LoadCheckpoint(file_).step, snap_.step);
  const std::string victim = (dir_ / "victim.txt").string();
  std::ofstream(victim) << "not yours";
  fs::create_symlink(victim, tmp);
  SaveCheckpoint(snap_, file_);
  EXPECT_FALSE(fs::exists(fs::symlink_status(tmp)));
  EXPECT_EQ(Bytes(victim), "not yours");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(file_)));
  EXPECT_EQ(LoadCheckpoint(file_).step, snap_.step);
}

// inspect and verify list the temporaries interrupted saves left beside the checkpoint: its
// own, whatever it holds, and another's that begins like a checkpoint; other .tmp files
// are not theirs to list. The exit status still judges the checkpoint alone.
TEST_F(ToolTest, InspectAndVerifyListStrayTemporaries) {
  std::string out;
  EXPECT_EQ(Run("verify " + file_, &out), 0) << out;
  EXPECT_EQ(out.find("stray temporary"), std::string::npos) << out;
  std::ofstream(file_ + ".tmp", std::ios::binary) << "x";
  const std::string good = Bytes(file_);
  std::ofstream((dir_ / "other.ckpt.tmp").string(), std::ios::binary) << good.substr(0, 100);
  std::ofstream((dir_ / "notes.tmp").string()) << "an editor's file";
  for (const char* cmd : {"inspect", "verify"}) {
    EXPECT_EQ(Run(std::string(cmd) + " " + file_, &out), 0) << out;
    EXPECT_NE(out.find("stray temporary: " + file_ + ".tmp (1 B): left by a save of " + file_ +
                       " that did not finish; the next save to " + file_ + " removes it"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("stray temporary: " + (dir_ / "other.ckpt.tmp").string() + " (100 B)"),
              std::string::npos)
        << out;
    EXPECT_EQ(out.find("notes.tmp"), std::string::npos) << out;
  }
  // A save that never finished its first file: the checkpoint is missing (status 2), and
  // its temporary is named.
  const std::string lost = (dir_ / "lost.ckpt").string();
  std::ofstream(lost + ".tmp", std::ios::binary) << good.substr(0, 64);
  EXPECT_EQ(Run("verify " + lost, &out), 2) << out;
  EXPECT_NE(out.find("stray temporary: " + lost + ".tmp (64 B)"), std::string::npos) << out;
}

}  // namespace
}  // namespace tandem
