#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tandem/planner.h"

namespace tandem::planner {
namespace {

PlanResult SomePlan(uint64_t gpu_gib) {
  PlanInputs in;
  in.model = ModelFromPreset("llama3-8b");
  in.gpu_budget = gpu_gib << 30;
  in.host_budget = 512ull << 30;
  return MakePlan(in);
}

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(PlanJson, ParsesAndHasTheFields) {
  for (uint64_t gib : {40, 10}) {
    const PlanResult plan = SomePlan(gib);
    const nlohmann::json j = nlohmann::json::parse(PlanToJson(plan));
    EXPECT_EQ(j.at("schema"), "tandem-plan/1");
    EXPECT_EQ(j.at("feasible").get<bool>(), plan.feasible);
    EXPECT_EQ(j.at("model").at("params").get<uint64_t>(), 8030261248u);
    EXPECT_EQ(j.at("sweep").size(), 17u);
    EXPECT_EQ(j.at("recommended").at("gpu_bytes").at("total").get<uint64_t>(),
              plan.recommended.gpu.total());
    for (const char* k : {"weights", "master", "correction", "moments", "scales", "gradients",
                          "staging", "activations", "metadata"})
      EXPECT_TRUE(j.at("recommended").at("gpu_bytes").contains(k)) << k;
    EXPECT_TRUE(j.at("sweep")[3].at("step_ms").contains("step"));
    EXPECT_TRUE(j.at("sweep")[3].contains("bottleneck"));
    EXPECT_TRUE(j.at("profile").at("builtin_default").get<bool>());
    EXPECT_FALSE(j.at("messages").empty());
    EXPECT_EQ(j.at("gpu_short_bytes").get<uint64_t>(), plan.gpu_short_bytes);
  }
}

TEST(PlanSvg, IsWellFormed) {
  for (uint64_t gib : {40, 10}) {
    std::string svg = PlanToSvg(SomePlan(gib));
    while (!svg.empty() && std::isspace(static_cast<unsigned char>(svg.back()))) svg.pop_back();
    EXPECT_EQ(svg.rfind("<svg", 0), 0u);
    EXPECT_TRUE(svg.ends_with("</svg>"));
    EXPECT_EQ(Count(svg, "<text"), Count(svg, "</text>"));
    EXPECT_EQ(Count(svg, "<svg"), 1u);
    EXPECT_NE(svg.find("offload fraction"), std::string::npos);
    EXPECT_NE(svg.find("step time (ms)"), std::string::npos);
    EXPECT_NE(svg.find("GPU budget"), std::string::npos);
    EXPECT_NE(svg.find("host budget"), std::string::npos);
    EXPECT_EQ(svg.find("nan"), std::string::npos);
  }
}

TEST(PlanText, HasTablesAndVerdict) {
  const std::string text = PlanToText(SomePlan(40));
  EXPECT_NE(text.find("Fraction sweep"), std::string::npos);
  EXPECT_NE(text.find("moments"), std::string::npos);
  EXPECT_NE(text.find("FITS"), std::string::npos);
  EXPECT_NE(text.find("BUILT-IN DEFAULT"), std::string::npos);
}

}  // namespace
}  // namespace tandem::planner
