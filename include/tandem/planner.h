// The memory-budget planner: will a model's optimizer step fit on this GPU and host, at
// which offload fraction, and how long will the step take.
//
// Usage (C++; docs/planner.md is the user guide and defines every formula):
//
//   tandem::planner::PlanInputs in;
//   in.model = tandem::planner::ModelFromPreset("llama3-8b");
//   in.gpu_budget = 80ull << 30;
//   in.host_budget = 512ull << 30;
//   in.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
//   tandem::planner::PlanResult plan = tandem::planner::MakePlan(in);
//
// Everything here is a plain value or a pure function: safe to call from any thread.
// Failure: functions throw tandem::Error (kInvalidArgument for bad inputs naming the key,
// file or field at fault; kIO for unreadable or unwritable files). An impossible plan is
// not an error: MakePlan returns it with feasible == false and the shortfalls named.
//
// The declarations live in tandem/planner/: model.h (the model, its activations and
// training FLOPs), profile.h (the machine's profile, sizes), plan.h (inputs, the plan,
// the largest model) and render.h (text, JSON, SVG).
#pragma once

#include "tandem/planner/model.h"
#include "tandem/planner/plan.h"
#include "tandem/planner/profile.h"
#include "tandem/planner/render.h"
