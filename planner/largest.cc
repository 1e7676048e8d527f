// The largest Llama-3-shaped model that fits a node (docs/planner.md "The largest model"):
// per width of the family, the most decoder layers that fit, by bisection.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/model_config.h"
#include "tandem/planner.h"

namespace tandem::planner {
ModelDescription PresetWithLayers(const std::string& preset, uint64_t layers) {
  LlamaShape s = PresetShape(preset);
  s.layers = layers;
  return LlamaModel(s, preset + " x " + std::to_string(layers) + " layers", "llama");
}

LargestResult FindLargest(const PlanInputs& inputs) {
  LargestResult result;
  result.inputs = inputs;
  for (const std::string& preset : PresetNames()) {
    LargestRow row;
    row.shape = preset;
    row.published_layers = PresetShape(preset).layers;
    PlanInputs in = inputs;
    auto fits = [&](uint64_t layers) {
      in.model = PresetWithLayers(preset, layers);
      return PlanFits(in);
    };
    // The most layers in [1, 2 x published] that fit: memory grows with the layers.
    uint64_t lo = 0, hi = 2 * row.published_layers + 1;  // fits(lo) (none), !fits(hi)
    if (fits(hi - 1)) {
      lo = hi - 1;
    } else {
      while (hi - lo > 1) {
        const uint64_t mid = lo + (hi - lo) / 2;
        (fits(mid) ? lo : hi) = mid;
      }
    }
    row.layers = lo;
    row.published_fits = lo >= row.published_layers;
    in.model = PresetWithLayers(preset, std::max<uint64_t>(lo, 1));
    row.plan = MakePlan(in);
    row.params = lo > 0 ? in.model.total_params() : 0;
    if (lo > 0 && (result.best < 0 || row.params > result.rows[result.best].params))
      result.best = static_cast<int>(result.rows.size());
    result.rows.push_back(std::move(row));
  }
  return result;
}

std::string LargestToText(const LargestResult& r) {
  const PlanInputs& in = r.inputs;
  std::string s;
  char b[512];
  std::snprintf(b, sizeof b,
                "Largest Llama-3-shaped model on %u GPU(s)/node x %u node(s) of %.2f GiB, "
                "%.2f GiB host per node%s\n",
                in.gpus_per_node, in.nodes, ToGiB(in.gpu_budget), ToGiB(in.host_budget),
                in.fsdp2 ? ", FSDP2" : "");
  s += b;
  std::snprintf(b, sizeof b, "  %-12s %10s %10s %16s %9s %8s %12s %12s %7s\n", "width", "layers",
                "published", "parameters", "fraction", "release", "iter ms", "tokens/s/GPU",
                "MFU");
  s += b;
  for (const LargestRow& row : r.rows) {
    const FractionPoint& p = row.plan.recommended;
    const bool fits = row.layers > 0, it = fits && p.iteration.modelled;
    char fraction[16] = "-", iter[16] = "-", tokens[16] = "-", mfu[16] = "-";
    if (fits) std::snprintf(fraction, sizeof fraction, "%.4f", p.fraction);
    if (it) {
      std::snprintf(iter, sizeof iter, "%.0f", p.iteration.iteration_ms);
      std::snprintf(tokens, sizeof tokens, "%.0f", p.iteration.tokens_per_s);
      std::snprintf(mfu, sizeof mfu, "%.1f%%", 100 * p.iteration.mfu);
    }
    std::snprintf(b, sizeof b, "  %-12s %10llu %10llu %16llu %9s %8s %12s %12s %7s\n",
                  row.shape.c_str(), static_cast<unsigned long long>(row.layers),
                  static_cast<unsigned long long>(row.published_layers),
                  static_cast<unsigned long long>(row.params), fraction,
                  fits ? (p.grad_release ? "on" : "off") : "-", iter, tokens, mfu);
    s += b;
  }
  s += "  (layers: the most that fit, up to twice the published depth; 0: not even one)\n\n";
  if (r.best < 0) {
    s += "NOTHING FITS: not even one layer of the narrowest width (llama3-1b's)\n";
    return s;
  }
  const LargestRow& best = r.rows[r.best];
  std::snprintf(b, sizeof b,
                "LARGEST: %s's width with %llu layers, %llu parameters (%.1fB)%s\n\n"
                "Its plan:\n",
                best.shape.c_str(), static_cast<unsigned long long>(best.layers),
                static_cast<unsigned long long>(best.params), static_cast<double>(best.params) / 1e9,
                best.published_fits ? "; the published model fits too" : "");
  s += b;
  s += PlanToText(best.plan);
  return s;
}

std::string LargestToJson(const LargestResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const LargestRow& row : r.rows) {
    const FractionPoint& p = row.plan.recommended;
    nlohmann::json j = {{"shape", row.shape},
                        {"layers", row.layers},
                        {"published_layers", row.published_layers},
                        {"published_fits", row.published_fits},
                        {"params", row.params}};
    if (row.layers > 0) {
      j["fraction"] = p.fraction;
      j["grad_release"] = p.grad_release;
      j["gpu_bytes"] = p.gpu.total();
      j["host_bytes_per_node"] = p.host_node_bytes;
      j["step_ms"] = p.time.step_ms;
      if (p.iteration.modelled) {
        j["iteration_ms"] = p.iteration.iteration_ms;
        j["exposed_ms"] = p.iteration.exposed_ms;
        j["tokens_per_s"] = p.iteration.tokens_per_s;
        j["mfu"] = p.iteration.mfu;
      }
    }
    rows.push_back(j);
  }
  nlohmann::json out = {{"schema", "tandem-plan-largest/1"},
                        {"rows", rows},
                        {"best", r.best >= 0 ? nlohmann::json(r.rows[r.best].shape) : nullptr}};
  if (r.best >= 0) out["plan"] = nlohmann::json::parse(PlanToJson(r.rows[r.best].plan));
  return out.dump(2) + "\n";
}

}  // namespace tandem::planner
