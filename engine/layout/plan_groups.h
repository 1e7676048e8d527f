// Note [One plan per format set]: a gpu::StepPlan steps spans of one set of state formats
// (its kernel is instantiated per format set). When tensors override the configured
// formats (TensorSpec::formats), the hot spans are split by format set, in order of first
// appearance, and each set gets its own plan; a step launches each plan in turn on the
// caller's stream. When every tensor shares one format set this is the one plan (and the
// one launch) of before. Used without CUDA too: the memory prediction sums the plans.
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/types.h"

namespace tandem::layout {

struct PlanGroups {
  std::vector<StateFormats> formats;         // per plan: its format set
  std::vector<std::vector<uint32_t>> spans;  // per plan: the spans it steps, ascending
  std::vector<uint32_t> plan_of_span;        // per span: its plan
};

inline PlanGroups GroupByFormats(const std::vector<StateFormats>& span_formats) {
  PlanGroups g;
  for (uint32_t i = 0; i < span_formats.size(); ++i) {
    uint32_t p = 0;
    while (p < g.formats.size() && !(g.formats[p] == span_formats[i])) ++p;
    if (p == g.formats.size()) {
      g.formats.push_back(span_formats[i]);
      g.spans.emplace_back();
    }
    g.spans[p].push_back(i);
    g.plan_of_span.push_back(p);
  }
  return g;
}

}  // namespace tandem::layout
