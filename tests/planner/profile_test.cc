#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "tandem/error.h"
#include "tandem/planner.h"
#include "tests/planner/temp_dir.h"

namespace tandem::planner {
namespace {

const char* kGood = R"({"schema": "tandem-profile/1", "machine": "box", "date": "2026-11-21",
  "source": "tandem-bench calibrate", "gpu": {"name": "H200", "hbm_copy_gbps": 4200,
  "kernels": {"adamw/bf16+ecc8/q8/q8/bf16": {"gparams_per_s": 300}}},
  "host": {"threads": 16, "isa": "avx512", "copy_gbps": 120, "triad_gbps": 140,
  "kernels": {}}, "pcie": {"h2d_gbps": 55, "d2h_gbps": 54, "bidir_gbps": 100}})";

TEST(Profile, ParsesEveryField) {
  const Profile p = ParseProfile(kGood, "good");
  EXPECT_EQ(p.machine, "box");
  EXPECT_EQ(p.source, "tandem-bench calibrate");
  EXPECT_EQ(p.gpu.name, "H200");
  EXPECT_EQ(p.gpu.hbm_copy_gbps, 4200);
  ASSERT_EQ(p.gpu.kernels.count("adamw/bf16+ecc8/q8/q8/bf16"), 1u);
  EXPECT_EQ(p.gpu.kernels.at("adamw/bf16+ecc8/q8/q8/bf16").gparams_per_s, 300);
  EXPECT_EQ(p.host.threads, 16);
  EXPECT_EQ(p.host.triad_gbps, 140);
  EXPECT_EQ(p.pcie.bidir_gbps, 100);
  EXPECT_FALSE(p.builtin_default);
}

TEST(Profile, WriteThenReadRoundTrips) {
  TempDir dir;
  Profile p = ParseProfile(kGood, "good");
  p.host.kernels["lion/bf16/q8/f32/bf16"].gparams_per_s = 7.25;
  const std::string path = dir.path() + "/profile.json";
  WriteProfile(p, path);
  const Profile q = ReadProfile(path);
  EXPECT_EQ(ProfileToJson(q), ProfileToJson(p));
  EXPECT_EQ(q.host.kernels.at("lion/bf16/q8/f32/bf16").gparams_per_s, 7.25);
  // The default profile serialises to a valid profile too.
  EXPECT_NO_THROW(ParseProfile(ProfileToJson(DefaultProfile()), "default"));
}

TEST(Profile, DefaultIsTheDesignReference) {
  const Profile d = DefaultProfile();
  EXPECT_TRUE(d.builtin_default);
  EXPECT_EQ(d.gpu.hbm_copy_gbps, 4260);
  EXPECT_EQ(d.pcie.h2d_gbps, 55.6);
  EXPECT_EQ(d.pcie.d2h_gbps, 55.5);
  EXPECT_EQ(d.pcie.bidir_gbps, 101.7);
  EXPECT_EQ(d.host.triad_gbps, 146);
  EXPECT_EQ(d.host.threads, 16);
  EXPECT_TRUE(d.gpu.kernels.empty());
  EXPECT_TRUE(d.host.kernels.empty());
  EXPECT_NE(d.machine.find("built-in"), std::string::npos);
}

// The GH200 profile: NVIDIA's published figures, said to be published (not measured) in
// the machine name the plan prints; NVLink-C2C where the H200 has PCIe.
TEST(Profile, GraceHopperIsThePublishedGh200) {
  const Profile g = GraceHopperProfile();
  EXPECT_FALSE(g.builtin_default);
  EXPECT_NE(g.machine.find("published figures, not measured"), std::string::npos) << g.machine;
  EXPECT_NE(g.source.find("published"), std::string::npos) << g.source;
  EXPECT_EQ(g.gpu.hbm_copy_gbps, 4900);
  EXPECT_EQ(g.pcie.h2d_gbps, 450);
  EXPECT_EQ(g.pcie.d2h_gbps, 450);
  EXPECT_EQ(g.pcie.bidir_gbps, 900);
  EXPECT_EQ(g.host.threads, 72);
  EXPECT_EQ(g.host.isa, "sve");
  EXPECT_EQ(g.host.triad_gbps, 512);
  EXPECT_EQ(g.host.dram_gbps, 0);
  EXPECT_TRUE(g.gpu.kernels.empty());
  EXPECT_TRUE(g.host.kernels.empty());
  const Profile q = ParseProfile(ProfileToJson(g), "grace-hopper");
  EXPECT_EQ(ProfileToJson(q), ProfileToJson(g));
}

