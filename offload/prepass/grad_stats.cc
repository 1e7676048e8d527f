#include "offload/prepass/grad_stats.h"

#include "engine/exact_sum.h"
#include "tandem/error.h"

namespace tandem::offload {

GradStats ToGradStats(const NormResult& r) {
  GradStats s;
  for (int k = 0; k < exact::kDigits; ++k) s.exact[k] = static_cast<uint32_t>(r.exact.limb[k]);
  s.sum_squares = r.sum_squares;
  s.nonfinite = r.nonfinite ? 1 : 0;
  return s;
}

NormResult FromGradStats(const GradStats& s) {
  NormResult r;
  for (int k = 0; k < exact::kDigits; ++k) r.exact.limb[k] = s.exact[k];
  r.sum_squares = exact::ToDouble(r.exact);
  r.nonfinite = s.nonfinite != 0;
  return r;
}

void AddNorm(NormResult& whole, const NormResult& part) {
  exact::Merge(whole.exact, part.exact);
  if (!exact::Normalize(whole.exact))
    throw Error(ErrorKind::kInternal, "gradient pre-pass: the exact sum overflowed");
  whole.sum_squares = exact::ToDouble(whole.exact);
  whole.nonfinite = whole.nonfinite || part.nonfinite;
}

}  // namespace tandem::offload

namespace tandem {

void AddGradStats(GradStats& whole, const GradStats& part) {
  exact::Acc acc{};
  for (int k = 0; k < exact::kDigits; ++k)
    acc.limb[k] = uint64_t{whole.exact[k]} + uint64_t{part.exact[k]};
  if (!exact::Normalize(acc))
    throw Error(ErrorKind::kInvalidArgument, "AddGradStats: the sum overflows 512 bits");
  for (int k = 0; k < exact::kDigits; ++k) whole.exact[k] = static_cast<uint32_t>(acc.limb[k]);
  whole.sum_squares = exact::ToDouble(acc);
  whole.nonfinite += part.nonfinite;
}

}  // namespace tandem
