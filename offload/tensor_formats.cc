#include "offload/tensor_formats.h"

#include "tandem/error.h"

namespace tandem::offload {

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

}  // namespace tandem::offload
