// ConvertSnapshot: re-encodes a snapshot's state in other formats, through fp32, with the
// same encoders and decoders the step kernels use (engine/master_codec.h,
// engine/q8_codec.h), group by group as the reference step does.
#include <algorithm>
#include <string>
#include <vector>

#include "checkpoint/tensor_description.h"
#include "engine/fp_bits.h"
#include "engine/fp_mode.h"
#include "engine/master_codec.h"
#include "engine/q8_codec.h"
#include "engine/update_math.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"

namespace tandem {
namespace {

[[noreturn]] void Invalid(const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "ConvertSnapshot: " + what);
}

void CheckTarget(Algorithm algo, const StateFormats& to) {
  if (static_cast<unsigned>(to.master) > static_cast<unsigned>(MasterFormat::kBF16Ecc16))
    Invalid("unknown master format value " + std::to_string(static_cast<unsigned>(to.master)));
  if (static_cast<unsigned>(to.momentum) > static_cast<unsigned>(MomentFormat::kQ8))
    Invalid("unknown momentum format value " + std::to_string(static_cast<unsigned>(to.momentum)));
  if (static_cast<unsigned>(to.variance) > static_cast<unsigned>(MomentFormat::kQ8))
    Invalid("unknown variance format value " + std::to_string(static_cast<unsigned>(to.variance)));
  // As the optimizer's own configuration check: only Adam keeps a variance.
  if (!HasVariance(algo) && to.variance != MomentFormat::kF32)
    Invalid(std::string("variance format ") + Name(to.variance) + " given, but " + Name(algo) +
            " keeps no variance");
}

// Group g of a tensor of n elements: [32g, 32g + len).
int GroupLen(size_t n, size_t g0) {
  return static_cast<int>(std::min<size_t>(kQuantGroup, n - g0));
}

void EncodeMasterFrom(const std::vector<float>& w, MasterFormat to, TensorSnapshot* t) {
  const size_t n = w.size();
  switch (to) {
    case MasterFormat::kF32:
      t->master_f32 = w;
      return;
    case MasterFormat::kBF16:
      t->master_bf16.resize(n);
      for (size_t i = 0; i < n; ++i) t->master_bf16[i] = num::F32ToBf16(w[i]);
      return;
    case MasterFormat::kBF16Ecc8:
      t->master_bf16.resize(n);
      t->ecc8.resize(n);
      for (size_t i = 0; i < n; ++i) num::EncodeEcc8(w[i], &t->master_bf16[i], &t->ecc8[i]);
      return;
    case MasterFormat::kBF16Ecc16:
      t->master_bf16.resize(n);
      t->ecc16.resize(n);
      for (size_t i = 0; i < n; ++i) num::EncodeEcc16(w[i], &t->master_bf16[i], &t->ecc16[i]);
      return;
  }
}

// n values from q8 codes (stored as bytes) and one bf16 scale per group, group by group
// with `decode`, one of engine/q8_codec.h's Decode*Group.
template <class Code>
std::vector<float> DecodeQ8(const std::vector<uint8_t>& codes, const std::vector<uint16_t>& scales,
                            size_t n, void (*decode)(const Code*, uint16_t, int, float*)) {
  std::vector<float> x(n);
  for (size_t g0 = 0, g = 0; g0 < n; g0 += kQuantGroup, ++g)
    decode(reinterpret_cast<const Code*>(codes.data() + g0), scales[g], GroupLen(n, g0),
           x.data() + g0);
  return x;
}

// The inverse of DecodeQ8, with one of engine/q8_codec.h's Encode*Group.
template <class Code>
void EncodeQ8(const std::vector<float>& x, void (*encode)(const float*, int, Code*, uint16_t*),
              std::vector<uint8_t>* codes, std::vector<uint16_t>* scales) {
  const size_t n = x.size();
  codes->resize(n);
  scales->resize((n + kQuantGroup - 1) / kQuantGroup);
  for (size_t g0 = 0, g = 0; g0 < n; g0 += kQuantGroup, ++g)
    encode(x.data() + g0, GroupLen(n, g0), reinterpret_cast<Code*>(codes->data() + g0),
           &(*scales)[g]);
}

std::vector<float> DecodeMomentum(const TensorSnapshot& t, MomentFormat f) {
  if (f == MomentFormat::kF32) return t.m_f32;
  return DecodeQ8(t.m_codes, t.m_scales, t.numel, num::DecodeMomentumGroup);
}

void EncodeMomentum(const std::vector<float>& m, MomentFormat to, TensorSnapshot* t) {
  if (to == MomentFormat::kF32) {
    t->m_f32 = m;
    return;
  }
  EncodeQ8(m, num::EncodeMomentumGroup, &t->m_codes, &t->m_scales);
}

// v in fp32: f32 as is; q8 stores u = sqrt(v), decoded and squared as the step does.
std::vector<float> DecodeVariance(const TensorSnapshot& t, MomentFormat f) {
  if (f == MomentFormat::kF32) return t.v_f32;
  std::vector<float> v = DecodeQ8(t.v_codes, t.v_scales, t.numel, num::DecodeSqrtVarianceGroup);
  for (float& x : v) x = x * x;
  return v;
}

void EncodeVariance(const std::vector<float>& v, MomentFormat to, TensorSnapshot* t) {
  if (to == MomentFormat::kF32) {
    t->v_f32 = v;
    return;
  }
  std::vector<float> u(v.size());
  for (size_t i = 0; i < v.size(); ++i) u[i] = num::Sqrt(v[i]);  // the root AdamElement returns
  EncodeQ8(u, num::EncodeSqrtVarianceGroup, &t->v_codes, &t->v_scales);
}

}  // namespace

