#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "engine/fp_bits.h"
#include "engine/master_codec.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tests/checkpoint/test_util.h"

namespace tandem {
namespace {

using nlohmann::json;

std::string Safetensors(const json& header, const std::string& data) {
  const std::string h = header.dump();
  const uint64_t n = h.size();
  std::string out(8, '\0');
  memcpy(out.data(), &n, 8);
  return out + h + data;
}

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

TEST(SafetensorsTest, ExportImportRoundTripEveryMasterFormat) {
  auto env = NewMemEnv();
  for (MasterFormat m : {MasterFormat::kF32, MasterFormat::kBF16, MasterFormat::kBF16Ecc8,
                         MasterFormat::kBF16Ecc16}) {
    const auto s = testing::MakeSnapshot(Algorithm::kAdamW, {m, MomentFormat::kQ8, MomentFormat::kQ8}, 11);
    ExportSafetensorsMasters(s, "w.safetensors", env.get());
    const auto got = ImportSafetensorsMasters("w.safetensors", env.get());
    ASSERT_EQ(got.size(), s.tensors.size());
    for (const TensorSnapshot& t : s.tensors) {
      const std::vector<float> want = DecodeMasterF32(t, s.formats);
      const auto& v = got.at(t.name);
      ASSERT_EQ(v.size(), want.size());
      if (!v.empty()) {  // memcmp of empty vectors' null data() is undefined
        EXPECT_EQ(0, memcmp(v.data(), want.data(), 4 * v.size())) << t.name << " " << Name(m);
      }
    }
  }
}

TEST(SafetensorsTest, DecodeMasterMatchesCodec) {
  TensorSnapshot t;
  t.numel = 3;
  const float xs[3] = {1.0f, -3.14159f, 1e-20f};
  t.master_f32.assign(xs, xs + 3);
  EXPECT_EQ(DecodeMasterF32(t, {MasterFormat::kF32, {}, {}}), t.master_f32);
  t.master_f32.clear();
  for (float x : xs) {
    uint16_t b;
    int16_t e16;
    num::EncodeEcc16(x, &b, &e16);
    t.master_bf16.push_back(b);
    t.ecc16.push_back(e16);
  }
  EXPECT_EQ(DecodeMasterF32(t, {MasterFormat::kBF16Ecc16, {}, {}}), std::vector<float>(xs, xs + 3));
  const auto widened = DecodeMasterF32(t, {MasterFormat::kBF16, {}, {}});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(widened[i], num::Bf16ToF32(t.master_bf16[i]));
  t.ecc16.pop_back();
  EXPECT_THROW(DecodeMasterF32(t, {MasterFormat::kBF16Ecc16, {}, {}}), Error);
}

// Reads the exported bytes by hand, as the safetensors spec describes them.
TEST(SafetensorsTest, HeaderFormatByHand) {
  auto env = NewMemEnv();
  auto s = testing::MakeSnapshot(Algorithm::kSGD, {}, 12, {3, 0, 40});
  ExportSafetensorsMasters(s, "x", env.get());
  const std::string b = testing::ReadAll(env.get(), "x");
  uint64_t n;
  memcpy(&n, b.data(), 8);
  ASSERT_LE(8 + n, b.size());
  EXPECT_EQ((8 + n) % 8, 0u);  // data area aligned
  const json h = json::parse(b.substr(8, n));
  EXPECT_EQ(h["__metadata__"]["format"], "pt");
  EXPECT_EQ(h["__metadata__"]["tandem_step"], std::to_string(s.step));
  uint64_t pos = 0;
  for (const TensorSnapshot& t : s.tensors) {
    const json& e = h.at(t.name);
    EXPECT_EQ(e["dtype"], "F32");
    EXPECT_EQ(e["shape"], t.shape.empty() ? json::array({t.numel}) : json(t.shape));
    EXPECT_EQ(e["data_offsets"], json::array({pos, pos + 4 * t.numel}));
    if (t.numel > 0) {
      EXPECT_EQ(0, memcmp(b.data() + 8 + n + pos, t.master_f32.data(), 4 * t.numel));
    }
    pos += 4 * t.numel;
  }
  EXPECT_EQ(8 + n + pos, b.size());
}

TEST(SafetensorsTest, ImportsBf16AndF16AndShapes) {
  auto env = NewMemEnv();
  const uint16_t bf[2] = {0x3F80, 0xC000};  // 1, -2
  const uint16_t hf[1] = {0x3C00};          // 1
  std::string data(reinterpret_cast<const char*>(bf), 4);
  data += std::string(reinterpret_cast<const char*>(hf), 2);
  data += Floats({1, 2, 3, 4, 5, 6});
  json h = {{"a", {{"dtype", "BF16"}, {"shape", {2}}, {"data_offsets", {0, 4}}}},
            {"b", {{"dtype", "F16"}, {"shape", json::array()}, {"data_offsets", {4, 6}}}},
            {"c", {{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {6, 30}}}},
            {"__metadata__", {{"k", "v"}}}};
  testing::WriteAll(env.get(), "m", Safetensors(h, data));
  const auto got = ImportSafetensorsMasters("m", env.get());
  EXPECT_EQ(got.at("a"), (std::vector<float>{1, -2}));
  EXPECT_EQ(got.at("b"), (std::vector<float>{1}));
  EXPECT_EQ(got.at("c"), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

class SafetensorsGarbageTest : public ::testing::Test {
 protected:
  void ExpectBad(const std::string& bytes, const std::string& needle) {
    testing::WriteAll(env_.get(), "g", bytes);
    try {
      ImportSafetensorsMasters("g", env_.get());
      ADD_FAILURE() << "accepted garbage, expected " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kCorruption);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'g'"), std::string::npos) << e.what();
    }
  }
  json One(const std::string& dtype, json shape, json offsets) {
    return {{"w", {{"dtype", dtype}, {"shape", shape}, {"data_offsets", offsets}}}};
  }
  std::unique_ptr<Env> env_ = NewMemEnv();
};

TEST_F(SafetensorsGarbageTest, Headers) {
  ExpectBad("", "too short");
  ExpectBad("1234567", "too short");
  std::string huge(8, '\xff');
  ExpectBad(huge + "{}", "header length");
  std::string len(8, '\0');
  len[0] = 10;
  ExpectBad(len + "{}", "header length");
  ExpectBad(Safetensors(json::array(), ""), "not a JSON object");
  std::string bad_json = std::string("\x03\0\0\0\0\0\0\0", 8) + "{x}";
  ExpectBad(bad_json, "not a JSON object");
}

TEST_F(SafetensorsGarbageTest, Entries) {
  const std::string d = Floats({1, 2});
  ExpectBad(Safetensors(One("I32", {2}, {0, 8}), d), "dtype I32");
  ExpectBad(Safetensors(One("F32", {3}, {0, 8}), d), "span 8 bytes");
  ExpectBad(Safetensors(One("F32", {2}, {0, 16}), d), "outside the data area");
  ExpectBad(Safetensors(One("F32", {2}, {8, 0}), d), "outside");
  ExpectBad(Safetensors(One("F32", {-2}, {0, 8}), d), "shape");
  ExpectBad(Safetensors(One("F32", {1}, {4, 8}), d), "expected 0");
  ExpectBad(Safetensors(One("F32", {1}, {0, 4}), d), "after the last tensor");
  ExpectBad(Safetensors(One("F32", {2}, {0}), d), "data_offsets");
  ExpectBad(Safetensors(One("F32", "2", {0, 8}), d), "shape is not an array");
  ExpectBad(Safetensors(One("F32", {uint64_t{1} << 40, uint64_t{1} << 40}, {0, 8}), d), "overflows");
  json no_dtype = {{"w", {{"shape", {2}}, {"data_offsets", {0, 8}}}}};
  ExpectBad(Safetensors(no_dtype, d), "needs dtype");
  json overlap = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
                  {"b", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {4, 8}}}}};
  ExpectBad(Safetensors(overlap, d), "overlap or hole");
  json meta = {{"__metadata__", {{"k", 1}}}};
  ExpectBad(Safetensors(meta, ""), "__metadata__");
}

