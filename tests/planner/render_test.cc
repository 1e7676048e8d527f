#include <cstdio>
#include <string>
#include <vector>

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

// One <text> of an SVG with a conservative box: 0.6 em per character (0.65 bold), from
// 0.9 em above the baseline to 0.2 em below; rotated texts (translate(x,y) rotate(-90),
// centred) turned on their side.
struct TextBox {
  std::string text;
  double x0, y0, x1, y1;
};

std::string Attr(const std::string& tag, const std::string& name) {
  const size_t at = tag.find(" " + name + "='");
  if (at == std::string::npos) return "";
  const size_t from = at + name.size() + 3;
  return tag.substr(from, tag.find('\'', from) - from);
}

std::vector<TextBox> TextBoxes(const std::string& svg) {
  std::vector<TextBox> out;
  for (size_t at = svg.find("<text"); at != std::string::npos; at = svg.find("<text", at + 1)) {
    const size_t close = svg.find('>', at);
    const size_t end = svg.find("</text>", close);
    const std::string tag = svg.substr(at, close - at);
    std::string text = svg.substr(close + 1, end - close - 1);
    size_t glyphs = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      const unsigned char c = text[i];
      if (c == '&') i = text.find(';', i);  // one entity, one glyph
      glyphs += (c & 0xC0) != 0x80;
    }
    const double size = std::stod(Attr(tag, "font-size"));
    const double w = glyphs * size * (Attr(tag, "font-weight") == "bold" ? 0.65 : 0.6);
    const std::string anchor = Attr(tag, "text-anchor");
    const std::string transform = Attr(tag, "transform");
    TextBox b{text, 0, 0, 0, 0};
    if (!transform.empty()) {
      double x = 0, y = 0;
      EXPECT_EQ(std::sscanf(transform.c_str(), "translate(%lf,%lf) rotate(-90)", &x, &y), 2)
          << transform;
      EXPECT_EQ(anchor, "middle");
      b = {text, x - 0.9 * size, y - w / 2, x + 0.2 * size, y + w / 2};
    } else {
      const double x = std::stod(Attr(tag, "x")), y = std::stod(Attr(tag, "y"));
      const double x0 = anchor == "middle" ? x - w / 2 : anchor == "end" ? x - w : x;
      b = {text, x0, y - 0.9 * size, x0 + w, y + 0.2 * size};
    }
    out.push_back(b);
  }
  return out;
}

void ExpectNoOverlaps(const std::string& svg, const std::string& what) {
  const std::vector<TextBox> boxes = TextBoxes(svg);
  EXPECT_GT(boxes.size(), 20u) << what;
  double width = 0, height = 0;
  std::sscanf(svg.c_str(), "<svg xmlns='http://www.w3.org/2000/svg' width='%lf' height='%lf'",
              &width, &height);
  ASSERT_GT(width, 0);
  for (size_t i = 0; i < boxes.size(); ++i) {
    const TextBox& a = boxes[i];
    EXPECT_TRUE(a.x0 >= 0 && a.y0 >= 0 && a.x1 <= width && a.y1 <= height)
        << what << ": '" << a.text << "' leaves the canvas";
    for (size_t j = i + 1; j < boxes.size(); ++j) {
      const TextBox& b = boxes[j];
      EXPECT_FALSE(a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1)
          << what << ": '" << a.text << "' overlaps '" << b.text << "'";
    }
  }
}

