// What the whole-step benchmarks of bench/hybrid/ share: a model's bf16 parameters and
// gradients in device memory (shapes from a planner preset or a config.json), the
// optimizer's TensorSpecs over them, and CUDA error checks that end the benchmark.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tandem/optimizer.h"
#include "tandem/planner.h"

namespace tandem::bench {

// Prints the failing call and exits with status 2 (a benchmark, not library code).
inline void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Deterministic bf16 values in [-scale/2, scale/2), rounded to nearest even.
__global__ void FillBf16(uint16_t* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    const float u = (float(x & 0xFFFFFF) / 16777216.0f - 0.5f) * scale;
    const uint32_t bits = __float_as_uint(u);
    p[i] = uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
  }
}

struct DeviceModel {
  std::string name;
  std::vector<planner::ModelTensor> shapes;  // forward order
  std::vector<void*> params, grads;

  // A preset name (llama3-1b, ...) or a Hugging Face style config.json.
  explicit DeviceModel(const std::string& model) : name(model) {
    shapes = (model.find(".json") != std::string::npos ? planner::ModelFromConfigFile(model)
                                                       : planner::ModelFromPreset(model))
                 .tensors;
  }
  ~DeviceModel() {
    for (void* p : params) cudaFree(p);
    for (void* g : grads) cudaFree(g);
  }
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;

  uint64_t numel() const {
    uint64_t n = 0;
    for (const auto& t : shapes) n += t.numel;
    return n;
  }
  // bf16 parameters (scale 0.04) and gradients (scale 1e-3, or zeros), in device memory.
  void Allocate(bool zero_grads = false) {
    for (const auto& t : shapes) {
      void *p = nullptr, *g = nullptr;
      Check(cudaMalloc(&p, t.numel * 2), "cudaMalloc param");
      Check(cudaMalloc(&g, t.numel * 2), "cudaMalloc grad");
      const uint32_t k = static_cast<uint32_t>(params.size());
      FillBf16<<<1024, 256>>>(static_cast<uint16_t*>(p), t.numel, 17u + k, 0.04f);
      if (zero_grads)
        Check(cudaMemset(g, 0, t.numel * 2), "cudaMemset grad");
      else
        FillBf16<<<1024, 256>>>(static_cast<uint16_t*>(g), t.numel, 91u + k, 1e-3f);
      params.push_back(p);
      grads.push_back(g);
    }
    Check(cudaDeviceSynchronize(), "fill");
  }
  std::vector<TensorSpec> Specs() const {
    std::vector<TensorSpec> specs;
    for (size_t i = 0; i < shapes.size(); ++i) {
      TensorSpec s;
      s.name = shapes[i].name;
      s.numel = shapes[i].numel;
      s.param_dtype = s.grad_dtype = DType::kBF16;
      s.param = params[i];
      s.grad = grads[i];
      specs.push_back(s);
    }
    return specs;
  }
};

}  // namespace tandem::bench
