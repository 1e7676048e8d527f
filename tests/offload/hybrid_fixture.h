// A small model-shaped problem for HybridOptimizer tests: tensors of awkward sizes (odd,
// empty, tiny, spanning several chunks) with parameters and per-step gradients drawn from
// a seeded RNG, in host memory (tests/offload/device_model.h puts it on the GPU).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/dtype_io.h"
#include "tandem/optimizer.h"

namespace tandem::testing {

struct Model {
  std::vector<uint64_t> sizes = {4096 + 17, 64, 1000, 3, 0, 2048, 33, 9000, 5, 777};
  DType param_dtype = DType::kBF16;
  DType grad_dtype = DType::kBF16;
  std::vector<std::vector<uint8_t>> params, grads;  // host copies

  void Init(unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    params.clear();
    grads.clear();
    for (uint64_t n : sizes) {
      params.emplace_back(n * DTypeSize(param_dtype));
      grads.emplace_back(n * DTypeSize(grad_dtype));
      for (uint64_t i = 0; i < n; ++i) Store(params.back().data(), param_dtype, i, nd(rng));
    }
  }
  // Gradients of step t (same for every optimizer under test).
  void FillGrads(int t, float scale = 0.1f) {
    std::mt19937 rng(1000 + t);
    std::normal_distribution<float> nd;
    for (size_t k = 0; k < sizes.size(); ++k)
      for (uint64_t i = 0; i < sizes[k]; ++i)
        Store(grads[k].data(), grad_dtype, i, nd(rng) * scale * float(1 + (i % 7)));
  }
  std::vector<TensorSpec> Specs(uint32_t groups = 1) {
    std::vector<TensorSpec> specs;
    for (size_t k = 0; k < sizes.size(); ++k) {
      TensorSpec s;
      s.name = "layer" + std::to_string(k);
      s.numel = sizes[k];
      s.param_dtype = param_dtype;
      s.grad_dtype = grad_dtype;
      s.param = params[k].data();
      s.grad = grads[k].data();
      s.group = static_cast<uint32_t>(k % groups);
      specs.push_back(s);
    }
    return specs;
  }
  static void Store(uint8_t* p, DType t, uint64_t i, float x) {
    num::StoreFromF32(p, t, i, x);
  }
};

// AdamW with bf16+ecc8 / q8 / q8 and two groups (decay 0.01; lr_scale 0.5), as the
// GPU-mode and checkpoint tests use it.
inline OptimizerConfig QuantizedConfig(ExecutionMode mode, double fraction,
                                       PlacementPolicy policy, uint64_t chunk, int threads) {
  OptimizerConfig c;
  c.algorithm = Algorithm::kAdamW;
  c.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  c.offload_fraction = fraction;
  c.placement = policy;
  c.chunk_elements = chunk;
  c.host_threads = threads;
  c.mode = mode;
  c.offload_compute = 0.0;  // the host pipeline; the streaming tests set their own
  c.groups.resize(2);
  c.groups[0].weight_decay = 0.01;
  c.groups[1].lr_scale = 0.5;
  return c;
}

// b rounded up to the 256-byte alignment the engine gives every state allocation: the
// closed-form memory tests (docs/user_guide.md, "Memory") compute their expectations with
// it, independently of the engine's layout code.
inline uint64_t Align256(uint64_t b) { return (b + 255) / 256 * 256; }

}  // namespace tandem::testing
