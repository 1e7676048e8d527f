// tandem-plan: will this model's optimizer step fit on this GPU and host, at which offload
// fraction, and how fast will it be. docs/planner.md is the guide.
//
// Exit status: 0 the plan fits; 1 it does not (the verdict names the short budget);
// 2 bad arguments or inputs; 3 an output file could not be written.
#include <iostream>
#include <string>
#include <vector>

#include "tools/plan/cli.h"

int main(int argc, char** argv) {
  std::string out, err;
  const int rc = tandem::planner::RunPlanCli({argv + 1, argv + argc}, &out, &err);
  std::cout << out;
  std::cerr << err;
  return rc;
}
