// The initial state a fresh optimizer must hold (Note [Block-wise initialisation],
// offload/memory/state_init.h): TensorState's encoding of the parameters, compared byte for
// byte (state_init_test.cc, state_init_gpu_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "engine/dtype_io.h"
#include "engine/state_arrays.h"
#include "engine/tensor_state.h"
#include "tandem/snapshot.h"

namespace tandem::testing {

// The state of n elements initialised from `param` (n elements of `dtype`).
inline TensorState Expected(Algorithm algo, const HyperParams& h, const StateFormats& f,
                            const void* param, DType dtype, size_t n) {
  std::vector<float> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = num::LoadAsF32(param, dtype, i);
  return TensorState(algo, h, f, w.data(), n);
}

// Every array of `got` equals the same array of `want`, byte for byte.
// (TensorSnapshot and TensorState name their arrays alike.)
template <typename Got>
void ExpectSameArrays(const Got& got, const TensorState& want, const std::string& who) {
  std::vector<std::pair<const void*, size_t>> g, w;
  ForEachStateVector(got, [&](StateArray, const auto& v) {
    g.push_back({v.data(), v.size() * sizeof(v[0])});
  });
  ForEachStateVector(want, [&](StateArray, const auto& v) {
    w.push_back({v.data(), v.size() * sizeof(v[0])});
  });
  for (size_t a = 0; a < g.size(); ++a) {
    ASSERT_EQ(g[a].second, w[a].second) << who << " array " << a;
    if (g[a].second == 0) continue;  // unused array: no pointer to compare
    EXPECT_EQ(std::memcmp(g[a].first, w[a].first, g[a].second), 0) << who << " array " << a;
  }
}

}  // namespace tandem::testing