TEST(Profile, BuiltinByNameElseFile) {
  EXPECT_EQ(ProfileToJson(*BuiltinProfile("h200")), ProfileToJson(DefaultProfile()));
  EXPECT_EQ(ProfileToJson(*BuiltinProfile("grace-hopper")), ProfileToJson(GraceHopperProfile()));
  EXPECT_FALSE(BuiltinProfile("gh200").has_value());
  EXPECT_EQ(ProfileByNameOrPath("grace-hopper").host.threads, 72);
  try {
    ProfileByNameOrPath("no-such-profile.json");
    FAIL() << "a missing profile file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-profile.json"), std::string::npos) << e.what();
  }
}

void ExpectBad(const std::string& text, const std::string& needle) {
  try {
    ParseProfile(text, "p.json");
    ADD_FAILURE() << "accepted: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("p.json"), std::string::npos) << e.what();
  }
}

TEST(Profile, RejectsBadProfilesNamingTheField) {
  std::string s = kGood;
  ExpectBad("[]", "object");
  ExpectBad("{", "JSON");
  ExpectBad(R"({"schema": "tandem-profile/2"})", "tandem-profile/2");
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = kGood;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  ExpectBad(replace("\"hbm_copy_gbps\": 4200", "\"hbm\": 4200"), "gpu.hbm_copy_gbps");
  ExpectBad(replace("\"bidir_gbps\": 100", "\"bidir_gbps\": -1"), "pcie.bidir_gbps");
  ExpectBad(replace("\"gparams_per_s\": 300", "\"gparams_per_s\": \"fast\""), "gparams_per_s");
  ExpectBad(replace("\"threads\": 16", "\"threads\": 1.5"), "host.threads");
  ExpectBad(replace("\"machine\": \"box\",", ""), "machine");
  EXPECT_THROW(ReadProfile("/nonexistent/profile.json"), Error);
}

