// The planner's bounds on what it reads (Note [Bounded inputs]).
//
// Note [Bounded inputs]
// Every count and size the planner reads from a config.json, a tensor list or the
// command line is bounded before it allocates by it, so that no input (a damaged file,
// /dev/zero, a typo such as --params 1e15) can exhaust memory or run for minutes: the
// planner refuses it with Error(kInvalidArgument) naming the field and the limit
// (tandem-plan: exit status 2), in well under a second. The limits are far above any
// model trained today and low enough that a plan at the limit takes a minute at most on
// two cores (the plan's time grows with the tensors and the parameters):
//   files           16 MiB (config.json, profile), 64 MiB (tensor list): read_file.h;
//   config counts   2^14 for a count of layers or experts (a field whose name holds
//                   "layer" or "expert"), 2^24 for any other (sizes, vocabulary,
//                   heads, positions): CountLimit below, checked by ConfigReader;
//   a model         2^17 tensors and 2^42 parameters (4.4 trillion), each tensor's
//                   shape within 64 bits: Builder (config readers), the tensor list
//                   and --params alike (CheckModelRoom);
//   the command     --batch 2^16, --seq 2^24 tokens (tools/plan/cli.cc).
#include <string>

#include "planner/model_config.h"
#include "tandem/error.h"

namespace tandem::planner {

uint64_t CountLimit(std::string_view key) {
  const bool multiplies = key.find("layer") != std::string_view::npos ||
                          key.find("expert") != std::string_view::npos;
  return multiplies ? kMaxConfigLayerCount : kMaxConfigCount;
}

uint64_t CheckModelRoom(std::string_view where, const std::string& name,
                        const std::vector<uint64_t>& shape, size_t tensors, uint64_t params) {
  auto fail = [&](const std::string& what) {
    throw Error(ErrorKind::kInvalidArgument, std::string(where) + ": " + what);
  };
  uint64_t numel = 1;
  for (uint64_t d : shape) {
    if (d != 0 && numel > UINT64_MAX / d)
      fail("tensor '" + name + "': its shape's element count overflows 64 bits");
    numel *= d;
  }
  if (tensors >= kMaxModelTensors)
    fail("more than " + std::to_string(kMaxModelTensors) +
         " tensors, the planner's limit (docs/planner.md, \"Limits\")");
  if (numel > kMaxModelParams - params)
    fail("more than " + std::to_string(kMaxModelParams) +
         " parameters (2^42), the planner's limit (docs/planner.md, \"Limits\"), at tensor '" +
         name + "'");
  return numel;
}

}  // namespace tandem::planner
