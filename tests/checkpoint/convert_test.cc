// ConvertSnapshot: identity is exact, f32 -> q8 -> f32 stays within the format's error,
// q8 groups are the kernels' encoding, ecc masters reconstruct, and bad targets throw.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/fp_bits.h"
#include "engine/master_codec.h"
#include "engine/q8_codec.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tests/checkpoint/test_util.h"

namespace tandem {
namespace {

const StateFormats kF32{};

// A valid all-f32 snapshot whose values look like training state: weights N(0, 0.02),
// momenta N(0, 1e-3) with per-tensor magnitudes, variances (N(0, 1e-3))^2.
OptimizerSnapshot TrainingLike(Algorithm algo, uint32_t seed) {
  OptimizerSnapshot s = testing::MakeSnapshot(algo, kF32, seed, {0, 1, 31, 32, 33, 1000});
  std::mt19937 rng(seed);
  std::normal_distribution<float> w(0.0f, 0.02f), m(0.0f, 1e-3f);
  for (TensorSnapshot& t : s.tensors) {
    for (float& x : t.master_f32) x = w(rng);
    for (float& x : t.m_f32) x = m(rng);
    for (float& x : t.v_f32) {
      const float r = m(rng);
      x = r * r;
    }
  }
  return s;
}

TEST(ConvertTest, IdentityIsBitExactForEveryCombination) {
  uint32_t seed = 100;
  for (const auto& [algo, formats] : testing::AllCombinations()) {
    const OptimizerSnapshot s = testing::MakeSnapshot(algo, formats, seed++);
    if (!HasVariance(algo) && formats.variance != MomentFormat::kF32) {
      EXPECT_THROW(ConvertSnapshot(s, formats), Error);  // not a format the engine accepts
      continue;
    }
    EXPECT_TRUE(testing::SameBits(ConvertSnapshot(s, formats), s))
        << Name(algo) << " " << Name(formats);
  }
}

// Tensors with formats of their own keep them (and their bits) by default; kAll converts
// them too.
TEST(ConvertTest, OverriddenTensorsKeepTheirFormatsUnlessAllAreAsked) {
  const StateFormats q8{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  const StateFormats own{MasterFormat::kBF16, MomentFormat::kF32, MomentFormat::kF32};
  const StateFormats to{MasterFormat::kBF16Ecc16, MomentFormat::kQ8, MomentFormat::kF32};
  const OptimizerSnapshot s =
      testing::MakeSnapshot(Algorithm::kAdamW, q8, 5, {1, 31, 33, 200}, {{1, own}, {3, own}});
  const OptimizerSnapshot c = ConvertSnapshot(s, to);
  EXPECT_EQ(c.formats, to);
  for (size_t i : {size_t{0}, size_t{2}}) {
    EXPECT_EQ(c.tensors[i].formats, to) << i;
    EXPECT_EQ(c.tensors[i].ecc16.size(), s.tensors[i].numel);
  }
  for (size_t i : {size_t{1}, size_t{3}}) {
    OptimizerSnapshot one, want;
    one.tensors = {c.tensors[i]};
    want.tensors = {s.tensors[i]};
    EXPECT_TRUE(testing::SameBits(one, want)) << "tensor " << i << " changed";
  }
  // The same as converting the default tensors on their own.
  OptimizerSnapshot defaults = s;
  defaults.tensors = {s.tensors[0], s.tensors[2]};
  const OptimizerSnapshot defaults_c = ConvertSnapshot(defaults, to);
  EXPECT_TRUE(defaults_c.tensors[0] == c.tensors[0]);
  EXPECT_TRUE(defaults_c.tensors[1] == c.tensors[2]);
  // Back to the original default: the same bits (only q8 -> bf16+ecc16 and back for the
  // defaults is lossy: compare the overrides only).
  const OptimizerSnapshot back = ConvertSnapshot(c, q8);
  EXPECT_EQ(back.tensors[1].formats, own);
  // kAll: every tensor in `to`, the overrides included.
  const OptimizerSnapshot all = ConvertSnapshot(s, StateFormats{}, ConvertTensors::kAll);
  for (const TensorSnapshot& t : all.tensors) {
    EXPECT_EQ(t.formats, StateFormats{});
    EXPECT_EQ(t.master_f32.size(), t.numel);
    EXPECT_EQ(t.m_f32.size(), t.numel);
  }
  EXPECT_NO_THROW(ValidateSnapshot(all));
}

// Each tensor to its own target: the same bits as converting it alone; a tensor already
// in its target is copied; bad targets are refused.
TEST(ConvertTest, PerTensorTargets) {
  const StateFormats q8{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  const StateFormats own{MasterFormat::kBF16Ecc8, MomentFormat::kF32, MomentFormat::kF32};
  OptimizerSnapshot s = TrainingLike(Algorithm::kAdamW, 7);  // fp32, moderate values
  const OptimizerSnapshot all_q8 = ConvertSnapshot(s, q8);
  // Tensors 1 and 3 to f32 moments, the others to q8 (the new default).
  const std::vector<StateFormats> targets = {q8, own, q8, own, q8, q8};
  const OptimizerSnapshot c = ConvertSnapshotPerTensor(all_q8, q8, targets);
  EXPECT_EQ(c.formats, q8);
  for (size_t i = 0; i < targets.size(); ++i) {
    EXPECT_EQ(c.tensors[i].formats, targets[i]) << i;
    OptimizerSnapshot one = all_q8;
    one.tensors = {all_q8.tensors[i]};
    const OptimizerSnapshot alone = ConvertSnapshot(one, targets[i]);
    EXPECT_TRUE(alone.tensors[0] == c.tensors[i]) << i;
  }
  EXPECT_TRUE(c.tensors[0] == all_q8.tensors[0]);  // already there: copied
  // And back to one format set for every tensor.
  const OptimizerSnapshot back =
      ConvertSnapshotPerTensor(c, q8, std::vector<StateFormats>(targets.size(), q8));
  for (const TensorSnapshot& t : back.tensors) EXPECT_EQ(t.formats, q8);
  EXPECT_THROW(ConvertSnapshotPerTensor(c, q8, {q8}), Error);
  StateFormats lion_bad = q8;
  OptimizerSnapshot lion = TrainingLike(Algorithm::kLion, 8);
  lion_bad.variance = MomentFormat::kQ8;
  std::vector<StateFormats> lion_targets(lion.tensors.size(), StateFormats{});
  lion_targets[2] = lion_bad;
  EXPECT_THROW(ConvertSnapshotPerTensor(lion, StateFormats{}, lion_targets), Error);
}

TEST(ConvertTest, CopiesEverythingButTheArrays) {
  OptimizerSnapshot s = TrainingLike(Algorithm::kAdamW, 1);
  s.metadata = R"({"param_groups": []})";
  const OptimizerSnapshot c =
      ConvertSnapshot(s, {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8});
  EXPECT_EQ(c.algo, s.algo);
  EXPECT_EQ(c.groups, s.groups);
  EXPECT_EQ(c.step, s.step);
  EXPECT_EQ(c.metadata, s.metadata);
  ASSERT_EQ(c.tensors.size(), s.tensors.size());
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    EXPECT_EQ(c.tensors[i].name, s.tensors[i].name);
    EXPECT_EQ(c.tensors[i].numel, s.tensors[i].numel);
    EXPECT_EQ(c.tensors[i].shape, s.tensors[i].shape);
    EXPECT_EQ(c.tensors[i].step, s.tensors[i].step);
    EXPECT_EQ(c.tensors[i].param_dtype, s.tensors[i].param_dtype);
    EXPECT_EQ(c.tensors[i].grad_dtype, s.tensors[i].grad_dtype);
    EXPECT_EQ(c.tensors[i].group, s.tensors[i].group);
    EXPECT_TRUE(c.tensors[i].master_f32.empty());
    EXPECT_TRUE(c.tensors[i].m_f32.empty());
  }
  EXPECT_NO_THROW(ValidateSnapshot(c));
}

TEST(ConvertTest, Q8RoundTripWithinTheFormatsError) {
  for (Algorithm algo : {Algorithm::kAdamW, Algorithm::kLion, Algorithm::kSGD}) {
    SCOPED_TRACE(Name(algo));
    const OptimizerSnapshot s = TrainingLike(algo, 2);
    const StateFormats q8{MasterFormat::kF32, MomentFormat::kQ8,
                          HasVariance(algo) ? MomentFormat::kQ8 : MomentFormat::kF32};
    const OptimizerSnapshot q = ConvertSnapshot(s, q8);
    const OptimizerSnapshot back = ConvertSnapshot(q, kF32);
    for (size_t ti = 0; ti < s.tensors.size(); ++ti) {
      const TensorSnapshot& a = s.tensors[ti];
      const TensorSnapshot& b = back.tensors[ti];
      const TensorSnapshot& z = q.tensors[ti];
      EXPECT_EQ(a.master_f32, b.master_f32);  // the master did not change format
      for (size_t i = 0; i < a.m_f32.size(); ++i) {
        // Softsign compander: half a code step is at most 0.5 * 254 / 127^2 < 0.008 of
        // the group's scale.
        const float scale = num::Bf16ToF32(z.m_scales[i / kQuantGroup]);
        EXPECT_LE(std::fabs(b.m_f32[i] - a.m_f32[i]), 0.008f * scale) << a.name << " m " << i;
      }
      for (size_t i = 0; i < a.v_f32.size(); ++i) {
        // sqrt(v) in steps of scale / 255, within one step (the smallest non-zero value
        // is raised to the first code: Note [No zero point]).
        const float scale = num::Bf16ToF32(z.v_scales[i / kQuantGroup]);
        EXPECT_LE(std::fabs(std::sqrt(b.v_f32[i]) - std::sqrt(a.v_f32[i])), scale / 255.0f * 1.001f)
            << a.name << " v " << i;
      }
    }
    // q8 -> f32 is the kernels' decoding, exactly (v = u * u as the step squares it).
    for (size_t ti = 0; ti < q.tensors.size(); ++ti) {
      const TensorSnapshot& z = q.tensors[ti];
      for (size_t i = 0; i < z.m_codes.size(); ++i)
        EXPECT_EQ(back.tensors[ti].m_f32[i],
                  num::DecodeMomentum(static_cast<int8_t>(z.m_codes[i]),
                                      num::Bf16ToF32(z.m_scales[i / kQuantGroup])));
      for (size_t i = 0; i < z.v_codes.size(); ++i) {
        const float u =
            num::DecodeSqrtVariance(z.v_codes[i], num::Bf16ToF32(z.v_scales[i / kQuantGroup]));
        EXPECT_EQ(back.tensors[ti].v_f32[i], u * u);
      }
    }
  }
}

TEST(ConvertTest, Q8GroupsAreTheKernelsEncoding) {
  const OptimizerSnapshot s = TrainingLike(Algorithm::kAdamW, 3);
  const OptimizerSnapshot q =
      ConvertSnapshot(s, {MasterFormat::kF32, MomentFormat::kQ8, MomentFormat::kQ8});
  for (size_t ti = 0; ti < s.tensors.size(); ++ti) {
    const TensorSnapshot& a = s.tensors[ti];
    const TensorSnapshot& z = q.tensors[ti];
    for (size_t g0 = 0, g = 0; g0 < a.numel; g0 += kQuantGroup, ++g) {
      const int len = static_cast<int>(std::min<size_t>(kQuantGroup, a.numel - g0));
      int8_t mc[kQuantGroup];
      uint8_t vc[kQuantGroup];
      float u[kQuantGroup];
      uint16_t ms, vs;
      num::EncodeMomentumGroup(a.m_f32.data() + g0, len, mc, &ms);
      for (int i = 0; i < len; ++i) u[i] = std::sqrt(a.v_f32[g0 + i]);
      num::EncodeSqrtVarianceGroup(u, len, vc, &vs);
      EXPECT_EQ(ms, z.m_scales[g]);
      EXPECT_EQ(vs, z.v_scales[g]);
      for (int i = 0; i < len; ++i) {
        EXPECT_EQ(static_cast<uint8_t>(mc[i]), z.m_codes[g0 + i]);
        EXPECT_EQ(vc[i], z.v_codes[g0 + i]);
      }
    }
  }
}

TEST(ConvertTest, EccMastersReconstruct) {
  const OptimizerSnapshot s = TrainingLike(Algorithm::kSGD, 4);
  for (MasterFormat m : {MasterFormat::kBF16Ecc16, MasterFormat::kBF16Ecc8, MasterFormat::kBF16}) {
    SCOPED_TRACE(Name(m));
    const OptimizerSnapshot e = ConvertSnapshot(s, {m, MomentFormat::kF32, MomentFormat::kF32});
    const OptimizerSnapshot back = ConvertSnapshot(e, kF32);
    for (size_t ti = 0; ti < s.tensors.size(); ++ti) {
      const TensorSnapshot& a = s.tensors[ti];
      EXPECT_EQ(e.tensors[ti].master_bf16.size(), a.numel);
      for (size_t i = 0; i < a.numel; ++i) {
        const float x = a.master_f32[i], y = back.tensors[ti].master_f32[i];
        const int64_t ulps = std::llabs(int64_t{num::BitsOf(x)} - int64_t{num::BitsOf(y)});
        // ecc16: exact but for the one tie of Note [Correction in ulps of x] (1 ulp);
        // ecc8: half of 256 ulps; plain bf16: half of 65536 ulps.
        const int64_t limit = m == MasterFormat::kBF16Ecc16  ? 1
                              : m == MasterFormat::kBF16Ecc8 ? 128
                                                             : 32768;
        EXPECT_LE(ulps, limit) << a.name << "[" << i << "] " << x << " -> " << y;
        if (m == MasterFormat::kBF16Ecc8) {
          uint16_t b;
          int8_t c;
          num::EncodeEcc8(x, &b, &c);
          EXPECT_EQ(b, e.tensors[ti].master_bf16[i]);
          EXPECT_EQ(c, e.tensors[ti].ecc8[i]);
        }
      }
    }
  }
}

TEST(ConvertTest, MomentsSurviveAMasterOnlyConversion) {
  const OptimizerSnapshot s = TrainingLike(Algorithm::kAdamW, 5);
  const OptimizerSnapshot e =
      ConvertSnapshot(s, {MasterFormat::kBF16Ecc16, MomentFormat::kF32, MomentFormat::kF32});
  for (size_t ti = 0; ti < s.tensors.size(); ++ti) {
    EXPECT_EQ(e.tensors[ti].m_f32, s.tensors[ti].m_f32);
    EXPECT_EQ(e.tensors[ti].v_f32, s.tensors[ti].v_f32);
  }
}

void ExpectInvalid(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ConvertTest, TargetsThatDoNotSuitTheAlgorithm) {
  const OptimizerSnapshot lion = TrainingLike(Algorithm::kLion, 6);
  ExpectInvalid(
      [&] {
        ConvertSnapshot(lion, {MasterFormat::kF32, MomentFormat::kQ8, MomentFormat::kQ8});
      },
      "variance format q8 given, but lion keeps no variance");
  const OptimizerSnapshot sgd = TrainingLike(Algorithm::kSGD, 6);
  ExpectInvalid(
      [&] {
        ConvertSnapshot(sgd, {MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kQ8});
      },
      "sgd keeps no variance");
  ExpectInvalid(
      [&] {
        ConvertSnapshot(sgd,
                        {static_cast<MasterFormat>(9), MomentFormat::kF32, MomentFormat::kF32});
      },
      "unknown master format value 9");
}

TEST(ConvertTest, InvalidSnapshotOrValuesOutOfTheNewRange) {
  OptimizerSnapshot s = TrainingLike(Algorithm::kAdamW, 7);
  s.tensors[5].v_f32[3] = -1.0f;
  ExpectInvalid([&] { ConvertSnapshot(s, kF32); }, "v_f32[3] is negative");
  s = TrainingLike(Algorithm::kAdamW, 7);
  s.tensors[5].master_f32[9] = 3.4e38f;  // finite in fp32, rounds to infinity in bf16
  ExpectInvalid(
      [&] {
        ConvertSnapshot(s, {MasterFormat::kBF16, MomentFormat::kF32, MomentFormat::kF32});
      },
      "master_bf16[9] is infinite");
}

}  // namespace
}  // namespace tandem
