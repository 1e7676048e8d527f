#include <cmath>
#include <string>

#include "tandem/error.h"
#include "tandem/types.h"

namespace tandem {

const char* Name(DType v) noexcept {
  switch (v) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
  }
  return "?";
}
const char* Name(Algorithm v) noexcept {
  switch (v) {
    case Algorithm::kAdamW: return "adamw";
    case Algorithm::kAdam: return "adam";
    case Algorithm::kLion: return "lion";
    case Algorithm::kSGD: return "sgd";
  }
  return "?";
}
const char* Name(MasterFormat v) noexcept {
  switch (v) {
    case MasterFormat::kF32: return "f32";
    case MasterFormat::kBF16: return "bf16";
    case MasterFormat::kBF16Ecc8: return "bf16+ecc8";
    case MasterFormat::kBF16Ecc16: return "bf16+ecc16";
  }
  return "?";
}
const char* Name(MomentFormat v) noexcept {
  switch (v) {
    case MomentFormat::kF32: return "f32";
    case MomentFormat::kQ8: return "q8";
  }
  return "?";
}
std::string Name(const StateFormats& f) {
  return std::string("master=") + Name(f.master) + ",m=" + Name(f.momentum) +
         ",v=" + Name(f.variance);
}

namespace {
template <typename E, size_t N>
E ParseEnum(std::string_view s, const E (&values)[N], const char* what) {
  std::string choices;
  for (E v : values) {
    if (s == Name(v)) return v;
    choices += (choices.empty() ? "" : ", ") + std::string(Name(v));
  }
  throw Error(ErrorKind::kInvalidArgument, std::string("unknown ") + what + " '" +
                                               std::string(s) + "' (expected one of: " +
                                               choices + ")");
}
}  // namespace

DType ParseDType(std::string_view s) {
  static constexpr DType kAll[] = {DType::kF32, DType::kBF16, DType::kF16};
  return ParseEnum(s, kAll, "dtype");
}
Algorithm ParseAlgorithm(std::string_view s) {
  static constexpr Algorithm kAll[] = {Algorithm::kAdamW, Algorithm::kAdam, Algorithm::kLion,
                                       Algorithm::kSGD};
  return ParseEnum(s, kAll, "algorithm");
}
MasterFormat ParseMasterFormat(std::string_view s) {
  static constexpr MasterFormat kAll[] = {MasterFormat::kF32, MasterFormat::kBF16,
                                          MasterFormat::kBF16Ecc8, MasterFormat::kBF16Ecc16};
  return ParseEnum(s, kAll, "master format");
}
MomentFormat ParseMomentFormat(std::string_view s) {
  static constexpr MomentFormat kAll[] = {MomentFormat::kF32, MomentFormat::kQ8};
  return ParseEnum(s, kAll, "moment format");
}

size_t DTypeSize(DType t) noexcept { return t == DType::kF32 ? 4 : 2; }

bool HasMomentum(Algorithm algo, const HyperParams& h) noexcept {
  return algo != Algorithm::kSGD || h.momentum != 0.0;
}
bool HasVariance(Algorithm algo) noexcept {
  return algo == Algorithm::kAdamW || algo == Algorithm::kAdam;
}

size_t StateBytes(Algorithm algo, const HyperParams& h, const StateFormats& f, size_t n) {
  const size_t groups = (n + kQuantGroup - 1) / kQuantGroup;
  auto moment = [&](MomentFormat mf) { return mf == MomentFormat::kF32 ? 4 * n : n + 2 * groups; };
  size_t bytes = 0;
  switch (f.master) {
    case MasterFormat::kF32: bytes += 4 * n; break;
    case MasterFormat::kBF16: bytes += 2 * n; break;
    case MasterFormat::kBF16Ecc8: bytes += 3 * n; break;
    case MasterFormat::kBF16Ecc16: bytes += 4 * n; break;
  }
  if (HasMomentum(algo, h)) bytes += moment(f.momentum);
  if (HasVariance(algo)) bytes += moment(f.variance);
  return bytes;
}

void ValidateHyperParams(Algorithm algo, const HyperParams& h, std::string_view where) {
  auto fail = [&](const char* name, double value, const char* rule) {
    throw Error(ErrorKind::kInvalidArgument, std::string(where) + ": " + name + " = " +
                                                 std::to_string(value) + " must be " + rule);
  };
  auto finite = [](double x) { return std::isfinite(x); };
  if (!finite(h.lr_scale) || h.lr_scale < 0) fail("lr_scale", h.lr_scale, "finite and >= 0");
  if (!finite(h.weight_decay) || h.weight_decay < 0)
    fail("weight_decay", h.weight_decay, "finite and >= 0");
  switch (algo) {
    case Algorithm::kAdamW:
    case Algorithm::kAdam:
      if (!finite(h.eps) || h.eps <= 0) fail("eps", h.eps, "finite and > 0");
      [[fallthrough]];
    case Algorithm::kLion:
      if (!finite(h.beta1) || h.beta1 < 0 || h.beta1 >= 1) fail("beta1", h.beta1, "in [0, 1)");
      if (!finite(h.beta2) || h.beta2 < 0 || h.beta2 >= 1) fail("beta2", h.beta2, "in [0, 1)");
      break;
    case Algorithm::kSGD:
      if (!finite(h.momentum) || h.momentum < 0 || h.momentum > 1)
        fail("momentum", h.momentum, "in [0, 1]");
      if (!finite(h.dampening) || h.dampening < 0 || h.dampening > 1)
        fail("dampening", h.dampening, "in [0, 1]");
      if (h.nesterov && h.momentum <= 0) fail("momentum", h.momentum, "> 0 when nesterov is set");
      if (h.nesterov && h.dampening != 0) fail("dampening", h.dampening, "0 when nesterov is set");
      break;
    default:
      throw Error(ErrorKind::kInvalidArgument,
                  std::string(where) + ": unknown algorithm value " +
                      std::to_string(static_cast<unsigned>(algo)));
  }
}

}  // namespace tandem