OptimizerSnapshot ConvertSnapshot(const OptimizerSnapshot& s, const StateFormats& to,
                                  ConvertTensors which) {
  // A tensor that overrides the default formats keeps its own (kDefaultFormats).
  std::vector<StateFormats> targets;
  targets.reserve(s.tensors.size());
  for (const TensorSnapshot& t : s.tensors)
    targets.push_back(which == ConvertTensors::kAll || t.formats == s.formats ? to : t.formats);
  return ConvertSnapshotPerTensor(s, to, targets);
}

OptimizerSnapshot ConvertSnapshotPerTensor(const OptimizerSnapshot& s, const StateFormats& to,
                                           const std::vector<StateFormats>& targets) {
  if (targets.size() != s.tensors.size())
    Invalid(std::to_string(targets.size()) + " target formats for " +
            std::to_string(s.tensors.size()) + " tensors");
  CheckTarget(s.algo, to);
  for (const StateFormats& f : targets) CheckTarget(s.algo, f);
  ValidateSnapshot(s);
  FpModeGuard fp_mode;  // round to nearest, no flush to zero: the kernels' mode
  OptimizerSnapshot out;
  out.algo = s.algo;
  out.formats = to;
  out.groups = s.groups;
  out.step = s.step;
  out.metadata = s.metadata;
  out.tensors.reserve(s.tensors.size());
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    const TensorSnapshot& t = s.tensors[i];
    const StateFormats& from = t.formats;
    const StateFormats& want = targets[i];
    TensorSnapshot c = ckpt::TensorDescription(t);
    c.formats = want;
    // A format that does not change is copied, so that the identity is exact.
    if (want.master == from.master) {
      c.master_f32 = t.master_f32;
      c.master_bf16 = t.master_bf16;
      c.ecc8 = t.ecc8;
      c.ecc16 = t.ecc16;
    } else {
      EncodeMasterFrom(DecodeMasterF32(t, from), want.master, &c);
    }
    if (HasMomentum(s.algo, s.groups[t.group])) {
      if (want.momentum == from.momentum) {
        c.m_f32 = t.m_f32;
        c.m_codes = t.m_codes;
        c.m_scales = t.m_scales;
      } else {
        EncodeMomentum(DecodeMomentum(t, from.momentum), want.momentum, &c);
      }
    }
    if (HasVariance(s.algo)) {
      if (want.variance == from.variance) {
        c.v_f32 = t.v_f32;
        c.v_codes = t.v_codes;
        c.v_scales = t.v_scales;
      } else {
        EncodeVariance(DecodeVariance(t, from.variance), want.variance, &c);
      }
    }
    out.tensors.push_back(std::move(c));
  }
  // A finite fp32 value can still leave the range of the new format (a master above the
  // largest bf16 rounds to infinity; so does the scale of such a moment).
  try {
    ValidateSnapshot(out);
  } catch (const Error& e) {
    Invalid("the state does not fit " + Name(to) + ": " + e.message());
  }
  return out;
}

}  // namespace tandem
