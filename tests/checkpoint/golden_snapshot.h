// The snapshots stored in tests/checkpoint/golden/*.ckpt, rebuilt from formulas so a test
// can compare what an old file loads to with what was written into it.
//
// v1_adamw_ecc8_q8.ckpt and v1_sgd_f32_deflate.ckpt were written by format version 1
// (before per-tensor steps, shapes and metadata) from GoldenSnapshot(kAdamW, ...) and
// GoldenSnapshot(kSGD, ...); never regenerate them with a newer writer.
// v2_adamw_ecc8_q8.ckpt was written by format version 2 (before per-tensor formats) from
// V2Golden() below; v3_adamw_mixed.ckpt by format version 3 from
// V2Golden(kGoldenOverride): tensor "layer.0.w" in formats of its own.
#pragma once

#include <cstdint>
#include <optional>

#include "tandem/snapshot.h"

namespace tandem::testing {

// The formats of tensor "layer.0.w" in v3_adamw_mixed.ckpt: another master, f32 moment.
inline constexpr StateFormats kGoldenOverride{MasterFormat::kBF16Ecc16, MomentFormat::kF32,
                                              MomentFormat::kQ8};

// Tensors "embed" (3 elements), "layer.0.w" (40) and "empty" (0) in two groups, step 42,
// every array filled with finite, valid values derived from the element index.
// With `layer0` set, tensor "layer.0.w" takes it as its own formats.
inline OptimizerSnapshot GoldenSnapshot(Algorithm algo, StateFormats f0,
                                        std::optional<StateFormats> layer0 = std::nullopt) {
  OptimizerSnapshot s;
  s.algo = algo;
  s.formats = f0;
  HyperParams g0, g1;
  g0.momentum = 0.9;
  g0.weight_decay = 0.01;
  g1.lr_scale = 0.5;
  g1.beta1 = 0.85;
  s.groups = {g0, g1};
  s.step = 42;
  const char* names[] = {"embed", "layer.0.w", "empty"};
  const uint64_t sizes[] = {3, 40, 0};
  for (int i = 0; i < 3; ++i) {
    TensorSnapshot t;
    t.name = names[i];
    t.numel = sizes[i];
    t.group = static_cast<uint32_t>(i % 2);
    t.param_dtype = i == 0 ? DType::kBF16 : DType::kF32;
    t.grad_dtype = i == 1 ? DType::kF16 : DType::kBF16;
    t.formats = i == 1 && layer0 ? *layer0 : f0;
    const StateFormats& f = t.formats;
    const size_t n = t.numel, groups = (n + kQuantGroup - 1) / kQuantGroup;
    const bool bf = f.master != MasterFormat::kF32;
    const bool hm = HasMomentum(algo, s.groups[t.group]), hv = HasVariance(algo);
    const bool mq = f.momentum == MomentFormat::kQ8, vq = f.variance == MomentFormat::kQ8;
    for (size_t k = 0; k < n; ++k) {
      const float x = static_cast<float>(k) - 17.25f;
      if (!bf) t.master_f32.push_back(x * 0.125f);
      if (bf) t.master_bf16.push_back(static_cast<uint16_t>(0x3F00 + k * 3));
      if (f.master == MasterFormat::kBF16Ecc8) t.ecc8.push_back(static_cast<int8_t>(k % 7) - 3);
      if (f.master == MasterFormat::kBF16Ecc16)
        t.ecc16.push_back(static_cast<int16_t>(k * 97) - 900);
      if (hm && !mq) t.m_f32.push_back(x * 0.01f);
      if (hm && mq) t.m_codes.push_back(static_cast<uint8_t>(k * 11));
      if (hv && !vq) t.v_f32.push_back(static_cast<float>(k) * 0.001f);
      if (hv && vq) t.v_codes.push_back(static_cast<uint8_t>(k * 5 + 1));
    }
    for (size_t g = 0; g < groups; ++g) {
      if (hm && mq) t.m_scales.push_back(static_cast<uint16_t>(0x3C00 + g));
      if (hv && vq) t.v_scales.push_back(static_cast<uint16_t>(0x3A00 + g));
    }
    s.tensors.push_back(std::move(t));
  }
  return s;
}

// GoldenSnapshot(kAdamW, bf16+ecc8/q8/q8, layer0) with shapes, tensor steps and metadata:
// what v2_adamw_ecc8_q8.ckpt (no layer0) and v3_adamw_mixed.ckpt (kGoldenOverride) hold.
inline OptimizerSnapshot V2Golden(std::optional<StateFormats> layer0 = std::nullopt) {
  const StateFormats f{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  OptimizerSnapshot s = GoldenSnapshot(Algorithm::kAdamW, f, layer0);
  s.tensors[0].shape = {3};
  s.tensors[0].step = 40;
  s.tensors[1].shape = {5, 8};
  s.tensors[1].step = 41;
  s.tensors[2].shape = {0, 4};
  s.metadata = "{\"golden\": \"v2\"}";
  return s;
}

}  // namespace tandem::testing
