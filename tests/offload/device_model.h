// The model of hybrid_fixture.h with its parameters and gradients in device memory, for
// the GPU-mode tests (offload_gpu_tests; needs CUDA).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "tandem/optimizer.h"
#include "tests/offload/hybrid_fixture.h"

namespace tandem::testing {

struct DeviceModel {
  Model host;
  std::vector<void*> params, grads;
  explicit DeviceModel(unsigned seed, std::vector<uint64_t> sizes = {}) {
    if (!sizes.empty()) host.sizes = std::move(sizes);
    host.Init(seed);
    for (size_t k = 0; k < host.sizes.size(); ++k) {
      void *p = nullptr, *g = nullptr;
      cudaMalloc(&p, std::max<size_t>(1, host.params[k].size()));
      cudaMalloc(&g, std::max<size_t>(1, host.grads[k].size()));
      cudaMemcpy(p, host.params[k].data(), host.params[k].size(), cudaMemcpyHostToDevice);
      params.push_back(p);
      grads.push_back(g);
    }
  }
  ~DeviceModel() {
    for (void* p : params) cudaFree(p);
    for (void* g : grads) cudaFree(g);
  }
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;
  void FillGrads(int t) {
    host.FillGrads(t);
    for (size_t k = 0; k < grads.size(); ++k)
      cudaMemcpy(grads[k], host.grads[k].data(), host.grads[k].size(), cudaMemcpyHostToDevice);
  }
  std::vector<TensorSpec> Specs(uint32_t groups = 2) {
    auto specs = host.Specs(groups);
    for (size_t k = 0; k < specs.size(); ++k) {
      specs[k].param = params[k];
      specs[k].grad = grads[k];
    }
    return specs;
  }
  std::vector<std::vector<uint8_t>> ReadParams() {
    cudaDeviceSynchronize();
    std::vector<std::vector<uint8_t>> out = host.params;
    for (size_t k = 0; k < params.size(); ++k)
      cudaMemcpy(out[k].data(), params[k], out[k].size(), cudaMemcpyDeviceToHost);
    return out;
  }
};

}  // namespace tandem::testing
