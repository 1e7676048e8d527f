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
  std::string name;
  uint64_t numel = 0;
  DType param_dtype = DType::kF32;
  DType grad_dtype = DType::kF32;
  uint32_t group = 0;  // index into OptimizerSnapshot::groups

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
  StateFormats formats;
  std::vector<HyperParams> groups;  // per parameter group
  int64_t step = 0;                 // number of steps taken (the next step is step + 1)
  std::vector<TensorSnapshot> tensors;

  friend bool operator==(const OptimizerSnapshot&, const OptimizerSnapshot&) = default;
};

// Throws Error(kInvalidArgument) naming the first tensor/array whose size does not match
// its numel, formats and algorithm (e.g. "tensor 'wq.3': m_scales has 7 entries, expected 8"),
// or the second tensor that repeats a name ("tensor 'wq.3': duplicate name").
void ValidateSnapshot(const OptimizerSnapshot& s);

}  // namespace tandem
