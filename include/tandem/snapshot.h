// OptimizerSnapshot: a placement-independent copy of an optimizer's whole state.
//
// Each tensor's state is held whole, in the layout of one contiguous tensor (whatever
// part of it lived on the GPU or on the host), so a snapshot taken at one offload
// fraction restores at any other. Arrays follow docs/numerics.md: element i of a tensor
// is entry i of every per-element array, and group g (elements [32g, 32g+32)) uses entry
// g of a scales array. Arrays a format or algorithm does not use are empty.
// A plain value type: copyable, no internal synchronisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/types.h"

namespace tandem {

struct TensorSnapshot {
  std::string name;  // fully qualified parameter name where the caller gave one
  uint64_t numel = 0;
  // The parameter's original shape (row-major); empty means one dimension of numel
  // elements. When non-empty its product must equal numel.
  std::vector<uint64_t> shape;
  DType param_dtype = DType::kF32;
  DType grad_dtype = DType::kF32;
  uint32_t group = 0;  // index into OptimizerSnapshot::groups
  // Updates this tensor has received (its own bias-correction count, as torch keeps one
  // `step` per parameter): a tensor without a gradient at a step is not stepped. In
  // [0, OptimizerSnapshot::step].
  int64_t step = 0;
  // This tensor's state formats (TensorSpec::formats where it overrides the configured
  // ones, OptimizerSnapshot::formats otherwise): the arrays below are in these formats.
  // Always set, so a snapshot describes itself tensor by tensor.
  StateFormats formats;

  std::vector<float> master_f32;     // MasterFormat::kF32
  std::vector<uint16_t> master_bf16; // kBF16, kBF16Ecc8, kBF16Ecc16 (bf16 bit patterns)
  std::vector<int8_t> ecc8;          // kBF16Ecc8
  std::vector<int16_t> ecc16;        // kBF16Ecc16
  std::vector<float> m_f32, v_f32;   // MomentFormat::kF32
  std::vector<uint8_t> m_codes, v_codes;      // kQ8 (m codes are int8 bit patterns)
  std::vector<uint16_t> m_scales, v_scales;   // kQ8, ceil(numel / 32) bf16 scales

  friend bool operator==(const TensorSnapshot&, const TensorSnapshot&) = default;
};

struct OptimizerSnapshot {
  Algorithm algo = Algorithm::kAdamW;
  // The configured default formats (OptimizerConfig::formats). Each tensor's arrays follow
  // TensorSnapshot::formats, which equals this except for tensors that override it.
  StateFormats formats;
  std::vector<HyperParams> groups;  // per parameter group
  int64_t step = 0;                 // number of steps applied; in [0, 2^53]
  std::vector<TensorSnapshot> tensors;
  // Opaque text kept with the state for the optimizer's user, e.g. tandem.torch's
  // param_groups as JSON. The engine never reads it; checkpoints store it verbatim.
  std::string metadata;

  friend bool operator==(const OptimizerSnapshot&, const OptimizerSnapshot&) = default;
};

// Throws Error(kInvalidArgument) naming the first tensor/array whose size does not match
// its numel, its own formats (TensorSnapshot::formats: arrays a format the algorithm or
// group does not use are expected empty) and the algorithm, an unknown format value,
// (e.g. "tensor 'wq.3': m_scales has 7 entries, expected 8"),
// the second tensor that repeats a name ("tensor 'wq.3': duplicate name"), a step out of
// range, a shape whose product is not numel, or a value the format cannot hold (a NaN or
// infinite master, a NaN moment, a negative fp32 variance, a NaN, infinite or negative q8
// scale), naming the tensor, the array and the element.
void ValidateSnapshot(const OptimizerSnapshot& s);

// ValidateSnapshot, and what a run must be able to go on from: the step at most 2^52
// (2^52 more steps before it could no longer be saved) and every value decodes to a finite
// fp32 as the step decodes it (a q8 variance whose scale and code square to infinity
// cannot survive one step). HybridOptimizer::Restore and LoadCheckpoint apply it. Throws
// Error(kInvalidArgument) naming the tensor, the array and the element.
void ValidateRestorable(const OptimizerSnapshot& s);

}  // namespace tandem
