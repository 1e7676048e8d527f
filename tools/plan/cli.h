// tandem-plan's command line (docs/planner.md) as a function, shared by the executable and
// the Python entry point tandem.plan (python/tandem/planner/_plan.py).
#pragma once

#include <string>
#include <vector>

namespace tandem::planner {

// Runs tandem-plan with `args` (without the program name). Returns its exit status: 0 the
// plan fits, 1 it does not, 2 bad arguments or inputs, 3 an output file could not be
// written; `out` gets what it prints (the plan, or --help), `err` its error messages.
// Never throws for bad input and never exits the process.
int RunPlanCli(const std::vector<std::string>& args, std::string* out, std::string* err);

}  // namespace tandem::planner
