#include "tandem/snapshot.h"

#include <string>
#include <unordered_set>

#include "tandem/error.h"

namespace tandem {
namespace {

template <typename V>
void ExpectSize(const TensorSnapshot& t, const char* field, const V& v, size_t want) {
  if (v.size() != want)
    throw Error(ErrorKind::kInvalidArgument,
                "tensor '" + t.name + "': " + field + " has " + std::to_string(v.size()) +
                    " entries, expected " + std::to_string(want));
}

}  // namespace

void ValidateSnapshot(const OptimizerSnapshot& s) {
  if (s.groups.empty())
    throw Error(ErrorKind::kInvalidArgument, "snapshot has no parameter groups");
  for (size_t g = 0; g < s.groups.size(); ++g)
    ValidateHyperParams(s.algo, s.groups[g], "group " + std::to_string(g));
  if (s.step < 0)
    throw Error(ErrorKind::kInvalidArgument, "snapshot step " + std::to_string(s.step) + " < 0");
  const StateFormats& f = s.formats;
  std::unordered_set<std::string> names;
  for (const TensorSnapshot& t : s.tensors) {
    if (!names.insert(t.name).second)
      throw Error(ErrorKind::kInvalidArgument, "tensor '" + t.name + "': duplicate name");
    if (t.group >= s.groups.size())
      throw Error(ErrorKind::kInvalidArgument, "tensor '" + t.name + "': group " +
                                                   std::to_string(t.group) + " of " +
                                                   std::to_string(s.groups.size()));
    const HyperParams& h = s.groups[t.group];
    const size_t n = t.numel, groups = (n + kQuantGroup - 1) / kQuantGroup;
    const bool bf = f.master != MasterFormat::kF32;
    ExpectSize(t, "master_f32", t.master_f32, bf ? 0 : n);
    ExpectSize(t, "master_bf16", t.master_bf16, bf ? n : 0);
    ExpectSize(t, "ecc8", t.ecc8, f.master == MasterFormat::kBF16Ecc8 ? n : 0);
    ExpectSize(t, "ecc16", t.ecc16, f.master == MasterFormat::kBF16Ecc16 ? n : 0);
    const bool hm = HasMomentum(s.algo, h), hv = HasVariance(s.algo);
    const bool mq = f.momentum == MomentFormat::kQ8, vq = f.variance == MomentFormat::kQ8;
    ExpectSize(t, "m_f32", t.m_f32, hm && !mq ? n : 0);
    ExpectSize(t, "m_codes", t.m_codes, hm && mq ? n : 0);
    ExpectSize(t, "m_scales", t.m_scales, hm && mq ? groups : 0);
    ExpectSize(t, "v_f32", t.v_f32, hv && !vq ? n : 0);
    ExpectSize(t, "v_codes", t.v_codes, hv && vq ? n : 0);
    ExpectSize(t, "v_scales", t.v_scales, hv && vq ? groups : 0);
  }
}

}  // namespace tandem