TEST(PlanSvg, LabelsDoNotOverlap) {
  ExpectNoOverlaps(PlanToSvg(SomePlan(40)), "fits");
  ExpectNoOverlaps(PlanToSvg(SomePlan(10)), "does not fit");
  // GPU and host budget lines on top of each other, and the usable line just below.
  PlanInputs in;
  in.model = ModelFromPreset("llama3-8b");
  in.gpu_budget = in.host_budget = 40ull << 30;
  const PlanResult same = MakePlan(in);
  const std::string svg = PlanToSvg(same);
  ExpectNoOverlaps(svg, "equal budgets");
  EXPECT_NE(svg.find("GPU budget"), std::string::npos);
  EXPECT_NE(svg.find("host budget"), std::string::npos);
  EXPECT_NE(svg.find("usable"), std::string::npos);
  // Recommended fraction near 1, no headroom, a very long model name, the host budget
  // far above the scale.
  in.model.name = std::string(300, 'm') + "/config.json";
  in.gpu_headroom_fraction = 0;
  in.host_budget = 4ull << 40;
  in.gpu_budget = EvaluateFraction(in, 0.97).gpu.total();
  const PlanResult high = MakePlan(in);
  ASSERT_TRUE(high.feasible);
  EXPECT_GT(high.recommended.fraction, 0.9);
  ExpectNoOverlaps(PlanToSvg(high), "high fraction");
  // A mixture of experts with activations.
  in = PlanInputs{};
  in.model = ModelFromConfigFile(std::string(TANDEM_PLANNER_CONFIGS) + "/qwen3-30b-a3b");
  in.gpu_budget = 141000000000ull;
  in.host_budget = 1ull << 40;
  in.activation_shape.seq_len = 4096;
  ExpectNoOverlaps(PlanToSvg(MakePlan(in)), "qwen3-30b-a3b");
  // FSDP2 (longer title and legend): Llama-3-70B on 8 x 80 GiB, HSDP over 2 nodes.
  in = PlanInputs{};
  in.model = ModelFromPreset("llama3-70b");
  in.gpu_budget = 80ull << 30;
  in.host_budget = 2ull << 40;
  in.gpus_per_node = 8;
  in.nodes = 2;
  in.fsdp2 = true;
  in.shard_size = 8;
  ExpectNoOverlaps(PlanToSvg(MakePlan(in)), "fsdp2");
}

TEST(PlanSvg, SaysHeadroomAndAttention) {
  PlanInputs in;
  in.model = ModelFromPreset("llama3-8b");
  in.gpu_budget = 40ull << 30;
  in.host_budget = 512ull << 30;
  in.activation_shape.seq_len = 2048;
  const std::string svg = PlanToSvg(MakePlan(in));
  EXPECT_NE(svg.find("headroom 5%"), std::string::npos);
  EXPECT_NE(svg.find("FlashAttention-style"), std::string::npos);
  in.activation_shape.attention = Attention::kEager;
  EXPECT_NE(PlanToSvg(MakePlan(in)).find("eager attention"), std::string::npos);
}

TEST(PlanJson, WrapperFields) {
  PlanInputs in;
  in.model = ModelFromConfigFile(std::string(TANDEM_PLANNER_CONFIGS) + "/deepseek-v3");
  in.gpu_budget = 141000000000ull;
  in.host_budget = 2ull << 40;
  in.activation_shape.seq_len = 4096;
  const nlohmann::json j = nlohmann::json::parse(PlanToJson(MakePlan(in)));
  EXPECT_EQ(j.at("model").at("params").get<uint64_t>(), 671026419200u);
  EXPECT_EQ(j.at("model").at("architecture"), "deepseek_v3");
  EXPECT_FALSE(j.at("model").at("notes").empty());
  EXPECT_FALSE(j.at("version").get<std::string>().empty());
  EXPECT_DOUBLE_EQ(j.at("budgets").at("gpu_headroom_fraction").get<double>(), 0.05);
  EXPECT_EQ(j.at("budgets").at("usable_gpu_bytes").get<uint64_t>(), 133950000000u);
  EXPECT_EQ(j.at("activations").at("attention"), "flash");
  EXPECT_EQ(j.at("activations").at("source"), "estimated");
  EXPECT_TRUE(j.at("available").at("grad_release").get<bool>());
  EXPECT_FALSE(j.at("available").at("zero1_sharding").get<bool>());
  EXPECT_TRUE(j.at("available").at("fsdp2").get<bool>());  // modelled, and runnable
  EXPECT_TRUE(j.at("runnable").get<bool>());
  EXPECT_TRUE(j.at("fsdp2").is_null());        // not asked for
  EXPECT_FALSE(j.at("feasible").get<bool>());  // 1.25 TB of bf16 weights per GPU
}

TEST(PlanText, HasTablesAndVerdict) {
  const std::string text = PlanToText(SomePlan(40));
  EXPECT_NE(text.find("Fraction sweep"), std::string::npos);
  EXPECT_NE(text.find("moments"), std::string::npos);
  EXPECT_NE(text.find("FITS"), std::string::npos);
  EXPECT_NE(text.find("BUILT-IN DEFAULT"), std::string::npos);
  EXPECT_NE(text.find("38.00 GiB usable (headroom 5%)"), std::string::npos);
  EXPECT_NE(text.find("--fsdp2 for FSDP2 shards"), std::string::npos);
  EXPECT_EQ(text.find("not modelled"), std::string::npos);
}

}  // namespace
}  // namespace tandem::planner
