// tandem._C's planner: tandem-plan's options as a dict in, the plan as a dict out
// (python/tandem/planner/_plan.py is its Python face, tandem.plan), and the calibration
// profile's machine rates.
#pragma once

#include <pybind11/pybind11.h>

namespace tandem::python {

// Adds to `m`:
//   plan_options()       {"names", "flags", "presets"}: the options make_plan takes
//                        (tandem-plan's long options with underscores), which of them are
//                        flags, and the presets its "model" names.
//   make_plan(options)   the plan for a dict of options (names as plan_options; a flag's
//                        value a bool, any other's str() is its command-line text; None
//                        leaves an option out): {"status": 0 fits | 1 does not,
//                        "text": the report, "data": the JSON plan as a dict}, or
//                        {"status": 2, "error": tandem-plan's message for the input}.
//   find_largest(options) tandem-plan --largest likewise ("status" 0: a model fits).
//   plan_cli(args)       tandem-plan's command line: (status, stdout, stderr).
//   machine_rates_for(...) the compute-split model's rates from a profile.
// The planner runs without the GIL.
void BindPlanner(pybind11::module_& m);

}  // namespace tandem::python