TEST(SafetensorsExportTest, RejectsDuplicateNames) {
  auto env = NewMemEnv();
  auto s = testing::MakeSnapshot(Algorithm::kAdamW, {}, 13);
  s.tensors[1].name = s.tensors[0].name;
  EXPECT_THROW(ExportSafetensorsMasters(s, "d", env.get()), Error);
  EXPECT_FALSE(env->FileExists("d"));
  EXPECT_FALSE(env->FileExists("d.tmp"));
}

// The writer ExportSafetensorsMasters and tandem-ckpt share refuses a tensor whose values
// do not match its size, before anything replaces the target.
TEST(SafetensorsWriterTest, RefusesValuesOfTheWrongCount) {
  auto env = NewMemEnv();
  const std::vector<float> three = {1, 2, 3};
  std::vector<ckpt::SafetensorsTensor> tensors = {
      {"w", {4}, 4, [&](std::vector<float>*) { return std::span<const float>(three); }}};
  const std::string header = ckpt::SafetensorsF32Header({{"format", "pt"}}, tensors);
  EXPECT_EQ(header.size() % 8, 0u);
  try {
    ckpt::WriteSafetensorsFile(header, tensors, "w.safetensors", env.get());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("tensor 'w' has 3 values"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(env->FileExists("w.safetensors"));
  EXPECT_FALSE(env->FileExists("w.safetensors.tmp"));
}

}  // namespace
}  // namespace tandem
