// The keyword arguments of tandem.torch's optimizer that run one point of a plan.
#include <cmath>
#include <cstdio>

#include "tandem/planner.h"

namespace tandem::planner {
namespace {

using Kind = OptimizerKwarg::Kind;

OptimizerKwarg Bool(const char* name, bool v) {
  return {.name = name, .kind = Kind::kBool, .boolean = v, .text = {}};
}
OptimizerKwarg Integer(const char* name, uint64_t v) {
  return {.name = name, .kind = Kind::kInteger, .integer = v, .text = {}};
}
OptimizerKwarg Number(const char* name, double v) {
  return {.name = name, .kind = Kind::kNumber, .number = v, .text = {}};
}
OptimizerKwarg Text(const char* name, std::string v) {
  return {.name = name, .kind = Kind::kString, .text = std::move(v)};
}

}  // namespace

std::string OptimizerKwarg::Python() const {
  char b[64];
  switch (kind) {
    case Kind::kBool:
      return boolean ? "True" : "False";
    case Kind::kInteger:
      std::snprintf(b, sizeof b, "%llu", static_cast<unsigned long long>(integer));
      return b;
    case Kind::kNumber:
      std::snprintf(b, sizeof b, "%.10g", number);
      return b;
    case Kind::kString:
      break;
  }
  return "\"" + text + "\"";
}

const char* OptimizerClassName(Algorithm algorithm) noexcept {
  switch (algorithm) {
    case Algorithm::kAdamW:
      return "AdamW";
    case Algorithm::kAdam:
      return "Adam";
    case Algorithm::kLion:
      return "Lion";
    case Algorithm::kSGD:
      return "SGD";
  }
  return "AdamW";
}

std::vector<OptimizerKwarg> OptimizerKwargs(const PlanInputs& in, const FractionPoint& p) {
  std::vector<OptimizerKwarg> out;
  out.push_back(Number("offload_fraction", p.fraction));
  if (p.cold_elements > 0) {
    // The share the point resolved (ShardConfig places exactly it); its names at the ends.
    const double share = p.split_fallback ? 0.0 : p.time.split.share;
    if (share >= 1.0)
      out.push_back(Text("offload_compute", "gpu"));
    else if (share <= 0.0)
      out.push_back(Text("offload_compute", "host"));
    else
      out.push_back(Number("offload_compute", std::round(share * 1e4) / 1e4));
  }
  out.push_back(Text("master_format", Name(in.formats.master)));
  if (HasMomentum(in.algorithm, in.hyper))
    out.push_back(Text("momentum_format", Name(in.formats.momentum)));
  if (HasVariance(in.algorithm)) out.push_back(Text("variance_format", Name(in.formats.variance)));
  if (p.grad_release) out.push_back(Bool("release_grads", true));
  if (in.speculative_early_start && p.cold_elements > 0) {
    out.push_back(Bool("speculative_early_start", true));
    const uint64_t host = p.cold_elements - p.time.streamed;
    if (host > 0) {
      // The engine reads 0 as every host-computed chunk and takes whole chunks within a
      // budget: 1 byte takes none.
      const uint64_t bytes = p.speculated_host >= host ? 0
                             : p.speculated_host == 0  ? 1
                                                       : p.speculative_host_bytes;
      out.push_back(Integer("speculative_host_bytes", bytes));
    }
    if (p.time.streamed > 0)
      out.push_back(Integer("speculative_stream_bytes", p.speculative_stream_bytes));
    if (p.grad_release && p.speculated_streamed > 0 && in.in_place_grad_bytes > 0)
      out.push_back(Integer("in_place_grad_bytes", in.in_place_grad_bytes));
  }
  return out;
}

}  // namespace tandem::planner