TEST(Profile, ConcurrentFiguresRoundTripAndOlderProfilesLoad) {
  // kGood predates them: not measured.
  const Profile old = ParseProfile(kGood, "good");
  EXPECT_EQ(old.pcie.h2d_concurrent_gbps, 0);
  EXPECT_EQ(old.pcie.d2h_concurrent_gbps, 0);
  EXPECT_TRUE(old.host.kernels_under_dma.empty());
  EXPECT_EQ(ProfileToJson(old).find("concurrent"), std::string::npos);  // not written as 0
  Profile p = old;
  p.pcie.h2d_concurrent_gbps = 48.5;
  p.pcie.d2h_concurrent_gbps = 47.25;
  p.host.kernels_under_dma["adamw/bf16+ecc8/q8/q8/bf16"].gparams_per_s = 6.5;
  const Profile q = ParseProfile(ProfileToJson(p), "written");
  EXPECT_EQ(q.pcie.h2d_concurrent_gbps, 48.5);
  EXPECT_EQ(q.pcie.d2h_concurrent_gbps, 47.25);
  ASSERT_EQ(q.host.kernels_under_dma.count("adamw/bf16+ecc8/q8/q8/bf16"), 1u);
  EXPECT_EQ(q.host.kernels_under_dma.at("adamw/bf16+ecc8/q8/q8/bf16").gparams_per_s, 6.5);
  EXPECT_EQ(ProfileToJson(q), ProfileToJson(p));
  // Present but bad: named.
  auto replace = [](std::string t, const std::string& from, const std::string& to) {
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  ExpectBad(
      replace(kGood, "\"bidir_gbps\": 100", "\"bidir_gbps\": 100, \"d2h_concurrent_gbps\": 0"),
      "pcie.d2h_concurrent_gbps");
  ExpectBad(replace(kGood, "\"kernels\": {}}", "\"kernels\": {}, \"kernels_under_dma\": []}"),
            "host.kernels_under_dma");
  ExpectBad(replace(kGood, "\"kernels\": {}}",
                    "\"kernels\": {}, \"kernels_under_dma\": {\"k\": {\"gparams_per_s\": -2}}}"),
            "host.kernels_under_dma.k.gparams_per_s");
}

// Note [Fixed step cost] and the pre-pass rate: optional, absent in kGood (older
// profiles), round-tripped when measured, named when bad.
TEST(Profile, StepOverheadAndPrepassRoundTripAndOlderProfilesLoad) {
  const Profile old = ParseProfile(kGood, "good");
  EXPECT_EQ(old.gpu.prepass_gparams_per_s, 0);
  EXPECT_FALSE(old.step_overhead.engine.measured);
  EXPECT_FALSE(old.step_overhead.binding.measured);
  EXPECT_EQ(old.step_overhead.engine.ms(300), 0);
  EXPECT_EQ(ProfileToJson(old).find("step_overhead"), std::string::npos);
  EXPECT_EQ(ProfileToJson(old).find("prepass"), std::string::npos);
  Profile p = old;
  p.gpu.prepass_gparams_per_s = 946.5;
  p.step_overhead.engine = {true, 0.375, 1.5};
  const Profile q = ParseProfile(ProfileToJson(p), "written");
  EXPECT_EQ(q.gpu.prepass_gparams_per_s, 946.5);
  EXPECT_TRUE(q.step_overhead.engine.measured);
  EXPECT_EQ(q.step_overhead.engine.per_step_ms, 0.375);
  EXPECT_EQ(q.step_overhead.engine.per_tensor_us, 1.5);
  EXPECT_DOUBLE_EQ(q.step_overhead.engine.ms(100), 0.375 + 0.15);
  EXPECT_FALSE(q.step_overhead.binding.measured);  // one part without the other
  EXPECT_EQ(ProfileToJson(q), ProfileToJson(p));
  // Zero is a measurement (a binding that costs nothing per tensor).
  const std::string zero = std::string(kGood).insert(
      1, R"("step_overhead": {"binding": {"per_step_ms": 0, "per_tensor_us": 0}}, )");
  EXPECT_TRUE(ParseProfile(zero, "zero").step_overhead.binding.measured);
  auto with = [](const std::string& field) { return std::string(kGood).insert(1, field + ", "); };
  ExpectBad(with(R"("step_overhead": [])"), "step_overhead");
  ExpectBad(with(R"("step_overhead": {"engine": 3})"), "step_overhead.engine");
  ExpectBad(with(R"("step_overhead": {"engine": {"per_step_ms": 1}})"),
            "step_overhead.engine.per_tensor_us");
  ExpectBad(with(R"("step_overhead": {"binding": {"per_step_ms": -1, "per_tensor_us": 2}})"),
            "step_overhead.binding.per_step_ms");
  std::string bad_prepass = kGood;
  bad_prepass.replace(bad_prepass.find("\"hbm_copy_gbps\": 4200"), 21,
                      "\"hbm_copy_gbps\": 4200, \"prepass_gparams_per_s\": 0");
  ExpectBad(bad_prepass, "gpu.prepass_gparams_per_s");
}

TEST(Profile, FitStepOverheadIsTheLineThroughTwoCounts) {
  const Profile::Overhead o = FitStepOverhead(16, 1.0 + 16 * 0.004, 512, 1.0 + 512 * 0.004);
  EXPECT_TRUE(o.measured);
  EXPECT_NEAR(o.per_step_ms, 1.0, 1e-12);
  EXPECT_NEAR(o.per_tensor_us, 4.0, 1e-9);
  EXPECT_NEAR(o.ms(146), 1.0 + 146 * 0.004, 1e-12);
  // Noise: fewer tensors slower (no per-tensor cost), or a slope beyond the few's time.
  const Profile::Overhead flat = FitStepOverhead(16, 2.0, 512, 1.5);
  EXPECT_EQ(flat.per_tensor_us, 0);
  EXPECT_EQ(flat.per_step_ms, 2.0);
  EXPECT_EQ(FitStepOverhead(16, 0.001, 512, 10.0).per_step_ms, 0);
  EXPECT_THROW(FitStepOverhead(512, 1.0, 16, 2.0), Error);
  EXPECT_THROW(FitStepOverhead(0, 1.0, 16, 2.0), Error);
  EXPECT_THROW(FitStepOverhead(16, -1.0, 512, 2.0), Error);
  EXPECT_THROW(FitStepOverhead(16, 1.0, 512, NAN), Error);
}

TEST(Profile, KernelKey) {
  EXPECT_EQ(
      KernelKey(Algorithm::kAdamW, {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8},
                DType::kBF16),
      "adamw/bf16+ecc8/q8/q8/bf16");
  EXPECT_EQ(KernelKey(Algorithm::kAdamW, {}, DType::kF32), "adamw/f32/f32/f32/f32");
}

}  // namespace
}  // namespace tandem::planner

