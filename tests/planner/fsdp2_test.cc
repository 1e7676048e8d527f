// FSDP2 in the planner: rank 0's shards (uneven rows, 1-D tensors), the shard-safe group
// rule's f32 moments, the unsharded working set, HSDP's shard size, and what the plan
// says about them.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "planner/plan.h"
#include "tandem/error.h"

namespace tandem::planner {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

PlanInputs Fsdp2(ModelDescription model, uint32_t gpus) {
  PlanInputs in;
  in.model = std::move(model);
  in.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  in.gpu_budget = 1000 * kGiB;
  in.host_budget = 1000 * kGiB;
  in.gpu_headroom_fraction = 0;
  in.gpus_per_node = gpus;
  // Every offloaded element computed on the host: these tests hold the plan to
  // PredictMemory's host-resident parts; streamed_plan_test.cc covers the other classes.
  in.offload_compute = 0.0;
  in.fsdp2 = true;
  return in;
}

// A small model by hand: a block of a group-safe matrix, a norm (1-D), an odd-width
// matrix (48 columns) and an uneven one (7 rows), and an embedding outside the blocks.
ModelDescription Tiny() {
  ModelDescription m;
  m.name = "tiny";
  m.architecture = "params";
  m.tensors = {{"embed", 100 * 64, -1, {100, 64}},      {"layers.0.w", 64 * 128, 0, {64, 128}},
               {"layers.0.norm", 128, 0, {128}},        {"layers.0.odd", 64 * 48, 0, {64, 48}},
               {"layers.0.uneven", 7 * 64, 0, {7, 64}}, {"layers.1.w", 64 * 128, 1, {64, 128}}};
  return m;
}

uint64_t Align(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

TEST(Fsdp2Shards, RankZeroHoldsCeilRowsOverRanks) {
  EXPECT_EQ(Fsdp2Rows(7, 4), 2u);
  EXPECT_EQ(Fsdp2Rows(8, 4), 2u);
  EXPECT_EQ(Fsdp2Rows(3, 4), 1u);  // trailing ranks hold none
  EXPECT_EQ(Fsdp2Rows(1, 1), 1u);
  EXPECT_EQ(Fsdp2ShardNumel({"u", 7 * 64, 0, {7, 64}}, 4), 2u * 64);
  EXPECT_EQ(Fsdp2ShardNumel({"m", 4096 * 64 * 3, 0, {4096, 64, 3}}, 8), 512u * 64 * 3);
  // 1-D tensors (and shapeless ones) are sharded by element.
  EXPECT_EQ(Fsdp2ShardNumel({"n", 10, 0, {10}}, 4), 3u);
  EXPECT_EQ(Fsdp2ShardNumel({"n", 10, 0, {}}, 4), 3u);
  EXPECT_EQ(Fsdp2ShardNumel({"e", 0, 0, {0, 64}}, 4), 0u);
  PlanInputs in = Fsdp2(Tiny(), 4);
  const std::vector<TensorSpec> specs = ShardSpecs(in);
  ASSERT_EQ(specs.size(), 6u);
  EXPECT_EQ(specs[0].numel, 25u * 64);
  EXPECT_EQ(specs[2].numel, 32u);
  EXPECT_EQ(specs[3].numel, 16u * 48);
  EXPECT_EQ(specs[4].numel, 2u * 64);
  // One rank: the whole model.
  in.gpus_per_node = 1;
  uint64_t all = 0;
  for (const TensorSpec& s : ShardSpecs(in)) all += s.numel;
  EXPECT_EQ(all, in.model.total_params());
}

TEST(Fsdp2Shards, WeightsAndGradientsAreRankZerosShards) {
  const PlanInputs in = Fsdp2(Tiny(), 4);
  const FractionPoint p = EvaluateFraction(in, 0.0);
  const uint64_t shard = 25 * 64 + 16 * 128 + 32 + 16 * 48 + 2 * 64 + 16 * 128;
  EXPECT_EQ(p.gpu.weights, 2 * shard);
  EXPECT_EQ(p.gpu.gradients, 2 * shard);
  EXPECT_EQ(MakePlan(in).shard_elements, shard);
  EXPECT_EQ(p.hot_elements + p.cold_elements, shard);  // step time runs on rank 0's counts
}

TEST(Fsdp2GroupRule, OneDimensionalAndOddWidthsKeepF32Moments) {
  EXPECT_TRUE(GroupSafe({"w", 64 * 128, 0, {64, 128}}));
  EXPECT_TRUE(GroupSafe({"w", 7 * 32, 0, {7, 32}}));
  EXPECT_FALSE(GroupSafe({"n", 128, 0, {128}}));  // 1-D, even a multiple of 32
  EXPECT_FALSE(GroupSafe({"n", 128, 0, {}}));
  EXPECT_FALSE(GroupSafe({"o", 64 * 48, 0, {64, 48}}));
  const std::vector<bool> f32 = F32MomentTensors(Fsdp2(Tiny(), 4));
  EXPECT_EQ(f32, (std::vector<bool>{false, false, true, true, false, false}));
  // Not sharded, or no q8 moment: the configured formats everywhere.
  PlanInputs plain = Fsdp2(Tiny(), 4);
  plain.fsdp2 = false;
  EXPECT_EQ(F32MomentTensors(plain), std::vector<bool>(6, false));
  PlanInputs wide = Fsdp2(Tiny(), 4);
  wide.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kF32, MomentFormat::kF32};
  EXPECT_EQ(F32MomentTensors(wide), std::vector<bool>(6, false));
  // Only the q8 moment changes.
  EXPECT_EQ(F32MomentFormats({MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kF32}),
            (StateFormats{MasterFormat::kBF16Ecc8, MomentFormat::kF32, MomentFormat::kF32}));
}

// Per-tensor formats (TensorSpec::formats) are not in the engine this planner builds
// against, so the expectation is built as two spec lists by hand: the group-safe tensors
// in q8 and the others with f32 moments. At fractions 0 and 1 each list's placement is
// the whole list's, so the two PredictMemory results add up exactly.
TEST(Fsdp2GroupRule, StateBytesArePredictMemoryWithF32MomentsWhereTheRuleSays) {
  const PlanInputs in = Fsdp2(Tiny(), 4);
  const std::vector<TensorSpec> specs = ShardSpecs(in);
  const std::vector<bool> f32 = F32MomentTensors(in);
  std::vector<TensorSpec> safe, odd;
  for (size_t t = 0; t < specs.size(); ++t) (f32[t] ? odd : safe).push_back(specs[t]);
  for (double fraction : {0.0, 1.0}) {
    OptimizerConfig q8 = ShardConfig(in, fraction), wide = q8;
    wide.formats.momentum = wide.formats.variance = MomentFormat::kF32;
    const MemoryReport a = PredictMemory(safe, q8, ExecutionMode::kGpu);
    const MemoryReport b = PredictMemory(odd, wide, ExecutionMode::kGpu);
    const FractionPoint p = EvaluateFraction(in, fraction);
    const MemoryBreakdown& got = fraction == 0 ? p.gpu : p.host;
    const MemoryReport::Bytes& x = fraction == 0 ? a.device : a.host;
    const MemoryReport::Bytes& y = fraction == 0 ? b.device : b.host;
    EXPECT_EQ(got.master, x.master + y.master) << fraction;
    EXPECT_EQ(got.correction, x.correction + y.correction) << fraction;
    EXPECT_EQ(got.moments, x.momentum + x.variance + y.momentum + y.variance) << fraction;
    EXPECT_EQ(got.scales, x.scales + y.scales) << fraction;
    EXPECT_GT(y.momentum, 0u);
    EXPECT_EQ(y.scales, 0u);
  }
  // In between, each tensor's GPU and host parts: 4 bytes per moment element where the
  // rule says f32, else 1 byte plus a 2-byte scale per group of 32 (arrays 256-aligned).
  const double fraction = 0.5;
  std::vector<uint64_t> numels;
  for (const TensorSpec& s : specs) numels.push_back(s.numel);
  const Placement pl = ComputePlacement(numels, fraction, in.placement);
  uint64_t gpu_moments = 0, gpu_scales = 0, host_moments = 0, host_scales = 0;
  for (size_t t = 0; t < specs.size(); ++t) {
    for (int side = 0; side < 2; ++side) {
      const uint64_t n = side == 0 ? pl.tensors[t].device_count : pl.tensors[t].host_count();
      if (n == 0) continue;
      uint64_t& moments = side == 0 ? gpu_moments : host_moments;
      uint64_t& scales = side == 0 ? gpu_scales : host_scales;
      moments += 2 * Align((f32[t] ? 4 : 1) * n);
      if (!f32[t]) scales += 2 * Align(2 * ((n + 31) / 32));
    }
  }
  const FractionPoint p = EvaluateFraction(in, fraction);
  EXPECT_EQ(p.gpu.moments, gpu_moments);
  EXPECT_EQ(p.gpu.scales, gpu_scales);
  EXPECT_EQ(p.host.moments, host_moments);
  EXPECT_EQ(p.host.scales, host_scales);
  // Without the rule's tensors the result is PredictMemory's.
  const MemoryReport r = PredictMemory(specs, ShardConfig(in, fraction), ExecutionMode::kGpu);
  const MemoryReport same =
      PredictRankMemory(specs, std::vector<bool>(specs.size(), false), ShardConfig(in, fraction));
  EXPECT_EQ(same.device.total(), r.device.total());
  EXPECT_EQ(same.host.total(), r.host.total());
  EXPECT_EQ(p.gpu.master, r.device.master);
  EXPECT_EQ(p.host.staging, r.host.staging);
  EXPECT_EQ(p.gpu.metadata, r.device.metadata);
}

TEST(Fsdp2Memory, DenseLlamaFallsAsOneOverWorld) {
  const PlanInputs one = Fsdp2(ModelFromPreset("llama3-8b"), 1);
  const FractionPoint a = EvaluateFraction(one, 0.0);
  for (uint32_t world : {2u, 4u, 8u}) {
    const PlanInputs in = Fsdp2(ModelFromPreset("llama3-8b"), world);
    const FractionPoint b = EvaluateFraction(in, 0.0);
    const double w = world;
    EXPECT_NEAR(static_cast<double>(b.gpu.weights), a.gpu.weights / w, a.gpu.weights * 1e-4);
    EXPECT_NEAR(static_cast<double>(b.gpu.gradients), a.gpu.gradients / w, a.gpu.gradients * 1e-4);
    EXPECT_NEAR(static_cast<double>(b.gpu.moments), a.gpu.moments / w, a.gpu.moments * 1e-3);
    EXPECT_NEAR(static_cast<double>(b.gpu.correction), a.gpu.correction / w,
                a.gpu.correction * 1e-3);
    EXPECT_EQ(b.gpu.unsharded, a.gpu.unsharded);  // the working set does not shrink
    const FractionPoint h = EvaluateFraction(in, 1.0), h1 = EvaluateFraction(one, 1.0);
    EXPECT_NEAR(static_cast<double>(h.host.total()), h1.host.total() / w, h1.host.total() * 2e-3);
    EXPECT_EQ(h.host_node_bytes, h.host.total() * world);
  }
  // Against plain data parallelism at 8 GPUs, FSDP2 needs far less per GPU.
  PlanInputs dp = Fsdp2(ModelFromPreset("llama3-8b"), 8);
  dp.fsdp2 = false;
  EXPECT_LT(EvaluateFraction(Fsdp2(ModelFromPreset("llama3-8b"), 8), 0.0).gpu.total(),
            EvaluateFraction(dp, 0.0).gpu.total() / 2);
}

TEST(Fsdp2Memory, UnshardedWorkingSetIsRootPlusTwoBlocks) {
  PlanInputs in = Fsdp2(ModelFromPreset("llama3-8b"), 8);
  const uint64_t h = 4096, v = 128256, kv = 1024, inter = 14336;
  const uint64_t block = 2 * h + h * h + 2 * kv * h + h * h + 3 * h * inter;
  const uint64_t root = 2 * v * h + h;
  EXPECT_EQ(Fsdp2UnshardedBytes(in), (root + 2 * block) * 4);
  EXPECT_EQ(EvaluateFraction(in, 0.5).gpu.unsharded, (root + 2 * block) * 4);
  in.fsdp2_blocks_in_flight = 1;
  EXPECT_EQ(Fsdp2UnshardedBytes(in), (root + block) * 4);
  // A flat model is one root unit: all of it is unsharded.
  PlanInputs flat = Fsdp2(ModelFromParamCount(1000, 4), 4);
  EXPECT_EQ(Fsdp2UnshardedBytes(flat), 4000u);
  // Not FSDP2: none.
  in.fsdp2 = false;
  EXPECT_EQ(EvaluateFraction(in, 0.5).gpu.unsharded, 0u);
}

TEST(Fsdp2Hsdp, ShardSizeSetsTheShards) {
  // 2 nodes x 8 GPUs, sharded within a node: rank 0's shards are those of 8-way FSDP.
  PlanInputs hsdp = Fsdp2(ModelFromPreset("llama3-8b"), 8);
  hsdp.nodes = 2;
  hsdp.shard_size = 8;
  const PlanInputs fsdp8 = Fsdp2(ModelFromPreset("llama3-8b"), 8);
  PlanInputs fsdp16 = fsdp8;
  fsdp16.nodes = 2;
  const PlanResult a = MakePlan(hsdp), b = MakePlan(fsdp8), c = MakePlan(fsdp16);
  EXPECT_EQ(a.ranks, 16u);
  EXPECT_EQ(a.shard_size, 8u);
  EXPECT_EQ(c.shard_size, 16u);
  EXPECT_EQ(a.shard_elements, b.shard_elements);
  EXPECT_LT(c.shard_elements, b.shard_elements);
  EXPECT_EQ(EvaluateFraction(hsdp, 0.5).gpu.total(), EvaluateFraction(fsdp8, 0.5).gpu.total());
  bool said = false;
  for (const std::string& m : a.messages) said = said || m.find("HSDP") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(Fsdp2Inputs, BadCombinationsAreRefused) {
  auto refused = [](const PlanInputs& in, const std::string& what) {
    try {
      MakePlan(in);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  PlanInputs in = Fsdp2(ModelFromPreset("llama3-1b"), 8);
  in.shard_size = 3;
  refused(in, "the shard size 3 does not divide the 8 ranks");
  in.shard_size = 16;
  refused(in, "the shard size 16 does not divide the 8 ranks");
  in.shard_size = 4;
  EXPECT_NO_THROW(MakePlan(in));
  in.fsdp2 = false;
  refused(in, "needs FSDP2");
  in = Fsdp2(ModelFromPreset("llama3-1b"), 8);
  in.zero1_sharding = true;
  refused(in, "exclude each other");
  in = Fsdp2(ModelFromPreset("llama3-1b"), 8);
  in.speculative_host_bytes = kGiB;
  refused(in, "speculation budgets need speculative early start");
  in = Fsdp2(Tiny(), 2);
  in.model.tensors[1].shape = {64, 64};
  refused(in, "tensor 'layers.0.w': its shape has 4096 elements, its numel is 8192");
  in = Fsdp2(Tiny(), 2);
  in.fsdp2_blocks_in_flight = 0;
  refused(in, "blocks in flight");
}

TEST(Fsdp2Plan, RunnableAndSaysSo) {
  PlanInputs in = Fsdp2(ModelFromPreset("llama3-8b"), 8);
  in.gpu_budget = 80 * kGiB;
  in.host_budget = 1024 * kGiB;
  const PlanResult plan = MakePlan(in);
  ASSERT_TRUE(plan.feasible) << plan.messages[0];
  EXPECT_TRUE(plan.runnable);
  EXPECT_NE(plan.messages[0].find("Runnable: FSDP2"), std::string::npos) << plan.messages[0];
  for (const std::string& m : plan.messages)
    EXPECT_EQ(m.find("not modelled"), std::string::npos) << m;
  const std::string text = PlanToText(plan);
  EXPECT_NE(text.find("FSDP2 over 8 rank(s): rank 0 steps its shards"), std::string::npos);
  EXPECT_NE(text.find("GPU GiB/rank"), std::string::npos);
  EXPECT_NE(text.find("unsharded"), std::string::npos);
  EXPECT_NE(PlanToSvg(plan).find("GPU memory, per rank (rank 0)"), std::string::npos);
  EXPECT_NE(PlanToSvg(plan).find("FSDP2 over 8 ranks"), std::string::npos);
  // Gradient release runs too. The GPU keeps the GPU-resident part's gradients in the
  // engine's buffer and the largest group in flight: the root unit's, whose gradients
  // arrive together (embedding and head, 16032 of 128256 rows each, and the final norm's
  // 512 of 4096 elements), more than two blocks' shards.
  in.grad_release = Choice::kOn;
  const PlanResult released = MakePlan(in);
  ASSERT_TRUE(released.feasible) << released.messages[0];
  EXPECT_TRUE(released.runnable);
  EXPECT_TRUE(released.recommended.grad_release);
  const uint64_t root = 2ull * 16032 * 4096 + 512;
  EXPECT_EQ(GradientsInFlight(in, ShardSpecs(in)), root);
  EXPECT_EQ(released.recommended.gpu.gradients,
            2 * (released.recommended.hot_elements + root));
  EXPECT_NE(released.messages[0].find("gradient release on. "), std::string::npos)
      << released.messages[0];
  // tandem.torch runs it (FSDP2's hooks hand the gradients over).
  EXPECT_NE(released.messages[0].find("Runnable: FSDP2 with tandem.torch, release_grads=True"),
            std::string::npos)
      << released.messages[0];
  // Its host keeps a pinned gradient area for the offloaded elements.
  EXPECT_EQ(released.recommended.host.gradients, 2 * released.recommended.cold_elements);
}

TEST(Fsdp2Plan, JsonFields) {
  PlanInputs in = Fsdp2(ModelFromPreset("llama3-8b"), 8);
  in.nodes = 2;
  in.shard_size = 8;
  const PlanResult plan = MakePlan(in);
  const nlohmann::json j = nlohmann::json::parse(PlanToJson(plan));
  EXPECT_TRUE(j.at("optimizer").at("fsdp2").get<bool>());
  EXPECT_TRUE(j.at("available").at("fsdp2").get<bool>());
  EXPECT_TRUE(j.at("runnable").get<bool>());
  EXPECT_EQ(j.at("ranks").at("total").get<uint64_t>(), 16u);
  EXPECT_EQ(j.at("ranks").at("shard_size").get<uint64_t>(), 8u);
  EXPECT_EQ(j.at("ranks").at("shard_elements").get<uint64_t>(), plan.shard_elements);
  const nlohmann::json& f = j.at("fsdp2");
  EXPECT_EQ(f.at("shard_size").get<uint64_t>(), 8u);
  EXPECT_EQ(f.at("replicas").get<uint64_t>(), 2u);
  EXPECT_EQ(f.at("blocks_in_flight").get<uint64_t>(), 2u);
  EXPECT_EQ(f.at("f32_moment_tensors").get<uint64_t>(), 2u * 32 + 1);  // the norms
  EXPECT_EQ(f.at("f32_moment_elements").get<uint64_t>(), plan.f32_moment_elements);
  EXPECT_EQ(j.at("recommended").at("gpu_bytes").at("unsharded").get<uint64_t>(),
            Fsdp2UnshardedBytes(in));
  EXPECT_EQ(j.at("recommended").at("gpu_bytes").at("weights").get<uint64_t>(),
            2 * plan.shard_elements);
  // Without FSDP2 the object is null.
  in.fsdp2 = false;
  in.shard_size = 0;
  EXPECT_TRUE(nlohmann::json::parse(PlanToJson(MakePlan(in))).at("fsdp2").is_null());
}

TEST(Fsdp2Models, TensorsCarryTheirShapes) {
  const ModelDescription m = ModelFromPreset("llama3-8b");
  auto shape_of = [&](const std::string& name) {
    for (const ModelTensor& t : m.tensors)
      if (t.name == name) return t.shape;
    ADD_FAILURE() << name;
    return std::vector<uint64_t>{};
  };
  EXPECT_EQ(shape_of("model.embed_tokens.weight"), (std::vector<uint64_t>{128256, 4096}));
  EXPECT_EQ(shape_of("model.layers.0.self_attn.k_proj.weight"),
            (std::vector<uint64_t>{1024, 4096}));
  EXPECT_EQ(shape_of("model.layers.0.mlp.down_proj.weight"), (std::vector<uint64_t>{4096, 14336}));
  EXPECT_EQ(shape_of("model.norm.weight"), (std::vector<uint64_t>{4096}));
  for (const ModelTensor& t : m.tensors) {
    uint64_t n = 1;
    for (uint64_t d : t.shape) n *= d;
    EXPECT_EQ(n, t.numel) << t.name;
  }
  const ModelDescription p = ModelFromParamsJson(
      R"([{"name": "a.weight", "shape": [3, 5], "dtype": "bfloat16"}])", "inline");
  EXPECT_EQ(p.tensors.at(0).shape, (std::vector<uint64_t>{3, 5}));
  EXPECT_EQ(ModelFromParamCount(10, 2).tensors.at(1).shape, (std::vector<uint64_t>{5}));
}

}  // namespace
}  // namespace tandem::planner
