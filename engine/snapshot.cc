#include "tandem/snapshot.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_set>

#include "engine/fp_bits.h"
#include "engine/grain.h"
#include "engine/master_codec.h"
#include "engine/q8_codec.h"
#include "engine/shape.h"
#include "engine/snapshot_check.h"
#include "engine/step_scalars.h"
#include "engine/update_math.h"
#include "tandem/error.h"

namespace tandem {
namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

// Elements per parallel chunk (Note [Grain] in engine/grain.h).
constexpr size_t kGrain = kGrainElements;

[[noreturn]] void Bad(const TensorSnapshot& t, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "tensor '" + t.name + "': " + what);
}

template <typename V>
void ExpectSize(const TensorSnapshot& t, const char* field, const V& v, size_t want) {
  if (v.size() != want)
    Bad(t, std::string(field) + " has " + std::to_string(v.size()) + " entries, expected " +
               std::to_string(want));
}

// The smallest i in [begin, end) with bad(i), or kNone. Blocks of 256 are first tested
// with a branch-free OR, which the compiler vectorises (bad() must be cheap and free of
// side effects); only a block that holds a bad element is searched one by one.
template <typename Pred>
size_t FirstBadIn(size_t begin, size_t end, const Pred& bad) {
  constexpr size_t kBlock = 256;
  for (size_t b = begin; b < end; b += kBlock) {
    const size_t e = std::min(end, b + kBlock);
    bool any = false;
    for (size_t i = b; i < e; ++i) any |= bad(i);
    if (any)
      for (size_t i = b; i < e; ++i)
        if (bad(i)) return i;
  }
  return kNone;
}

// The smallest i in [0, n) with bad(i), or kNone. The minimum is the same whatever the
// split, so the answer does not depend on the thread count.
template <typename Pred>
size_t FirstBad(size_t n, const Pred& bad) {
  auto scan = [&](const tbb::blocked_range<size_t>& r, size_t found) {
    if (found < r.begin()) return found;  // an earlier chunk of this body already failed
    return std::min(found, FirstBadIn(r.begin(), r.end(), bad));
  };
  if (n <= kGrain) return scan(tbb::blocked_range<size_t>(0, n), kNone);
  return tbb::parallel_reduce(tbb::blocked_range<size_t>(0, n, kGrain), kNone, scan,
                              [](size_t a, size_t b) { return std::min(a, b); });
}

// Bit tests (integer operations vectorise where float classification may not).
bool Bf16NonFinite(uint16_t b) { return (b & 0x7F80u) == 0x7F80u; }
bool F32NonFinite(uint32_t u) { return (u & 0x7F800000u) == 0x7F800000u; }
const char* Bf16Kind(uint16_t b) { return (b & 0x007Fu) != 0 ? "NaN" : "infinite"; }
const char* F32Kind(float x) {
  return std::isnan(x) ? "NaN" : std::isinf(x) ? "infinite" : x < 0.0f ? "negative" : "valid";
}

std::string At(const char* array, size_t i) {
  return std::string(array) + "[" + std::to_string(i) + "]";
}

void CheckFinite(const TensorSnapshot& t, const char* array, const std::vector<float>& v) {
  const size_t i = FirstBad(v.size(), [&](size_t k) { return F32NonFinite(num::BitsOf(v[k])); });
  if (i != kNone) Bad(t, At(array, i) + " is " + F32Kind(v[i]));
}

void CheckMasterBf16(const TensorSnapshot& t, const StateFormats& f) {
  const std::vector<uint16_t>& b = t.master_bf16;
  size_t i = FirstBad(b.size(), [&](size_t k) { return Bf16NonFinite(b[k]); });
  if (i != kNone) Bad(t, At("master_bf16", i) + " is " + Bf16Kind(b[i]));
  // A correction that moves +-0 across the sign boundary decodes to a NaN bit pattern
  // (the encoders never write one; Note [Correction in ulps of x]).
  if (f.master == MasterFormat::kBF16Ecc8) {
    i = FirstBad(b.size(), [&](size_t k) {
      return F32NonFinite(num::BitsOf(num::DecodeEcc8(b[k], t.ecc8[k])));
    });
    if (i != kNone) Bad(t, At("master_bf16", i) + " with " + At("ecc8", i) + " decodes to NaN");
  } else if (f.master == MasterFormat::kBF16Ecc16) {
    i = FirstBad(b.size(), [&](size_t k) {
      return F32NonFinite(num::BitsOf(num::DecodeEcc16(b[k], t.ecc16[k])));
    });
    if (i != kNone) Bad(t, At("master_bf16", i) + " with " + At("ecc16", i) + " decodes to NaN");
  }
}

void CheckVariance(const TensorSnapshot& t) {
  const std::vector<float>& v = t.v_f32;
  // The finite values >= 0 are the bit patterns [0, 0x7F7FFFFF] and -0 (0x80000000).
  const size_t i = FirstBad(v.size(), [&](size_t k) {
    const uint32_t u = num::BitsOf(v[k]);
    return u >= 0x7F800000u && u != 0x80000000u;
  });
  if (i != kNone) Bad(t, At("v_f32", i) + " is " + F32Kind(v[i]));
}