namespace tandem::planner {
namespace {

// Note [The node is one machine]: the figures of N ranks measured at once, the host DRAM
// under DMA, and the training throughput, written and read back.
TEST(Profile, NodeAndTrainingFieldsRoundTrip) {
  Profile p = ParseProfile(kGood, "good");
  EXPECT_EQ(p.node.ranks, 0);  // absent
  EXPECT_EQ(p.gpu.train_tflops, 0);
  EXPECT_EQ(p.host.dram_gbps, 0);
  p.gpu.train_tflops = 412.5;
  p.gpu.peak_tflops = 989;
  p.host.dram_gbps = 171.25;
  p.node.ranks = 4;
  p.node.gpus = 4;
  p.node.cpus_per_rank = 16;
  p.node.host_kernels["adamw/f32/f32/f32/bf16"].gparams_per_s = 1.5;
  p.node.host_kernels_under_dma["adamw/f32/f32/f32/bf16"].gparams_per_s = 1.125;
  p.node.h2d_concurrent_gbps = 20.5;
  p.node.d2h_concurrent_gbps = 21.25;
  const Profile q = ParseProfile(ProfileToJson(p), "round trip");
  EXPECT_EQ(ProfileToJson(q), ProfileToJson(p));
  EXPECT_EQ(q.gpu.train_tflops, 412.5);
  EXPECT_EQ(q.gpu.peak_tflops, 989);
  EXPECT_EQ(q.host.dram_gbps, 171.25);
  EXPECT_EQ(q.node.ranks, 4);
  EXPECT_EQ(q.node.gpus, 4);
  EXPECT_EQ(q.node.cpus_per_rank, 16);
  EXPECT_EQ(q.node.host_kernels.at("adamw/f32/f32/f32/bf16").gparams_per_s, 1.5);
  EXPECT_EQ(q.node.host_kernels_under_dma.at("adamw/f32/f32/f32/bf16").gparams_per_s, 1.125);
  EXPECT_EQ(q.node.h2d_concurrent_gbps, 20.5);
  EXPECT_EQ(q.node.d2h_concurrent_gbps, 21.25);
  // Host mode: ranks without GPUs or PCIe figures.
  Profile h = ParseProfile(kGood, "good");
  h.node.ranks = 2;
  h.node.host_kernels["adamw/f32/f32/f32/bf16"].gparams_per_s = 2;
  const Profile r = ParseProfile(ProfileToJson(h), "host mode");
  EXPECT_EQ(r.node.gpus, 0);
  EXPECT_EQ(r.node.h2d_concurrent_gbps, 0);
  EXPECT_EQ(ProfileToJson(r).find("\"pcie\": {\n      \"h2d_concurrent"), std::string::npos);
}

TEST(Profile, BuiltInNodeDramIsTheFourGpuHosts) {
  const Profile d = DefaultProfile();
  EXPECT_EQ(d.host.dram_gbps, kDefaultNodeDramGbps);
  EXPECT_EQ(d.node.ranks, 0);
  EXPECT_EQ(d.gpu.train_tflops, 0);  // the plan takes kDefaultTrainTflops and says so
}

TEST(Profile, RejectsBadNodeFields) {
  const std::string head = R"({"schema": "tandem-profile/1", "machine": "m",
    "gpu": {"hbm_copy_gbps": 1}, "host": {"triad_gbps": 1},
    "pcie": {"h2d_gbps": 1, "d2h_gbps": 1, "bidir_gbps": 1}, "node": )";
  auto bad = [&](const std::string& node, const std::string& needle) {
    try {
      ParseProfile(head + node + "}", "p.json");
      ADD_FAILURE() << "accepted " << node;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("p.json"), std::string::npos) << e.what();
    }
  };
  bad("[]", "'node' must be an object");
  bad("{}", "'node.ranks' must be an integer >= 1");
  bad(R"({"ranks": 0})", "'node.ranks' must be an integer >= 1");
  bad(R"({"ranks": 2.5})", "'node.ranks' must be an integer >= 0");
  bad(R"({"ranks": 2, "gpus": 3})", "'node.gpus' (3) exceeds 'node.ranks' (2)");
  bad(R"({"ranks": 2, "pcie": {"h2d_concurrent_gbps": -1}})",
      "'node.pcie.h2d_concurrent_gbps' must be a positive number");
  bad(R"({"ranks": 2, "host": {"kernels": {"k": {"gparams_per_s": 0}}}})",
      "'node.host.kernels.k.gparams_per_s' must be a positive number");
  const std::string fields = R"({"schema": "tandem-profile/1", "machine": "m",
    "gpu": {"hbm_copy_gbps": 1, "train_tflops": 0}, "host": {"triad_gbps": 1},
    "pcie": {"h2d_gbps": 1, "d2h_gbps": 1, "bidir_gbps": 1}})";
  EXPECT_THROW(ParseProfile(fields, "t"), Error);
}

}  // namespace
}  // namespace tandem::planner
