// tandem._C's planner (python/ext/planner.h).
#include "python/ext/planner.h"

#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "python/ext/config.h"
#include "tandem/error.h"
#include "tandem/planner.h"
#include "tools/plan/cli.h"
#include "tools/plan/options.h"

namespace tandem::python {
namespace {

namespace py = pybind11;
using planner::PlanOptions;

std::string OptionName(const std::string& key) {
  std::string name = key;
  for (char& c : name)
    if (c == '_') c = '-';
  return name;
}

// The dict's options set as tandem-plan's parser would set them; throws Error with its
// message (as tandem-plan prints it before "Run with --help").
PlanOptions OptionsFrom(const py::dict& options) {
  PlanOptions o;
  for (const auto& [key, value] : options) {
    if (value.is_none()) continue;
    const std::string name = OptionName(py::str(key));
    std::string text;
    if (planner::IsPlanFlag(name) && py::isinstance<py::bool_>(value))
      text = value.cast<bool>() ? "true" : "false";
    else
      text = py::str(value);
    planner::SetPlanOption(&o, name, text);
  }
  planner::CheckPlanOptionRules(o);
  return o;
}

// What tandem-plan prints for an error after its parse: "tandem-plan: <what>".
py::dict Failed(const std::string& message) {
  py::dict d;
  d["status"] = 2;
  d["error"] = message;
  return d;
}

py::dict Answer(int status, const std::string& text, const std::string& json) {
  py::dict d;
  d["status"] = status;
  d["text"] = text;
  d["data"] = py::module_::import("json").attr("loads")(json);
  return d;
}

// The options checked as tandem-plan checks them, then `run` on the planner's inputs
// (without the GIL): the answer, or status 2 with tandem-plan's message.
template <typename Run>
py::dict Planned(const py::dict& options, Run run) {
  PlanOptions o;
  try {
    o = OptionsFrom(options);
  } catch (const Error& x) {
    return Failed(x.message());
  }
  const std::string problem = planner::PlanOptionsProblem(o);
  if (!problem.empty()) return Failed("tandem-plan: " + problem);
  int status = 0;
  std::string text, json, error;
  {
    py::gil_scoped_release release;
    try {
      status = run(planner::PlanInputsFrom(o), &text, &json);
    } catch (const Error& x) {
      error = std::string("tandem-plan: ") + x.what();
    }
  }
  if (!error.empty()) return Failed(error);
  return Answer(status, text, json);
}

}  // namespace

void BindPlanner(py::module_& m) {
  m.def(
      "plan_options",
      []() {
        std::vector<std::string> names, flags;
        for (const planner::PlanOptionSpec& s : planner::PlanOptionSpecs()) {
          const std::string n = s.name;
          std::string key = n;
          for (char& c : key)
            if (c == '-') c = '_';
          names.push_back(key);
          if (planner::IsPlanFlag(n)) flags.push_back(key);
        }
        py::dict d;
        d["names"] = names;
        d["flags"] = flags;
        d["presets"] = planner::PlanPresetNames();
        return d;
      },
      "The options make_plan takes: {names, flags, presets} (python/ext/planner.h).");
  m.def(
      "make_plan",
      [](const py::dict& options) {
        return Planned(options, [](const planner::PlanInputs& in, std::string* text,
                                   std::string* json) {
          const planner::PlanResult plan = planner::MakePlan(in);
          *text = planner::PlanToText(plan);
          *json = planner::PlanToJson(plan);
          return plan.feasible ? 0 : 1;
        });
      },
      py::arg("options"),
      "tandem-plan's plan for a dict of its options: {status, text, data} or {status: 2, "
      "error} (python/ext/planner.h). Python's entry point is tandem.plan.");
  m.def(
      "find_largest",
      [](const py::dict& options) {
        py::dict with = options;
        with["largest"] = true;
        return Planned(with, [](const planner::PlanInputs& in, std::string* text,
                                std::string* json) {
          const planner::LargestResult r = planner::FindLargest(in);
          *text = planner::LargestToText(r);
          *json = planner::LargestToJson(r);
          return r.best >= 0 ? 0 : 1;
        });
      },
      py::arg("options"),
      "tandem-plan --largest for a dict of its options, answered as make_plan's. Python's "
      "entry point is tandem.largest.");
  m.def(
      "plan_cli",
      [](const std::vector<std::string>& args) {
        std::string out, err;
        int rc = 0;
        {
          py::gil_scoped_release release;
          rc = planner::RunPlanCli(args, &out, &err);
        }
        return py::make_tuple(rc, out, err);
      },
      py::arg("args"),
      "Runs tandem-plan with `args` (no program name); returns (exit status, stdout, stderr).");
  // The planner's calibration profile as the compute-split model's rates
  // (tandem::planner::MachineRatesFor); Python's entry point is tandem.machine_rates.
  m.def(
      "machine_rates_for",
      [](const std::string& profile, const std::string& algorithm, const std::string& master,
         const std::string& momentum, const std::string& variance, const std::string& grad_dtype,
         const std::string& param_dtype, uint32_t ranks) {
        const planner::Profile p =
            profile.empty() ? planner::DefaultProfile() : planner::ReadProfile(profile);
        const StateFormats f{ParseMasterFormat(master), ParseMomentFormat(momentum),
                             ParseMomentFormat(variance)};
        return RatesTo(planner::MachineRatesFor(p, ParseAlgorithm(algorithm), f,
                                                ParseDType(grad_dtype), ParseDType(param_dtype),
                                                ranks));
      },
      py::arg("profile"), py::arg("algorithm"), py::arg("master"), py::arg("momentum"),
      py::arg("variance"), py::arg("grad_dtype"), py::arg("param_dtype"), py::arg("ranks") = 1,
      "MachineRatesFor on a tandem-profile/1 file ('' : the built-in H200 reference) for one "
      "of `ranks` ranks of a node stepping at once: a dict {h2d_gbps, d2h_gbps, host_gparams, "
      "gpu_gparams} (tandem::MachineRates).");
}

}  // namespace tandem::python