// q8 scales are bf16 bit patterns of finite values >= 0 (the encoder's floor is FLT_MIN):
// [0, 0x7F7F]; a set sign bit (-0 included) is refused as negative.
void CheckScales(const TensorSnapshot& t, const char* array, const std::vector<uint16_t>& s) {
  const size_t i = FirstBad(s.size(), [&](size_t k) { return s[k] >= 0x7F80u; });
  if (i != kNone)
    Bad(t, At(array, i) + " is " + (Bf16NonFinite(s[i]) ? Bf16Kind(s[i]) : "negative"));
}

}  // namespace

std::string SgdMomentumMismatch(uint32_t group, double momentum, bool held) {
  char text[200];
  std::snprintf(text, sizeof text,
                "group %u has SGD momentum %g, which keeps %s momentum buffer, but the tensor "
                "has %s (its groups and its momentum arrays disagree)",
                group, momentum, held ? "no" : "a", held ? "one" : "none");
  return text;
}

void ValidateSnapshotLayout(const OptimizerSnapshot& s) {
  if (s.groups.empty())
    throw Error(ErrorKind::kInvalidArgument, "snapshot has no parameter groups");
  for (size_t g = 0; g < s.groups.size(); ++g)
    ValidateHyperParams(s.algo, s.groups[g], "group " + std::to_string(g));
  if (s.step < 0 || s.step > kMaxSnapshotStep)
    throw Error(ErrorKind::kInvalidArgument,
                "snapshot step " + std::to_string(s.step) + " is outside [0, 2^53]");
  std::unordered_set<std::string> names;
  for (const TensorSnapshot& t : s.tensors) {
    if (!names.insert(t.name).second) Bad(t, "duplicate name");
    if (t.group >= s.groups.size())
      Bad(t, "group " + std::to_string(t.group) + " of " + std::to_string(s.groups.size()));
    if (t.step < 0 || t.step > s.step)
      Bad(t, "step " + std::to_string(t.step) + " is outside [0, " + std::to_string(s.step) +
                 "] (the snapshot's step)");
    if (!t.shape.empty()) {
      const std::optional<uint64_t> product = ShapeElements(t.shape);
      if (!product || *product != t.numel) {
        std::string dims;
        for (uint64_t d : t.shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
        Bad(t, "shape [" + dims + "] has " +
                   (product ? std::to_string(*product) : std::string("more than 2^64")) +
                   " elements, numel is " + std::to_string(t.numel));
      }
    }
  }
}

void ValidateTensorState(const OptimizerSnapshot& s, const TensorSnapshot& t) {
  const StateFormats& f = t.formats;  // the tensor's own formats, not the default
  if (static_cast<unsigned>(f.master) > 3 || static_cast<unsigned>(f.momentum) > 1 ||
      static_cast<unsigned>(f.variance) > 1)
    Bad(t, "unknown state format value in " + Name(f));
  const HyperParams& h = s.groups[t.group];
  const size_t n = t.numel, groups = (n + kQuantGroup - 1) / kQuantGroup;
  const bool bf = f.master != MasterFormat::kF32;
  ExpectSize(t, "master_f32", t.master_f32, bf ? 0 : n);
  ExpectSize(t, "master_bf16", t.master_bf16, bf ? n : 0);
  ExpectSize(t, "ecc8", t.ecc8, f.master == MasterFormat::kBF16Ecc8 ? n : 0);
  ExpectSize(t, "ecc16", t.ecc16, f.master == MasterFormat::kBF16Ecc16 ? n : 0);
  const bool hm = HasMomentum(s.algo, h), hv = HasVariance(s.algo);
  const bool mq = f.momentum == MomentFormat::kQ8, vq = f.variance == MomentFormat::kQ8;
  // SGD keeps a momentum buffer where its group's momentum is not 0: a state whose groups
  // and arrays disagree (a file's metadata and its sections) is named as such.
  const size_t held = t.m_f32.size() + t.m_codes.size() + t.m_scales.size();
  if (s.algo == Algorithm::kSGD && n > 0 && hm != (held > 0))
    Bad(t, SgdMomentumMismatch(t.group, h.momentum, held > 0));
  ExpectSize(t, "m_f32", t.m_f32, hm && !mq ? n : 0);
  ExpectSize(t, "m_codes", t.m_codes, hm && mq ? n : 0);
  ExpectSize(t, "m_scales", t.m_scales, hm && mq ? groups : 0);
  ExpectSize(t, "v_f32", t.v_f32, hv && !vq ? n : 0);
  ExpectSize(t, "v_codes", t.v_codes, hv && vq ? n : 0);
  ExpectSize(t, "v_scales", t.v_scales, hv && vq ? groups : 0);
  // Values, in the order of the arrays above.
  CheckFinite(t, "master_f32", t.master_f32);
  CheckMasterBf16(t, f);
  CheckFinite(t, "m_f32", t.m_f32);
  CheckScales(t, "m_scales", t.m_scales);
  CheckVariance(t);
  CheckScales(t, "v_scales", t.v_scales);
}

void ValidateSnapshot(const OptimizerSnapshot& s) {
  ValidateSnapshotLayout(s);
  for (const TensorSnapshot& t : s.tensors) ValidateTensorState(s, t);
}

void ValidateRestorableLayout(const OptimizerSnapshot& s) {
  if (s.step > kMaxRestoreStep)
    throw Error(ErrorKind::kInvalidArgument,
                "snapshot step " + std::to_string(s.step) +
                    " is above 2^52, the largest a run may resume at (2^53 is the largest "
                    "a checkpoint can hold)");
}

namespace {

// Adam, AdamW: the next step divides the first moment by sqrt(v / bc2) + eps (AdamElement,
// engine/update_math.h). Run as that step with a zero gradient and a zero learning rate,
// an element whose quotient overflows gives 0 * inf, a NaN: such a moment makes the weight
// infinite at the first finite step, whatever the gradient and the learning rate (a q8
// scale at the largest finite bf16 with code 127 over a small variance). Moments a run
// reaches stay within about 1 / sqrt(1 - beta2) of sqrt(v), far from that.
void CheckAdamQuotient(const OptimizerSnapshot& s, const TensorSnapshot& t) {
  // A step outside [0, 2^53] is ValidateSnapshot's to refuse, with its own message (a load
  // may check a tensor before the whole snapshot): its next step is not computed here.
  if (t.step < 0 || t.step > kMaxSnapshotStep) return;
  const bool mq = t.formats.momentum == MomentFormat::kQ8;
  const bool vq = t.formats.variance == MomentFormat::kQ8;
  const StepScalars sc = GroupStepScalars(s.algo, s.groups[t.group], 0.0, t.step + 1, 1.0);
  auto moment = [&](size_t k) {
    return mq ? num::DecodeMomentum(t.m_codes[k], num::Bf16ToF32(t.m_scales[k / kQuantGroup]))
              : t.m_f32[k];
  };
  auto variance = [&](size_t k) {
    if (!vq) return t.v_f32[k];
    const float u = num::DecodeSqrtVariance(t.v_codes[k], num::Bf16ToF32(t.v_scales[k / kQuantGroup]));
    return u * u;
  };
  auto overflows = [&](size_t k) {
    float w = 0.0f, m = moment(k), v = variance(k), root = 0.0f;
    num::AdamElement(sc, 0.0f, w, m, v, &root);
    return F32NonFinite(num::BitsOf(w));
  };
  const size_t i = FirstBad(t.numel, overflows);
  if (i == kNone) return;
  char held[96], text[160];
  if (mq)
    std::snprintf(held, sizeof held, "%s = %.9g with %s = %d", At("m_scales", i / kQuantGroup).c_str(),
                  num::Bf16ToF32(t.m_scales[i / kQuantGroup]), At("m_codes", i).c_str(),
                  int{t.m_codes[i]});
  else
    std::snprintf(held, sizeof held, "%s", At("m_f32", i).c_str());
  std::snprintf(text, sizeof text,
                " decodes to m = %.9g, which the next step divides by sqrt(v) + eps with "
                "v = %.9g and eps = %.9g: the quotient is infinite",
                moment(i), variance(i), static_cast<double>(sc.eps));
  Bad(t, std::string(held) + text + ": the state cannot survive one step");
}

// A q8 variance decodes to u = (code / 255) * scale and the step squares it.
void CheckVarianceSquare(const OptimizerSnapshot& s, const TensorSnapshot& t) {
  if (!HasVariance(s.algo) || t.formats.variance != MomentFormat::kQ8) return;
  const std::vector<uint8_t>& codes = t.v_codes;
  const std::vector<uint16_t>& scales = t.v_scales;
  const size_t i = FirstBad(codes.size(), [&](size_t k) {
    const float u = num::DecodeSqrtVariance(codes[k], num::Bf16ToF32(scales[k / kQuantGroup]));
    return F32NonFinite(num::BitsOf(u * u));
  });
  if (i == kNone) return;
  const size_t g = i / kQuantGroup;
  const float u = num::DecodeSqrtVariance(codes[i], num::Bf16ToF32(scales[g]));
  char text[160];
  std::snprintf(text, sizeof text,
                " = %.9g with %s = %u decodes to sqrt(v) = %.9g, whose square (the "
                "variance the step uses) is infinite",
                num::Bf16ToF32(scales[g]), At("v_codes", i).c_str(), unsigned{codes[i]}, u);
  Bad(t, At("v_scales", g) + text + ": the state cannot survive one step");
}

}  // namespace

void ValidateRestorableTensor(const OptimizerSnapshot& s, const TensorSnapshot& t) {
  CheckVarianceSquare(s, t);
  if (s.algo == Algorithm::kAdam || s.algo == Algorithm::kAdamW) CheckAdamQuotient(s, t);
}

void ValidateRestorable(const OptimizerSnapshot& s) {
  ValidateSnapshot(s);
  ValidateRestorableLayout(s);
  for (const TensorSnapshot& t : s.tensors) ValidateRestorableTensor(s, t);
}

}  // namespace tandem
