// tandem-plan's options as data: what its command line (cli.cc) parses and what
// tandem.plan hands the binding as a dict (python/ext/planner.cc), the rules between them
// and the plan inputs they give. Both front ends fill one PlanOptions, check it here and
// plan from PlanInputsFrom, so a plan from Python is the command line's plan, and an
// error names the option as the command line does ("--seq"; tandem.plan renames it).
//
// Thread safety: everything here is pure.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "tandem/planner.h"

namespace tandem::planner {

// Every option's value, named after its long option; defaults are the command line's.
struct PlanOptions {
  // The model: one of params, config, model, params_json (config may come with
  // params_json, giving the tensor list its transformer shape), or largest.
  std::string params, config, model, params_json;
  bool include_mtp = false, largest = false;
  uint32_t pieces = 1;
  std::string gpu_mem, host_mem, headroom = "5%";
  std::string attention = "flash", activation_model = "auto";
  std::string activations;
  uint64_t batch = 1, seq = 0;
  std::string recompute = "none";
  std::string algo = "adamw", master = "bf16+ecc8", m = "q8", v = "q8";
  std::string param_dtype = "bf16", grad_dtype = "bf16";
  double momentum = 0.9;
  bool speculative_early_start = false;
  std::string grad_release = "auto";
  std::string speculative_host_bytes, speculative_stream_bytes, in_place_grad_bytes;
  double train_tflops = -1;  // given: > 0
  double fraction = -1;      // -1: choose one
  uint32_t gpus_per_node = 1, nodes = 1;
  bool fsdp2 = false, zero1 = false;
  uint32_t shard_size = 0, blocks_in_flight = 2;
  std::string profile, policy = "backward_order";
  uint64_t chunk_elements = 1 << 21;
  int slots = 4;
  std::string offload_compute = "auto", stream_chunk = "32MiB";
  int stream_slots = 3;
  // The long options given (without "--"): the rules below and the dtype defaults of a
  // tensor list read them.
  std::set<std::string> given;
};

// The presets --model takes.
std::vector<std::string> PlanPresetNames();

// One long option of tandem-plan: its name (without "--"), the PlanOptions field it sets,
// how the command line registers it and its help line. PlanOptionSpecs() is the one list
// of the options, in the command line's order: cli.cc builds its parser from it,
// SetPlanOption sets fields through it and the binding lists its names.
using PlanField = std::variant<std::string PlanOptions::*, bool PlanOptions::*,
                               uint32_t PlanOptions::*, uint64_t PlanOptions::*,
                               int PlanOptions::*, double PlanOptions::*>;
struct PlanOptionSpec {
  enum class Kind : uint8_t {
    kOption,       // takes a value
    kShowDefault,  // takes a value; --help shows its default
    kRequired,     // takes a value and must be given
    kModel,        // one of the model options (exactly one; --config may join --params-json)
    kFlag,         // a bool field: the option's presence
    kFlagOn,       // a text field that a bare --NAME sets to "on" (--grad-release)
  };
  const char* name;
  PlanField field;
  Kind kind;
  std::string help;
};
const std::vector<PlanOptionSpec>& PlanOptionSpecs();
// The option called `name` (without "--"), or nullptr.
const PlanOptionSpec* FindPlanOption(const std::string& name);
// True for the kFlag options (the bool fields).
bool IsPlanFlag(const std::string& name);

// Sets option `name` (a long option without "--") from `text` as the command line
// converts it, and marks it given; a flag takes "true" or "false". Throws
// Error(kInvalidArgument) with the command line's message for an unknown option or a
// value that does not convert ("Could not convert: --seq = long").
void SetPlanOption(PlanOptions* options, const std::string& name, const std::string& text);

// The rules between the options and on their values, as the command line states them
// (cli.cc builds its parser from the same tables): needs ("--shard-size requires
// --fsdp2"), excludes, ranges, choices, existing paths. For options set through
// SetPlanOption (the command line's parser checks the same as it parses). Throws
// Error(kInvalidArgument) whose message() is the command line's.
struct OptionNeeds {
  const char* option;
  const char* needs;
};
struct OptionRange {
  const char* option;
  uint32_t lo, hi;
};
struct OptionChoices {
  const char* option;
  std::vector<std::string> choices;  // --profile: or an existing file
};
const std::vector<OptionNeeds>& PlanOptionNeeds();
const std::vector<OptionNeeds>& PlanOptionExcludes();  // {option, excluded}
const std::vector<OptionRange>& PlanOptionRanges();
const std::vector<OptionChoices>& PlanOptionChoices();
void CheckPlanOptionRules(const PlanOptions& options);

// What follows the parse, for both front ends: --zero1, one model (or --largest), the
// numbers' ranges. Empty when the options can be planned, else what tandem-plan prints
// after "tandem-plan: ".
std::string PlanOptionsProblem(const PlanOptions& options);

// The planner's inputs: the model read (config, tensor list, preset, count), sizes and
// choices parsed, the profile loaded. Throws Error for what cannot be read or parsed.
PlanInputs PlanInputsFrom(const PlanOptions& options);

}  // namespace tandem::planner
