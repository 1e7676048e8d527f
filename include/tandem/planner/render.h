// The planner's renderings: a text report (tables and verdict), JSON, and an SVG chart
// of a plan; text and JSON of the largest-model search (tandem/planner.h).
#pragma once

#include <string>

#include "tandem/planner/plan.h"

namespace tandem::planner {

// Renderings of a plan: a text report (tables and verdict), JSON, and an SVG chart.
std::string PlanToText(const PlanResult& plan);
std::string PlanToJson(const PlanResult& plan);
std::string PlanToSvg(const PlanResult& plan);

// The largest-model search as a text table and as JSON.
std::string LargestToText(const LargestResult& result);
std::string LargestToJson(const LargestResult& result);

}  // namespace tandem::planner
