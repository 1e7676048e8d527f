// The initial state in GPU mode (skipped without a GPU; Note [Block-wise initialisation],
// offload/memory/state_init.h): hot parts staged up through pinned memory, parameters read
// down block by block, streamed pieces whose master is the parameter on the device. A fresh
// optimizer's snapshot holds TensorState's encoding of the parameters for every master and
// moment format, parameter dtype, fraction and streamed share, and construction leaves the
// parameters' bits alone.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tandem/optimizer.h"
#include "tests/offload/hybrid_fixture.h"
#include "tests/offload/state_init_expect.h"

namespace tandem {
namespace {

using testing::ExpectSameArrays;
using testing::Expected;
using testing::Model;

TEST(StateInitGpu, FreshSnapshotIsTheEncodedParameters) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: GPU-mode test skipped";
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    Model m;
    m.param_dtype = dtype;
    m.Init(13);
    std::vector<void*> params, grads;
    for (size_t k = 0; k < m.sizes.size(); ++k) {
      void *p = nullptr, *g = nullptr;
      ASSERT_EQ(cudaMalloc(&p, std::max<size_t>(1, m.params[k].size())), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&g, std::max<size_t>(1, m.grads[k].size())), cudaSuccess);
      cudaMemcpy(p, m.params[k].data(), m.params[k].size(), cudaMemcpyHostToDevice);
      params.push_back(p);
      grads.push_back(g);
    }
    std::vector<TensorSpec> specs = m.Specs(2);
    for (size_t k = 0; k < specs.size(); ++k) {
      specs[k].param = params[k];
      specs[k].grad = grads[k];
    }
    for (MasterFormat master : {MasterFormat::kF32, MasterFormat::kBF16,
                                MasterFormat::kBF16Ecc8, MasterFormat::kBF16Ecc16})
      for (MomentFormat mf : {MomentFormat::kF32, MomentFormat::kQ8})
        for (double fraction : {0.0, 0.5, 1.0})
          for (double share : {0.0, 0.5, 1.0}) {
            OptimizerConfig c = testing::QuantizedConfig(
                ExecutionMode::kGpu, fraction, PlacementPolicy::kBackwardOrder, 96, 2);
            c.formats = {master, mf, mf == MomentFormat::kF32 ? MomentFormat::kQ8
                                                                : MomentFormat::kF32};
            c.offload_compute = share;
            c.stream_chunk_bytes = 4096;
            HybridOptimizer opt(specs, c);
            const OptimizerSnapshot snap = opt.Snapshot();
            for (size_t t = 0; t < m.sizes.size(); ++t) {
              const std::string who = std::string(Name(dtype)) + " " + Name(c.formats) +
                                      " fraction " + std::to_string(fraction) + " share " +
                                      std::to_string(share) + " tensor " + std::to_string(t);
              ExpectSameArrays(snap.tensors[t],
                               Expected(c.algorithm, c.groups[t % 2], c.formats,
                                        m.params[t].data(), dtype, m.sizes[t]),
                               who);
              std::vector<uint8_t> now(m.params[t].size());
              cudaMemcpy(now.data(), params[t], now.size(), cudaMemcpyDeviceToHost);
              EXPECT_EQ(now, m.params[t]) << who << ": construction changed the parameter";
            }
          }
    for (void* p : params) cudaFree(p);
    for (void* g : grads) cudaFree(g);
  }
}

}  // namespace
}  // namespace tandem
