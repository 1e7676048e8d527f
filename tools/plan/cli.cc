// tandem-plan's command line as a function (tools/plan/cli.h): CLI11 over the options of
// tools/plan/options.h, with their rules from the same tables the Python binding checks.
#include "tools/plan/cli.h"

#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>

#include "tandem/error.h"
#include "tandem/planner.h"
#include "tandem/version.h"
#include "tools/common/output_file.h"
#include "tools/plan/options.h"

namespace {

using namespace tandem;
using namespace tandem::planner;

// --svg is checked before the plan is made: a writable place that is none of the inputs.
void CheckSvg(const std::string& svg, const PlanOptions& a) {
  if (svg.empty()) return;
  std::vector<tools::NamedPath> inputs = {
      {"--config", a.config}, {"--params-json", a.params_json}, {"--profile", a.profile}};
  if (!a.config.empty()) inputs.push_back({"--config", a.config + "/config.json"});
  tools::CheckOutputFile("--svg", svg, inputs);
}

}  // namespace

namespace tandem::planner {

int RunPlanCli(const std::vector<std::string>& args, std::string* out, std::string* err) {
  std::ostringstream o, e;
  const int rc = [&]() -> int {
  CLI::App app{"tandem-plan: memory-budget planner for Tandem's hybrid GPU/host optimizer step"};
  PlanOptions a;
  auto* model = app.add_option_group("model", "the model (exactly one)");
  app.set_version_flag("--version", std::string("tandem-plan ") + tandem::kVersion);
  using Kind = PlanOptionSpec::Kind;
  for (const PlanOptionSpec& s : PlanOptionSpecs()) {
    const std::string flag = std::string("--") + s.name;
    if (s.kind == Kind::kFlag) {
      app.add_flag(flag, a.*std::get<bool PlanOptions::*>(s.field), s.help);
      continue;
    }
    if (s.kind == Kind::kFlagOn) {
      app.add_flag(flag + "{on}", a.*std::get<std::string PlanOptions::*>(s.field), s.help);
      continue;
    }
    CLI::App* into = s.kind == Kind::kModel ? model : &app;
    CLI::Option* opt =
        std::visit([&](auto field) { return into->add_option(flag, a.*field, s.help); }, s.field);
    if (s.kind == Kind::kShowDefault) opt->capture_default_str();
    if (s.kind == Kind::kRequired) opt->required();
  }
  // One model; --config may also give a tensor list its transformer shape.
  model->require_option(0, 2);
  app.get_option("--config")->check(CLI::ExistingPath);
  app.get_option("--params-json")->check(CLI::ExistingFile);
  bool json = false;
  std::string svg;
  app.add_flag("--json", json, "print the plan as JSON instead of text");
  app.add_option("--svg", svg, "write an SVG chart of memory and step time vs fraction");
  // The rules between the options, as the Python binding checks them (tools/plan/options.h).
  auto opt = [&](const char* name) { return app.get_option(std::string("--") + name); };
  for (const OptionNeeds& n : PlanOptionNeeds()) opt(n.option)->needs(opt(n.needs));
  for (const OptionNeeds& x : PlanOptionExcludes()) opt(x.option)->excludes(opt(x.needs));
  for (const OptionRange& r : PlanOptionRanges()) opt(r.option)->check(CLI::Range(r.lo, r.hi));
  for (const OptionChoices& c : PlanOptionChoices()) {
    if (std::string(c.option) == "profile")
      opt(c.option)->check(CLI::IsMember(c.choices) | CLI::ExistingFile);
    else
      opt(c.option)->check(CLI::IsMember(c.choices));
  }
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11's order
    app.parse(reversed);
  } catch (const CLI::ParseError& pe) {
    const int rc = app.exit(pe, o, e);
    return rc == 0 ? 0 : 2;
  }
  for (const PlanOptionSpec& s : PlanOptionSpecs())
    if (app.count(std::string("--") + s.name) > 0) a.given.insert(s.name);
  std::string problem = PlanOptionsProblem(a);
  if (problem.empty() && a.largest && !svg.empty())
    problem = "--svg draws one plan; not with --largest";
  if (!problem.empty()) {
    e << "tandem-plan: " << problem << "\n";
    return 2;
  }
  if (a.largest) {
    try {
      const LargestResult r = FindLargest(PlanInputsFrom(a));
      o << (json ? LargestToJson(r) : LargestToText(r));
      return r.best >= 0 ? 0 : 1;
    } catch (const tandem::Error& x) {
      e << "tandem-plan: " << x.what() << "\n";
      return 2;
    }
  }
  PlanResult plan;
  try {
    CheckSvg(svg, a);
    plan = MakePlan(PlanInputsFrom(a));
  } catch (const tandem::Error& x) {
    e << "tandem-plan: " << x.what() << "\n";
    return 2;
  }
  if (!svg.empty()) {
    try {
      tools::WriteFileAtomically(svg, PlanToSvg(plan));
    } catch (const tandem::Error& x) {
      e << "tandem-plan: cannot write the chart: " << x.what() << "\n";
      return 3;
    }
  }
  o << (json ? PlanToJson(plan) : PlanToText(plan));
  if (!svg.empty() && !json) o << "chart written to " << svg << "\n";
  return plan.feasible ? 0 : 1;
  }();
  *out = o.str();
  *err = e.str();
  return rc;
}

}  // namespace tandem::planner
