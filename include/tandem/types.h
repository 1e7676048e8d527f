// Tandem's vocabulary: element types, algorithms, state formats and hyper-parameters.
//
// Everything here is a plain value type, safe to copy and share between threads. The
// integer values of the enums are written to checkpoints and must never be renumbered.
// docs/numerics.md defines every format and update exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem {

// Element type of a parameter or gradient buffer.
enum class DType : uint8_t {
  kF32 = 0,   // IEEE binary32
  kBF16 = 1,  // bfloat16 (upper half of a binary32)
  kF16 = 2,   // IEEE binary16
};

enum class Algorithm : uint8_t {
  kAdamW = 0,  // Adam with decoupled weight decay (Loshchilov & Hutter)
  kAdam = 1,   // Adam with L2 weight decay added to the gradient
  kLion = 2,   // Lion (Chen et al. 2023), decoupled weight decay
  kSGD = 3,    // SGD with optional momentum, dampening, Nesterov and L2 weight decay
};

// How the master copy of each weight is stored.
enum class MasterFormat : uint8_t {
  kF32 = 0,        // 4 bytes: fp32
  kBF16 = 1,       // 2 bytes: bf16 only; updates smaller than half a bf16 ulp are lost
  kBF16Ecc8 = 2,   // 3 bytes: bf16 + int8 correction (about 16 significant bits)
  kBF16Ecc16 = 3,  // 4 bytes: bf16 + int16 correction (fp32 exact except 1 value in 2^17)
};

// How a first moment (Adam's m, Lion's and SGD's momentum) or a second moment (Adam's v)
// is stored.
enum class MomentFormat : uint8_t {
  kF32 = 0,  // 4 bytes per element
  kQ8 = 1,   // 1 byte per element plus one bf16 scale per group of kQuantGroup elements
};

// Quantization group: kQuantGroup consecutive elements of one tensor share one scale.
// Note [Group size]: the CUDA and SIMD kernels, the placement cut and the checkpoint
// layout all assume this value; each static_asserts it where it depends on it.
inline constexpr int kQuantGroup = 32;

struct StateFormats {
  MasterFormat master = MasterFormat::kF32;
  MomentFormat momentum = MomentFormat::kF32;  // Adam/AdamW m, Lion m, SGD momentum buffer
  MomentFormat variance = MomentFormat::kF32;  // Adam/AdamW v; ignored by Lion and SGD

  friend bool operator==(const StateFormats&, const StateFormats&) = default;
};

// Per-group hyper-parameters. The learning rate itself is given at every step, one per
// group (HybridOptimizer::Step(group_lrs)); lr_scale serves the one-lr form Step(lr) only,
// which steps group g with lr * lr_scale (checkpoints written with per-group ratios in it
// keep loading and meaning that).
struct HyperParams {
  double lr_scale = 1.0;      // Step(lr): lr * lr_scale; must be finite, >= 0
  double beta1 = 0.9;         // Adam, Lion (interpolation); [0, 1)
  double beta2 = 0.999;       // Adam (variance), Lion (momentum decay); [0, 1)
  double eps = 1e-8;          // Adam; finite, > 0
  double weight_decay = 0.0;  // all algorithms; finite, >= 0
  double momentum = 0.0;      // SGD; [0, 1]; 0 disables the momentum buffer
  double dampening = 0.0;     // SGD; [0, 1]
  bool nesterov = false;      // SGD; needs momentum > 0 and dampening == 0

  friend bool operator==(const HyperParams&, const HyperParams&) = default;
};

// Stable names used in tools, JSON and error messages: "f32", "bf16", "f16"; "adamw",
// "adam", "lion", "sgd"; "f32", "bf16", "bf16+ecc8", "bf16+ecc16"; "f32", "q8".
const char* Name(DType v) noexcept;
const char* Name(Algorithm v) noexcept;
const char* Name(MasterFormat v) noexcept;
const char* Name(MomentFormat v) noexcept;
std::string Name(const StateFormats& f);  // e.g. "master=bf16+ecc8,m=q8,v=q8"

// Parse the names above; each throws Error(kInvalidArgument) naming the bad text.
DType ParseDType(std::string_view s);
Algorithm ParseAlgorithm(std::string_view s);
MasterFormat ParseMasterFormat(std::string_view s);
MomentFormat ParseMomentFormat(std::string_view s);

// Bytes of one element of `t`.
size_t DTypeSize(DType t) noexcept;

// Whether `algo` keeps a first moment (SGD only when hyper.momentum > 0) / a second moment.
bool HasMomentum(Algorithm algo, const HyperParams& hyper) noexcept;
bool HasVariance(Algorithm algo) noexcept;

// Bytes of optimizer state (master + moments + scales) for a tensor of n elements,
// counting the bf16 weight of the bf16 master formats (which is also the model's weight).
size_t StateBytes(Algorithm algo, const HyperParams& hyper, const StateFormats& f, size_t n);

// Throws Error(kInvalidArgument) naming the first hyper-parameter that is non-finite or
// out of its range for `algo`; `where` prefixes the message (e.g. "group 2").
void ValidateHyperParams(Algorithm algo, const HyperParams& h, std::string_view where);

}  // namespace tandem
