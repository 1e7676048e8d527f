#include "engine/layout/tensor_rules.h"

#include "tandem/error.h"

namespace tandem::layout {

void CheckFormats(Algorithm algo, std::span<const HyperParams> groups, const StateFormats& f,
                  const std::string& who, size_t first_group) {
  auto fail = [&](const std::string& m) {
    throw Error(ErrorKind::kInvalidArgument, who + ": " + m);
  };
  if (static_cast<unsigned>(f.master) > 3 || static_cast<unsigned>(f.momentum) > 1 ||
      static_cast<unsigned>(f.variance) > 1)
    fail("unknown state format value in " + Name(f));
  for (size_t g = 0; g < groups.size(); ++g)
    if (!HasMomentum(algo, groups[g]) && f.momentum != MomentFormat::kF32)
      fail("group " + std::to_string(first_group + g) + ": momentum format " + Name(f.momentum) +
           " given, but sgd with momentum 0 keeps no momentum buffer");
  if (!HasVariance(algo) && f.variance != MomentFormat::kF32)
    fail(std::string("variance format ") + Name(f.variance) + " given, but " + Name(algo) +
         " keeps no second moment");
}

std::vector<StateFormats> TensorFormats(const std::vector<TensorSpec>& specs,
                                        const OptimizerConfig& cfg) {
  std::vector<StateFormats> out;
  out.reserve(specs.size());
  for (const TensorSpec& s : specs) out.push_back(EffectiveFormats(s, cfg));
  return out;
}

uint64_t NormRun(const TensorSpec& s) {
  if (s.norm_unit != 0) return s.norm_unit;
  if (s.shape.size() >= 2) {
    uint64_t row = 1;
    for (size_t d = 1; d < s.shape.size(); ++d) row *= s.shape[d];
    if (row > 0) return row;
  }
  return s.numel;
}

}  // namespace tandem::layout
